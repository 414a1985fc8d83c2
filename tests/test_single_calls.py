"""The single-call GPU benchmark (benchmarks/single_calls.py) without a GPU: its rotation, its table of ratios
against the copy, the exact build and torch.compile, its busy-machine warnings, and its use of bench_op's rounds."""

from __future__ import annotations

from benchmarks import bench_op, single_calls


def test_inputs_rotate_over_at_least_256_mb():
    assert single_calls.rotation_sets(8 << 20) == 32
    assert single_calls.rotation_sets((8 << 20) + 1) == 32  # rounded up: 32 sets of a little more than 8 MB
    assert single_calls.rotation_sets(3 << 30) == 2  # never fewer than two: no call finds its input where it left it


SAMPLES = {  # trimmed means are the values themselves
    "copy eager": [0.100] * 10,
    "exact eager": [0.102] * 10,
    "stable eager": [0.110] * 10,
    "torch.compile eager": [0.125] * 10,
    "copy graph": [0.090] * 10,
    "exact graph": [0.091] * 10,
    "stable graph": [0.090] * 10,
    "torch.compile graph": [0.100] * 10,
    "copy host": [0.005] * 10,
    "exact host": [0.0056] * 10,
    "stable host": [0.0071] * 10,
}


def test_each_build_is_given_against_the_copy_the_exact_build_and_torch_compile():
    row = single_calls.summarize("4K frame", 33_177_600, SAMPLES)
    assert round(row["percent_of_copy"]["exact eager"], 1) == 98.0
    assert round(row["percent_of_copy"]["stable eager"], 1) == 90.9
    assert round(row["over_exact"]["stable eager"], 3) == 1.078
    assert round(row["over_torch_compile"]["exact graph"], 2) == 0.91
    assert "copy eager" not in row["over_exact"] and "torch.compile eager" not in row["over_exact"]
    table = single_calls.render([row])
    eager, graph, host = (line for line in table.splitlines() if line.startswith("  "))
    assert eager.startswith("  eager copy    100.0 us | exact  98.0%")
    assert "stable  90.9% (1.078x exact) (0.880x compile) < 97%" in eager  # below the target: marked
    assert "torch.compile  80.0%" in eager and "compile  80.0% (" not in eager
    assert "< 97%" not in graph and "stable 100.0% (0.989x exact)" in graph
    # The host part of an eager call: each candidate's time and its difference to the copy's, no target.
    assert host == "  host  copy      5.0 us | exact   5.6 us (+0.6) | stable   7.1 us (+2.1)"


def test_a_busy_host_or_a_shared_gpu_is_called_out():
    assert single_calls.machine_warnings(0.5, 16, 0) == []
    host, gpu = single_calls.machine_warnings(15.0, 16, 5 << 30)
    assert host.startswith("warning: the machine is busy (load average 15.0 on 16 cores)")
    assert gpu.startswith("warning: 5.0 GiB of GPU memory belong to other processes")


def test_single_calls_take_turns_as_bench_op_rounds_do():
    order = []

    def timer(fn, sets, repeats, warmup=3, first=0):
        order.append(fn(first))
        return [1.0] * repeats

    timed = {name: (lambda first, name=name: name) for name in ("copy eager", "exact eager", "stable eager")}
    samples, _ = bench_op.time_rounds(timed, sets=4, rounds=2, calls=5, timer=timer)
    assert order == [
        "copy eager",
        "exact eager",
        "stable eager",
        "exact eager",
        "stable eager",
        "copy eager",
        "stable eager",
        "copy eager",
        "exact eager",
    ]
    assert {name: len(values) for name, values in samples.items()} == dict.fromkeys(timed, 10)
