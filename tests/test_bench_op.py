"""The GPU benchmark's timing schedule (benchmarks/bench_op.py), checked without a GPU: the per-block timer is
replaced by one that records which candidate ran when."""

from __future__ import annotations

import pytest

from benchmarks import bench_op, machine


@pytest.fixture
def schedule(monkeypatch):
    """(candidate, first input index) of every block time_rounds times, in the order it times them."""
    order: list[tuple[str, int]] = []

    def fake_times(fn, sets, repeats, warmup=3, first=0):
        order.append((fn.__name__, first))
        return [fn(first)] * repeats

    monkeypatch.setattr(bench_op, "gpu_times_ms", fake_times)
    return order


def candidate(name: str, value: float):
    def fn(first: int) -> float:
        return value

    fn.__name__ = name
    return fn


def test_rounds_rotate_the_order_and_drop_the_first(schedule):
    timed = {name: candidate(name, value) for name, value in (("a", 1.0), ("b", 2.0), ("c", 3.0))}
    samples, round_means = bench_op.time_rounds(timed, sets=7, rounds=3, calls=4)
    names = [name for name, _ in schedule]
    assert names == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    # Round 0 (the first three blocks) is timed but not kept.
    assert {name: len(values) for name, values in samples.items()} == {"a": 12, "b": 12, "c": 12}
    assert round_means == {"a": [1.0] * 3, "b": [2.0] * 3, "c": [3.0] * 3}
    # One rotation over the inputs across every block (warm-up calls included): no block reuses another's inputs.
    starts = [first for _, first in schedule]
    assert starts == [block * (4 + 3) for block in range(12)]


def test_each_candidate_leads_a_round_as_often_as_the_others(schedule):
    timed = {name: candidate(name, 0.0) for name in "abcd"}
    bench_op.time_rounds(timed, sets=2, rounds=8, calls=1)
    leaders = [schedule[4 * r][0] for r in range(1, 9)]  # kept rounds only
    assert sorted(leaders) == sorted("abcd" * 2)


def test_paired_differences_and_trimmed_mean():
    mean, error, faster = bench_op.paired([1.0, 2.0, 4.0], [2.0, 2.0, 2.0])
    assert (mean, faster) == (1.0 / 3.0, 1)
    assert error == pytest.approx(7**0.5 / 3)  # differences -1, 0, 2: sample deviation (7/3) ** 0.5, over 3 ** 0.5
    # A tenth trimmed from each end: the one stretched call of ten does not move the mean.
    assert bench_op.trimmed_mean([1.0] * 8 + [0.0, 100.0]) == 1.0


def test_a_slower_op_is_called_slower():
    # Failed before: "img2gray is  0.08x faster" for 11.99 ms against OpenCV's 0.99 ms.
    assert bench_op.versus(11.99, 0.99) == "img2gray is 12.11x slower"
    assert bench_op.versus(0.2, 0.5) == "img2gray is 2.50x faster"


def test_the_cpu_is_named_from_cpuinfo():
    cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9454 48-Core Processor\nflags\t: fpu\n"
    assert machine.cpu_model(cpuinfo) == "AMD EPYC 9454 48-Core Processor"
    assert machine.cpu_model("processor\t: 0\nBogoMIPS\t: 50.00\n") is None


def test_the_cpu_family_and_model_are_read_from_cpuinfo():
    # A KVM guest named its Emerald Rapids CPU only "Intel(R) Xeon(R) Processor": family and model tell which it is.
    cpuinfo = "processor\t: 0\ncpu family\t: 6\nmodel\t\t: 207\nmodel name\t: Intel(R) Xeon(R) Processor\n"
    assert machine.cpu_family_model(cpuinfo) == "family 6 model 207"
    assert machine.cpu_family_model("processor\t: 0\nmodel name\t: Apple M2\n") is None


def test_a_busy_machine_is_called_out():
    assert bench_op.busy_warning(0.4, 2) is None
    warning = bench_op.busy_warning(4.1, 2)
    assert warning.startswith("warning: the machine is busy (load average 4.1 on 2 cores)")


def test_spread_warning_names_the_noisy_candidates(capsys):
    assert bench_op.relative_spread([1.0, 1.0, 1.0, 1.0, 1.0]) == 0.0
    row = {
        "case": "c",
        "bytes_moved": 100,
        "copy_ms": 1.0,
        "results": {"img2gray": 2.0, "OpenCV cvtColor": 1.0},
        "spread": {"img2gray": 0.5, "OpenCV cvtColor": 0.01},
    }
    bench_op.print_table([row], "cpu")
    out = capsys.readouterr().out
    assert "img2gray is 2.00x slower" in out
    assert "warning: wide spread between calls (interquartile range img2gray 50% of the median)" in out


