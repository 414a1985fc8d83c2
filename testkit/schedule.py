"""The order of a test run: the few tests that compile or build for tens of seconds start first, spread over the
pytest-xdist workers, so that no worker is left with one at the end while the others idle.

On 2 cores most of the suite's CPU time is a handful of builds. In collection order the reproducibility builds came
last and set the wall time: one worker ran a half-minute build after the other had finished.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

Item = TypeVar("Item")


def heavy_first(items: Sequence[Item], cost: Mapping[Item, float], workers: int) -> list[Item]:
    """`items` reordered for `workers` workers that each take a contiguous share of the list, in order (as
    pytest-xdist's worksteal scheduler hands them out; with one worker, the whole list).

    The costly items (those in `cost`) are dealt longest first to the worker with the least cost so far, and lead
    that worker's share; the other items keep their order and fill the shares up to their sizes."""
    workers = max(1, workers)
    shares: list[list[Item]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for item in sorted((item for item in items if item in cost), key=lambda item: -cost[item]):
        least = loads.index(min(loads))
        shares[least].append(item)
        loads[least] += cost[item]
    light = iter([item for item in items if item not in cost])
    ordered: list[Item] = []
    for worker, share in enumerate(shares):
        size = len(items) * (worker + 1) // workers - len(items) * worker // workers
        ordered += share
        ordered += [item for _, item in zip(range(size - len(share)), light, strict=False)]
    ordered += list(light)  # where one worker's costly items overfill its share
    return ordered
