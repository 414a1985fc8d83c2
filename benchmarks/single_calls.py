"""Single calls as a user makes them, host time included, and the same calls inside CUDA graphs: both builds of
img2gray, torch.compile and a same-bytes copy side by side in one process.

    python -m benchmarks.single_calls --exact DIR --stable DIR [--quick] [--cases REGEX] [--no-compile] [--json FILE]

DIR: variant directories from `tools/builder/op.py --out DIR` (--abi exact / --abi stable), imported as
img2gray_exact and img2gray_stable (benchmarks/stable_abi_latency.py). Each call is timed alone between two CUDA
events on an idle device, so the host's path (Python, dispatch, launch) is in the time, as it is in the user's:
bench_op.py queues a head start of GPU work before each call and times the GPU alone. In graphs, each input set's
call is captured once and the replay is timed the same way; the host mode times each eager call's host part alone
(from an idle device until the call returns), so a gap in the eager mode can be told apart from the kernel's.
Inputs rotate over ROTATION_BYTES (the H200's L2 holds 60 MB); the reference is `clone` of a buffer with the op's bytes (half read, half written, a new output as the
op's). The candidates take turns in rounds (bench_op.time_rounds); "% copy" is the copy's time over the candidate's
(trimmed means), and each build is also given over the exact build and over torch.compile.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.bench_op import (
    busy_warning,
    eager_expression,
    gpu_cases,
    gpu_times_ms,
    input_sets,
    time_rounds,
    trimmed_mean,
)
from benchmarks.stable_abi_latency import load

ROTATION_BYTES = 256 << 20
COPY = "copy"
BUILDS = ("exact", "stable")
# Memory on the GPU that neither this process's allocator nor a CUDA context explains: another process's.
OTHERS_GPU_BYTES = 2 << 30


def rotation_sets(moved: int, rotation: int = ROTATION_BYTES) -> int:
    """How many input sets a case rotates over so that the sets together move at least `rotation` bytes."""
    return max(2, -(-rotation // moved))


def host_times_ms(fn: Callable[..., object], sets: int, repeats: int, warmup: int = 3, first: int = 0) -> list[float]:
    """Host times of `repeats` calls fn(i), each from an idle device until the call returns (Python, dispatch,
    allocation and the launch; not the kernel): where a single call's time beyond the kernel goes."""
    for i in range(first, first + warmup):
        fn(i % sets)
    times = []
    for i in range(first + warmup, first + warmup + repeats):
        torch.cuda.synchronize()
        begin = time.perf_counter_ns()
        fn(i % sets)
        times.append((time.perf_counter_ns() - begin) / 1e6)
    torch.cuda.synchronize()
    return times


