"""testkit/schedule.py: the costly tests lead the workers' shares, longest first, balanced."""

from __future__ import annotations

from testkit.schedule import heavy_first


def shares(ordered: list[str], workers: int) -> list[list[str]]:
    """What pytest-xdist's worksteal scheduler hands each worker first: contiguous, equal shares."""
    return [ordered[len(ordered) * w // workers : len(ordered) * (w + 1) // workers] for w in range(workers)]


def test_costly_items_lead_each_workers_share_balanced_longest_first():
    items = [f"t{i}" for i in range(20)]
    cost = {"t3": 38, "t17": 29, "t18": 27, "t9": 27, "t5": 22, "t19": 22}
    ordered = heavy_first(items, cost, workers=2)

    assert sorted(ordered) == sorted(items)
    first, second = shares(ordered, 2)
    assert first[:3] == ["t3", "t18", "t19"] and second[:3] == ["t17", "t9", "t5"]  # 87 and 78 CPU-s
    # The others keep their order.
    assert [item for item in ordered if item not in cost] == [item for item in items if item not in cost]


def test_one_worker_runs_the_costly_items_first():
    assert heavy_first(["a", "b", "c", "d"], {"c": 5, "d": 9}, workers=1) == ["d", "c", "a", "b"]


def test_more_costly_items_than_a_share_holds_loses_none():
    items = ["a", "b", "c", "d", "e"]
    ordered = heavy_first(items, {"a": 1, "b": 2, "c": 3, "d": 4}, workers=4)
    assert sorted(ordered) == items and ordered[:4] == ["d", "c", "b", "a"]