def test_each_machine_records_into_its_own_folder():
    emerald_rapids = (
        "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\nmodel name\t: Intel(R) Xeon(R) Processor\n"
    )
    assert machine.results_folder(emerald_rapids, 2) == "cpu-xeon-emr"
    # The H100 machine's host has the same CPU with 16 cores: its records must not overwrite the 2-core guest's.
    assert machine.results_folder(emerald_rapids, 16) == "cpu-intel-family6-model207-16-cores"
    zen5 = "vendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC 9655\n"
    assert machine.results_folder(zen5, 2) == "cpu-zen5"
    # A CPU without a folder yet is named by its vendor, family and model, never lumped with another.
    unnamed = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 173\n"
    assert machine.results_folder(unnamed, 2) == "cpu-intel-family6-model173-2-cores"
    assert machine.results_folder("processor\t: 0\nBogoMIPS\t: 50.00\n", 4).endswith("-4-cores")


def test_a_cpu_run_without_json_records_into_this_cpus_folder(monkeypatch):
    monkeypatch.setattr(bench_op, "this_results_folder", lambda: "cpu-xeon-emr")
    assert bench_op.cpu_record_path(1) == bench_op.ROOT / "benchmarks/results/cpu-xeon-emr/bench.json"
    assert bench_op.cpu_record_path(2) == bench_op.ROOT / "benchmarks/results/cpu-xeon-emr/bench-2-threads.json"


def test_ratios_are_taken_round_by_round():
    # The machine slowed down in rounds 2 and 3 for both sides: per-round ratios stay at 2, a ratio of medians does not.
    opencv = [2.0, 8.0, 8.0, 2.0, 2.0]
    ours = [1.0, 4.0, 4.0, 1.0, 1.0]
    summary = bench_op.ratio_summary(opencv, ours)
    assert summary == {"median": 2.0, "q1": 2.0, "q3": 2.0}
    assert bench_op.ratio_summary([3.0], [1.0]) == {"median": 3.0, "q1": 3.0, "q3": 3.0}


def test_cpu_rows_carry_per_round_ratios(monkeypatch):
    rounds = iter(range(10_000))
    # Every block's fastest call: the copies 1 ms, img2gray 1.25 ms, OpenCV 2.5 ms, all twice as slow in odd rounds.
    speeds = {"memcpy": 1.0, "torch copy_": 1.2, "img2gray": 1.25, bench_op.OPENCV: 2.5}

    def fake_rounds(timed, rounds_count, calls):
        slow = [1 + next(rounds) % 2 for _ in range(rounds_count)]
        return {name: [speeds[name] * s for s in slow] for name in timed}

    monkeypatch.setattr(bench_op, "cpu_rounds", fake_rounds)
    monkeypatch.setattr(bench_op, "copy_candidates", lambda moved: dict.fromkeys(("memcpy", "torch copy_"), lambda: 0))
    row = bench_op.cpu_row("c", 100, {"img2gray": lambda: 0, bench_op.OPENCV: lambda: 0}, 6, 1)
    assert row["copy_fraction"]["img2gray"]["median"] == 0.8
    assert row["img2gray_vs_opencv"]["median"] == 2.0
    assert "load_average_before" in row


def test_rounds_where_a_thread_waited_are_left_out():
    # Round 1: img2gray waited for a descheduled worker (a 4 ms tick); round 3: the copy did. Only rounds 0 and 2 are
    # clean, and a 1.4x slower round of both sides alike still is.
    series = {"copy": [0.04, 0.04, 0.056, 4.0], "img2gray": [0.05, 4.05, 0.07, 0.05]}
    assert bench_op.clean_rounds(series) == [0, 2]


def test_few_clean_rounds_fall_back_to_every_round(monkeypatch):
    stalls = iter([[0.05, 4.0, 4.0, 4.0], [4.0, 0.05, 0.05, 0.05]])

    def fake_rounds(timed, rounds_count, calls):
        return {"memcpy": [1.0] * 4, "torch copy_": [1.0] * 4, "img2gray": next(stalls)}

    monkeypatch.setattr(bench_op, "cpu_rounds", fake_rounds)
    monkeypatch.setattr(bench_op, "copy_candidates", lambda moved: dict.fromkeys(("memcpy", "torch copy_"), lambda: 0))
    row = bench_op.cpu_row("c", 100, {"img2gray": lambda: 0}, 4, 1)
    assert (row["clean_rounds"], row["rounds"]) == (1, 4)
    assert row["copy_fraction"]["img2gray"]["median"] == 0.25  # every round: 20, 0.25, 0.25, 0.25
    row = bench_op.cpu_row("c", 100, {"img2gray": lambda: 0}, 4, 1)
    assert (row["clean_rounds"], row["copy_fraction"]["img2gray"]["median"]) == (3, 20.0)