def graphed(fn: Callable[..., object], sets: int) -> Callable[..., object]:
    """fn(i) captured in one CUDA graph per input set (after a warm-up on a side stream, as torch advises);
    the result replays set i's graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(sets):
            fn(i)
    torch.cuda.current_stream().wait_stream(side)
    graphs = []
    for i in range(sets):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn(i)
        graphs.append(graph)
    return lambda i: graphs[i].replay()


def summarize(case: str, moved: int, samples: dict[str, list[float]]) -> dict:
    """One row: each candidate's trimmed mean (ms) per mode, its % of the copy in that mode, and the builds over the
    exact build and over torch.compile. Keys of `samples` are "<candidate> <mode>" ("eager", "graph", or "host":
    the host's part of an eager call)."""
    means = {name: trimmed_mean(values) for name, values in samples.items()}
    row: dict = {
        "case": case,
        "bytes_moved": moved,
        "ms": means,
        "percent_of_copy": {},
        "over_exact": {},
        "over_torch_compile": {},
    }
    for name, ms in means.items():
        candidate, mode = name.rsplit(" ", 1)
        row["percent_of_copy"][name] = 100 * means[f"{COPY} {mode}"] / ms
        if candidate in BUILDS and f"exact {mode}" in means:
            row["over_exact"][name] = ms / means[f"exact {mode}"]
        if candidate in BUILDS and f"torch.compile {mode}" in means:
            row["over_torch_compile"][name] = ms / means[f"torch.compile {mode}"]
    return row


def render(rows: list[dict], target_percent: float = 97.0) -> str:
    """The table: per case and mode, the copy's time and each candidate's % of it, the builds over the exact build
    and over torch.compile; a mark where a build is below `target_percent` of the copy. The host mode gives each
    candidate's host time and its difference to the copy's."""
    lines = []
    for row in rows:
        lines.append(f"\n{row['case']} ({row['bytes_moved'] / 1e6:.1f} MB moved)")
        for mode in ("eager", "graph", "host"):
            copy_ms = row["ms"].get(f"{COPY} {mode}")
            if copy_ms is None:
                continue
            cells = []
            for name, percent in row["percent_of_copy"].items():
                candidate, candidate_mode = name.rsplit(" ", 1)
                if candidate_mode != mode or candidate == COPY:
                    continue
                if mode == "host":
                    ms = row["ms"][name]
                    cells.append(f"{candidate} {1e3 * ms:5.1f} us ({1e3 * (ms - copy_ms):+.1f})")
                    continue
                cell = f"{candidate} {percent:5.1f}%"
                if name in row["over_exact"] and candidate != "exact":
                    cell += f" ({row['over_exact'][name]:.3f}x exact)"
                if name in row["over_torch_compile"]:
                    cell += f" ({row['over_torch_compile'][name]:.3f}x compile)"
                if candidate in BUILDS and percent < target_percent:
                    cell += f" < {target_percent:g}%"
                cells.append(cell)
            lines.append(f"  {mode:<5} copy {1e3 * copy_ms:8.1f} us | " + " | ".join(cells))
    return "\n".join(lines)


def machine_warnings(load_average: float, cores: int, others_gpu_bytes: int) -> list[str]:
    """Why this run's times may be noise: the host busy (single calls are host time), or another process on the GPU."""
    warnings = [warning] if (warning := busy_warning(load_average, cores)) else []
    if others_gpu_bytes > OTHERS_GPU_BYTES:
        warnings.append(
            f"warning: {others_gpu_bytes / 2**30:.1f} GiB of GPU memory belong to other processes: the GPU "
            "is shared, times are noisy; re-run when it is free"
        )
    return warnings


def others_gpu_bytes() -> int:
    free, total = torch.cuda.mem_get_info()
    context = 1 << 30  # this process's CUDA context and its kernels, which the allocator does not count
    return max(0, total - free - torch.cuda.memory_reserved() - context)


def bench_case(builds: dict, case, rounds: int, calls: int, with_compile: bool) -> dict:
    name, shape, dtype, layout, dim = case
    probe = input_sets(shape, dtype, layout, 1, "cuda")[0]
    moved = probe.numel() * probe.element_size() * 4 // 3  # read 3 channels, write 1
    sets = rotation_sets(moved)
    inputs = [probe, *input_sets(shape, dtype, layout, sets - 1, "cuda")]
    copy_src = [torch.empty(moved // 2, dtype=torch.uint8, device="cuda") for _ in inputs]
    expected = builds["exact"].img2gray(probe, dim=dim)
    # Each call binds the case's tensors (default arguments), so that `del calls_of, timed` below frees them.
    calls_of: dict[str, Callable[..., object]] = {COPY: lambda i, src=copy_src: src[i].clone()}
    for abi, module in builds.items():
        assert torch.equal(module.img2gray(probe, dim=dim), expected), (abi, name)
        calls_of[abi] = lambda i, m=module, x=inputs: m.img2gray(x[i], dim=dim)
    if with_compile:
        torch._dynamo.reset()  # each case its own specialization, clear of the recompile limit
        compiled = torch.compile(eager_expression, dynamic=False)
        compiled(probe, dim)  # compiles here, outside the timed calls
        calls_of["torch.compile"] = lambda i, x=inputs: compiled(x[i], dim)
    timed = {f"{candidate} eager": fn for candidate, fn in calls_of.items()}
    timed |= {f"{candidate} graph": graphed(fn, sets) for candidate, fn in calls_of.items()}
    samples, _ = time_rounds(timed, sets, rounds, calls, timer=functools.partial(gpu_times_ms, host_time=True))
    host, _ = time_rounds(
        {f"{candidate} host": fn for candidate, fn in calls_of.items()}, sets, rounds, calls, timer=host_times_ms
    )
    samples |= host
    row = summarize(name, moved, samples)
    del calls_of, timed, inputs, copy_src
    torch.cuda.empty_cache()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exact", type=Path, required=True)
    parser.add_argument("--stable", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="batches of 8 instead of 64, fewer rounds")
    parser.add_argument("--cases", type=re.compile, default=re.compile(""), help="only the cases matching this regex")
    parser.add_argument("--no-compile", action="store_true", help="leave out torch.compile (its compiles take seconds)")
    parser.add_argument(
        "--rounds",
        type=int,
        help="rounds per case (default 16, 4 with --quick); more rounds narrow "
        "the spread that the host's noise gives a single call's time",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    builds = {
        abi: load(f"img2gray_{abi}", directory) for abi, directory in (("exact", args.exact), ("stable", args.stable))
    }
    warnings = machine_warnings(os.getloadavg()[0], os.cpu_count() or 1, others_gpu_bytes())
    for warning in warnings:
        print(warning)
    rounds, calls = (4, 10) if args.quick else (16, 20)
    rounds = args.rounds or rounds
    rows = [bench_case(builds, case, rounds, calls, not args.no_compile) for case in gpu_cases(args.quick, args.cases)]
    environment = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "variants": {abi: module.metadata()["variant"] for abi, module in builds.items()},
        "load_average": round(os.getloadavg()[0], 2),
        "warnings": warnings,
        "case": "single calls (host time included) and CUDA-graph replays, trimmed means of "
        f"{rounds} rounds x {calls} calls",
    }
    print(environment)
    print(render(rows))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"environment": environment, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
