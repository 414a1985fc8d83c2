"""img2gray against its peers, measured side by side in one process.

    python benchmarks/bench_op.py --device cuda|cpu [--json PATH] [--quick] [--ncu] [--cases REGEX]

GPU: CUDA-event medians (GPU time: the host enqueues each call while the GPU is still busy) over input
sets rotated across more than 512 MB (the L2 holds 60 MB), peers torch eager, torch.compile of
the same expression, torchvision and kornia (when installed). The candidates of a case take turns in rounds
(time_rounds); against torch.compile, img2gray is also given as the mean of per-round differences with its
standard error. "% copy" is the op's effective bandwidth (3 channels read + 1 written) over that of a
device-to-device copy moving the same number of bytes.
img2gray is timed twice: with out= into a fresh buffer per call (as the copy writes), and returning a new
output per call, as the peers are called and compared.
CPU: uint8 frames (720p, 1080p, 4K) as HWC, NCHW and channels_last, and float32/float16/bfloat16 1080p (NCHW and
channels_last); every library on the same thread count, the candidates of a case taking turns in rounds
(cpu_rounds), medians over rounds; "copy" is the faster of a one-thread memcpy and torch's copy_ of the same bytes;
peers OpenCV and PIL (on the frame as HWC; OpenCV on float32 too) and torch eager (1080p HWC, and the float frames),
their versions in the record's environment. "% copy" and "x OpenCV" are medians of per-round ratios (each round's
candidates ran back to back, so a slow spell of the machine falls on both sides of a ratio), with their interquartile
range, over the rounds in which none of them waited for a descheduled thread (clean_rounds). Without --json the CPU
record of a whole run (not --quick, not --cases) goes to benchmarks/results/cpu-<this machine>/ (benchmarks/machine.py
names it): bench.json on one thread, bench-N-threads.json on N.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

try:
    from benchmarks.machine import this_cpu, this_results_folder
except ModuleNotFoundError:  # run as a script (python benchmarks/bench_op.py): its own folder is on the path
    from machine import this_cpu, this_results_folder  # type: ignore[no-redef, import-not-found]  # a folder mypy does not search

ROOT = Path(__file__).resolve().parent.parent
BT601 = (0.299, 0.587, 0.114)


def eager_expression(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The obvious PyTorch code: what users write without a kernel."""
    r, g, b = x.float().unbind(dim) if x.dtype == torch.uint8 else x.unbind(dim)
    y = BT601[0] * r + BT601[1] * g + BT601[2] * b
    if x.dtype == torch.uint8:
        return y.round_().clamp_(0, 255).to(torch.uint8)
    return y


# GPU cycles of busy-waiting queued before each timed call (about 1 ms): the host enqueues the start
# event, the call and the end event while the GPU is still busy, so the events time the GPU work and not the
# host's launch path (which the per-call latency row measures separately). Without it a 15 MB copy timed
# at 43 us (345 GB/s): host time, for the copy and the op alike. 100 us was not always enough: in one H200
# run torch.compile's single frames timed 1.4-3.3x slower than in the run before while its batches matched
# (its host path outlasted the head start).
HOST_HEADSTART_CYCLES = 2_000_000


# Bytes read before each candidate's run so that it starts from an L2 holding no dirty lines (the H200's L2
# holds 60 MB): a kernel pays for the dirty lines its predecessor left (their write-back competes with its
# own traffic), so without this a candidate's time depended on which candidate ran before it.
L2_CLEAN_BYTES = 256 << 20


def clean_l2() -> None:
    """Read L2_CLEAN_BYTES: the dirty lines of earlier calls are written back now, not during the next run."""
    torch.empty(L2_CLEAN_BYTES, dtype=torch.uint8, device="cuda").amax()


def gpu_times_ms(
    fn: Callable[..., object], sets: int, repeats: int, warmup: int = 3, first: int = 0, *, host_time: bool = False
) -> list[float]:
    """GPU times of `repeats` calls fn(i), i rotating over `sets` from `first` after `warmup` untimed calls,
    starting from a clean L2. Each call starts behind a head start of queued GPU work, so the host's path is
    hidden; with `host_time`, each starts on an idle device instead and its host path is in the time, as in a
    user's single call (benchmarks/single_calls.py)."""
    clean_l2()
    for i in range(first, first + warmup):
        fn(i % sets)
    torch.cuda.synchronize()
    times = []
    for i in range(
        first + warmup, first + warmup + repeats
    ):  # continue the rotation: no set comes back while still in L2
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if host_time:
            torch.cuda.synchronize()
        else:
            torch.cuda._sleep(HOST_HEADSTART_CYCLES)
        start.record()
        fn(i % sets)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def trimmed_mean(values: list[float], cut: float = 0.1) -> float:
    """Mean without the lowest and highest `cut` of the values: resolves below the event timer's 32 ns tick, which
    a median cannot, and drops the rare call that an interrupt or a clock change stretched."""
    ordered = sorted(values)
    k = int(len(ordered) * cut)
    return statistics.fmean(ordered[k : len(ordered) - k])


def paired(round_means: list[float], base: list[float]) -> tuple[float, float, int]:
    """Mean and standard error of the per-round differences against `base`, and the rounds it was faster."""
    diffs = [a - b for a, b in zip(round_means, base, strict=False)]
    return statistics.fmean(diffs), statistics.stdev(diffs) / len(diffs) ** 0.5, sum(d < 0 for d in diffs)


def time_rounds(
    timed: dict[str, Callable[..., object]],
    sets: int,
    rounds: int,
    calls: int,
    timer: Callable[..., list[float]] | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """All samples (ms) and per-round trimmed means (ms) of each candidate, timed in blocks of `calls` that take
    turns, each from a clean L2, after one round that is not kept. Taking turns spreads the machine's drift over
    every candidate alike, and each round starts one candidate later, so that no candidate keeps a place in the
    order. In the H200 runs before this (benchmarks/experiments/README.md) the first block of a case
    ran 145-344 ns slow (it was always the op's), and on the 720p float16 frame the candidate timed last before
    the copy came out best in runs 3 to 7, a different kernel each time. `timer` times one block (gpu_times_ms's
    signature; gpu_times_ms by default)."""
    timer = timer or gpu_times_ms
    names = list(timed)
    samples: dict[str, list[float]] = {name: [] for name in names}
    round_means: dict[str, list[float]] = {name: [] for name in names}
    turn = 0  # one rotation over all calls of the case: no call finds its input in L2
    for round_index in range(rounds + 1):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            block = timer(timed[name], sets, calls, warmup=3, first=turn)
            turn += calls + 3
            if round_index == 0:
                continue
            samples[name] += block
            round_means[name].append(trimmed_mean(block))
    return samples, round_means


def input_sets(shape, dtype, layout: str, count: int, device: str) -> list[torch.Tensor]:
    def make() -> torch.Tensor:
        if dtype == torch.uint8:
            x = torch.randint(0, 256, shape, dtype=dtype, device=device)
        else:
            x = torch.rand(shape, dtype=dtype, device=device)
        return x.contiguous(memory_format=torch.channels_last) if layout == "channels_last" else x

    return [make() for _ in range(count)]


FRAMES = {"720p": (720, 1280), "1080p": (1080, 1920), "4K": (2160, 3840)}


def gpu_cases(quick: bool, only: re.Pattern = re.compile("")):
    """(name, shape, dtype, layout, dim): single frames as a video pipeline converts them, small and large batches."""
    batch = 8 if quick else 64
    cases: list[tuple[str, tuple[int, ...], torch.dtype, str, int]] = []
    for label, (h, w) in FRAMES.items():
        cases.append((f"{h}x{w}x3 uint8 HWC ({label} frame)", (h, w, 3), torch.uint8, "hwc", -1))
        cases.append((f"1x3x{h}x{w} float16 NCHW ({label} frame)", (1, 3, h, w), torch.float16, "nchw", -3))
        cases.append((f"1x3x{h}x{w} float32 NCHW ({label} frame)", (1, 3, h, w), torch.float32, "nchw", -3))
    cases.append(("1x3x2160x3840 uint8 NCHW (4K frame)", (1, 3, 2160, 3840), torch.uint8, "nchw", -3))
    cases.append(("8x3x720x1280 float16 NCHW", (8, 3, 720, 1280), torch.float16, "nchw", -3))
    cases.append(("2x1080x1920x3 uint8 HWC", (2, 1080, 1920, 3), torch.uint8, "hwc", -1))
    cases.append(("8x3x1080x1920 uint8 NCHW", (8, 3, 1080, 1920), torch.uint8, "nchw", -3))
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.uint8):
        cases.append((f"{batch}x3x1080x1920 {str(dtype)[6:]} NCHW", (batch, 3, 1080, 1920), dtype, "nchw", -3))
    cases.append((f"{batch}x1080x1920x3 uint8 HWC", (batch, 1080, 1920, 3), torch.uint8, "hwc", -1))
    cases.append((f"{batch}x3x1080x1920 uint8 channels_last", (batch, 3, 1080, 1920), torch.uint8, "channels_last", -3))
    cases.append(
        (f"{batch}x3x1080x1920 float32 channels_last", (batch, 3, 1080, 1920), torch.float32, "channels_last", -3)
    )
    return [case for case in cases if only.search(case[0])]


NEW_OUTPUT = "img2gray (new output)"

# Every case rotates over input sets of at least this many bytes in all (the H200's L2 is 60 MB), so that
# no timed call finds its input in L2.
ROTATION_BYTES = 512 << 20


def bench_gpu(img2gray, quick: bool, with_peers: bool = True, only: re.Pattern = re.compile("")) -> list[dict]:
    # torch.compile's entry is each case's own compiled function (below); its place here keeps the column order.
    peers: dict[str, Callable[..., Any]] = {"torch eager": eager_expression, "torch.compile": eager_expression}
    try:
        import torchvision.transforms.v2.functional as tvf

        peers["torchvision"] = lambda x, dim: tvf.rgb_to_grayscale(x.movedim(dim, -3))
    except ImportError:
        pass
    try:
        import kornia

        peers["kornia"] = lambda x, dim: kornia.color.rgb_to_grayscale(x.movedim(dim, -3))
    except ImportError:
        pass

    if not with_peers:
        peers = {}
    rows = []
    for name, shape, dtype, layout, dim in gpu_cases(quick, only):
        probe = input_sets(shape, dtype, layout, 1, "cuda")[0]
        in_bytes = probe.numel() * probe.element_size()
        moved = in_bytes * 4 // 3  # read 3 channels, write 1
        sets = max(2, -(-ROTATION_BYTES // moved))
        inputs = [probe, *input_sets(shape, dtype, layout, sets - 1, "cuda")]
        got = img2gray.img2gray(probe, dim=dim)
        outputs = [torch.empty(got.shape, dtype=dtype, device="cuda") for _ in inputs]
        # A copy moving the same bytes: read and write half of the op's traffic each.
        copy_src = [torch.empty(moved // 2, dtype=torch.uint8, device="cuda") for _ in inputs]
        copy_dst = [torch.empty_like(t) for t in copy_src]
        expected = eager_expression(probe, dim).unsqueeze(dim)
        tolerance = 1 if dtype == torch.uint8 else (1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-5)
        assert (got.double() - expected.double()).abs().max().item() <= tolerance, name
        # Each call binds this case's tensors (default arguments), so that `del timed` below frees them.
        timed: dict[str, Callable[..., object]] = {
            "copy": lambda i, src=copy_src, dst=copy_dst: dst[i].copy_(src[i]),
            "img2gray": lambda i, x=inputs, dim=dim, out=outputs: img2gray.img2gray(x[i], dim=dim, out=out[i]),
            # Called the way the peers are called: a new output per call. The caching allocator hands every call
            # the block the previous call freed, so an output that fits in L2 is overwritten there and never
            # reaches DRAM (out= above writes a fresh buffer each call, as the copy does). Peers are compared
            # with this row: same calling convention, same cache effects.
            NEW_OUTPUT: lambda i, x=inputs, dim=dim: img2gray.img2gray(x[i], dim=dim),
        }
        if with_peers:
            # Each case gets its own specialization; reset so none hits the recompile limit.
            torch._dynamo.reset()
            peers["torch.compile"] = torch.compile(eager_expression, dynamic=False)
        failed = []
        for peer, fn in peers.items():
            if peer == "kornia" and dtype == torch.uint8:
                continue
            try:
                fn(probe, dim)  # torch.compile compiles here, outside the timed calls
            except Exception as error:  # noqa: BLE001  # a peer that can't take this input is reported, not fatal
                failed.append(peer)
                print(f"  {peer} failed on {name}: {type(error).__name__}: {error}", file=sys.stderr)
                continue
            timed[peer] = lambda i, fn=fn, x=inputs, dim=dim: fn(x[i], dim)
        # Blocks of 20 calls: in blocks of 5 the op with out= measured 97.3-97.6% of the copy on the 720p float16
        # frame, in frame_variants' blocks of 30 (run 9) 100.2%: short blocks time calls near the clean L2 that every
        # block starts from, not the steady state of a pipeline.
        samples, round_means = time_rounds(timed, sets, rounds=4 if quick else 10, calls=10 if quick else 20)
        medians = {peer: statistics.median(times) for peer, times in samples.items()}
        row = {
            "case": name,
            "bytes_moved": moved,
            "copy_ms": medians.pop("copy"),
            "results": {**medians, **dict.fromkeys(failed)},
            "trimmed_mean_ms": {peer: trimmed_mean(times) for peer, times in samples.items()},
        }
        if "torch.compile" in round_means:
            # Per-round differences against torch.compile: the comparison that resolves below the timer's tick.
            row["vs_torch_compile_ns"] = {}
            for ours in ("img2gray", NEW_OUTPUT):
                mean, standard_error, faster = paired(round_means[ours], round_means["torch.compile"])
                row["vs_torch_compile_ns"][ours] = {
                    "mean": round(mean * 1e6, 1),
                    "standard_error": round(standard_error * 1e6, 1),
                    "rounds_faster": faster,
                    "rounds": len(round_means[ours]),
                }
        rows.append(row)
        del timed, inputs, outputs, copy_src, copy_dst, probe
        torch.cuda.empty_cache()
    rows.append(bench_gpu_latency(img2gray))
    return rows


def bench_gpu_latency(img2gray) -> dict:
    """Per-call time from Python for a tiny image: host overhead, since the GPU work is negligible.

    The candidates take turns within each round (the host's speed drifts between rounds on a shared machine),
    and each ratio is the median over rounds of that round's time over the baseline's.
    """
    x = torch.rand(1, 3, 64, 64, device="cuda")
    candidates: dict[str, Callable[..., object]] = {
        "baseline": lambda: torch.empty_like(x).fill_(1.0),
        "img2gray": lambda: img2gray.img2gray(x),
        "torch.ops.img2gray.img2gray": lambda: torch.ops.img2gray.img2gray(x),
        "torch eager": lambda: eager_expression(x, -3),
    }

    def per_call_us(fn: Callable[..., object], calls: int = 1000) -> float:
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / calls * 1e6

    rounds = [{name: per_call_us(fn) for name, fn in candidates.items()} for _ in range(21)]
    baseline = statistics.median(r["baseline"] for r in rounds)
    results = {name: statistics.median(r[name] for r in rounds) for name in candidates if name != "baseline"}
    ratios = {name: statistics.median(r[name] / r["baseline"] for r in rounds) for name in results}
    return {"case": "1x3x64x64 float32, us per call", "baseline_us": baseline, "results": results, "ratios": ratios}


def cpu_times_ms(fn: Callable[..., object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def cpu_rounds(timed: dict[str, Callable[..., object]], rounds: int, calls: int) -> dict[str, list[float]]:
    """Per round, each candidate's fastest call (ms) of a block of `calls`; the blocks take turns, each round starting
    one candidate later, after one round that is not kept. The machine's drift falls on every candidate alike (as in
    time_rounds on the GPU), and the fastest call of a block is one that no other process interrupted: on this
    shared 2-core machine most blocks hold a call that waited for the CPU."""
    names = list(timed)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(rounds + 1):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            block = cpu_times_ms(timed[name], calls)
            if round_index:
                samples[name].append(min(block))
    return samples


def relative_spread(times: list[float]) -> float:
    """The interquartile range over the median: 0.05 on a quiet machine, 0.3 and more when others share the CPUs."""
    quartiles = statistics.quantiles(times, n=4)
    return (quartiles[2] - quartiles[0]) / statistics.median(times)


def versus(ours_ms: float, peer_ms: float) -> str:
    """How img2gray compares with a peer, as a reader says it: "2.50x faster" or "12.0x slower", never "0.08x faster"."""
    if peer_ms >= ours_ms:
        return f"img2gray is {peer_ms / ours_ms:.2f}x faster"
    return f"img2gray is {ours_ms / peer_ms:.2f}x slower"


def busy_warning(load_average: float, cores: int) -> str | None:
    """A warning when other processes already keep the CPUs busy (load average over the core count before the
    benchmark starts): a multi-threaded run then waits for descheduled workers, and its times are noise."""
    if load_average < 0.75 * cores:
        return None
    return (
        f"warning: the machine is busy (load average {load_average:.1f} on {cores} cores): times are noisy and "
        "multi-threaded runs stall; compare ratios within this run, re-run when it is quiet, or use --threads 1"
    )


SPREAD_WARNING = 0.25  # interquartile range over the median


def copy_candidates(moved: int) -> dict[str, Callable[..., object]]:
    """Copies reading and writing half of `moved` bytes each: glibc's memcpy on one thread, and torch's copy_ (on the
    benchmark's thread count). The faster of the two is the op's floor."""
    import ctypes

    memcpy = ctypes.CDLL(None).memcpy
    memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    source = torch.randint(0, 256, (moved // 2,), dtype=torch.uint8)
    target = torch.empty_like(source)
    return {
        "memcpy": lambda: memcpy(target.data_ptr(), source.data_ptr(), source.numel()),
        "torch copy_": lambda: target.copy_(source),
    }


UINT8_LAYOUTS = ("HWC", "NCHW", "channels_last")
OPENCV = "OpenCV cvtColor"


def cpu_cases(quick: bool, only: re.Pattern = re.compile("")) -> list[tuple[str, tuple[int, int], str]]:
    frames = {"1080p": FRAMES["1080p"]} if quick else FRAMES
    # Named as the GPU cases are: the shape img2gray gets.
    cases = [
        (
            f"{h}x{w}x3 uint8 HWC ({label} frame)"
            if layout == "HWC"
            else f"1x3x{h}x{w} uint8 {layout} ({label} frame)",
            (h, w),
            layout,
        )
        for label, (h, w) in frames.items()
        for layout in UINT8_LAYOUTS
    ]
    return [case for case in cases if only.search(case[0])]


def bench_cpu(
    img2gray, quick: bool, threads: int, only: re.Pattern = re.compile(""), rounds: int | None = None
) -> list[dict]:
    """Each case's candidates (the copies, img2gray with out=, the peers on the same frame) take turns in rounds.
    OpenCV and PIL take the frame as HWC whatever the layout img2gray gets: they have no other. `only` picks the
    cases by name; `rounds` replaces the default count."""
    import numpy as np

    torch.set_num_threads(threads)
    peers_hwc: dict[str, Callable] = {}
    try:
        import cv2

        cv2.setNumThreads(threads)
        peers_hwc[OPENCV] = lambda a, t: cv2.cvtColor(a, cv2.COLOR_RGB2GRAY)
    except ImportError:
        pass
    try:
        from PIL import Image

        peers_hwc["PIL convert('L')"] = lambda a, t: Image.fromarray(a).convert("L")
    except ImportError:
        pass
    # More rounds on several threads: there a round is lost whenever a worker waits for a core (clean_rounds).
    default_rounds, calls = (3, 5) if quick else (11 if threads == 1 else 21, 8)
    rounds = rounds or default_rounds
    rows = []
    for name, (height, width), layout in cpu_cases(quick, only):
        array = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)
        hwc = torch.from_numpy(array)
        if layout == "HWC":
            x, dim, out = hwc, -1, torch.empty(height, width, 1, dtype=torch.uint8)
        else:
            x = hwc.permute(2, 0, 1).unsqueeze(0).contiguous()
            x = x.contiguous(memory_format=torch.channels_last) if layout == "channels_last" else x
            dim, out = -3, torch.empty(1, 1, height, width, dtype=torch.uint8)
        timed: dict[str, Callable[..., object]] = {
            "img2gray": lambda x=x, dim=dim, out=out: img2gray.img2gray(x, dim=dim, out=out)
        }
        timed |= {peer: functools.partial(fn, array, hwc) for peer, fn in peers_hwc.items()}
        if layout == "HWC" and height == 1080:  # 45 ms a call: one case is enough to show it
            timed["torch eager"] = lambda hwc=hwc: eager_expression(hwc, -1)
        rows.append(cpu_row(name, array.nbytes * 4 // 3, timed, rounds, calls))
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for layout in ("nchw", "channels_last"):
            x = input_sets((1, 3, 1080, 1920), dtype, layout, 1, "cpu")[0]
            out = torch.empty(1, 1, 1080, 1920, dtype=dtype)
            timed = {
                "img2gray": lambda x=x, out=out: img2gray.img2gray(x, out=out),
                "torch eager": lambda x=x: eager_expression(x, -3),
            }
            if OPENCV in peers_hwc and dtype != torch.bfloat16:  # numpy has no bfloat16
                import cv2

                hwc_array = x[0].permute(1, 2, 0).contiguous().numpy()
                try:
                    peers_hwc[OPENCV](hwc_array, None)
                    timed[OPENCV] = functools.partial(peers_hwc[OPENCV], hwc_array, None)
                except cv2.error as error:  # it takes 8-bit, 16-bit unsigned and float32 images only
                    print(f"  OpenCV cvtColor does not take {dtype}: {type(error).__name__}", file=sys.stderr)
            name = f"1x3x1080x1920 {str(dtype)[6:]} {layout}"
            if not only.search(name):
                continue
            rows.append(cpu_row(name, x.numel() * x.element_size() * 4 // 3, timed, rounds, calls))
    return rows


def peer_versions() -> dict[str, str]:
    """The peers' versions, as the benchmark imported them: OpenCV's, and PIL's distribution (pillow or pillow-simd,
    which installs the same `PIL` package; requirements/bench-pillow-simd.txt) with its version."""
    import importlib.metadata

    versions = {}
    try:
        import cv2

        versions["OpenCV"] = cv2.__version__
    except ImportError:
        pass
    try:
        import PIL

        folder = Path(PIL.__file__).resolve().parent.parent
        found = [
            d for d in importlib.metadata.distributions(path=[str(folder)]) if "pillow" in d.metadata["Name"].lower()
        ]
        versions["PIL"] = f"{found[0].metadata['Name']} {found[0].version}" if found else PIL.__version__
    except ImportError:
        pass
    return versions


def ratio_summary(numerators: list[float], denominators: list[float]) -> dict[str, float]:
    """The median and quartiles of the per-round ratios numerator / denominator (the two lists are aligned by round)."""
    ratios = [a / b for a, b in zip(numerators, denominators, strict=True)]
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {"median": statistics.median(ratios), "q1": quartiles[0], "q3": quartiles[2]}


# A round is clean where each of the ratios' candidates ran within this factor of its best round: on a shared 2-core
# machine a multi-threaded call whose worker was descheduled waits for the scheduler's tick (4 ms; 50x a 720p call),
# and a round holding such a block measures the neighbours, not the op.
CLEAN_ROUND_SLACK = 1.5


def clean_rounds(series: dict[str, list[float]], slack: float = CLEAN_ROUND_SLACK) -> list[int]:
    """The rounds in which every series (one value per round) is within `slack` of its own best."""
    rounds = range(len(next(iter(series.values()))))
    return [r for r in rounds if all(values[r] <= slack * min(values) for values in series.values())]


def cpu_row(case: str, moved: int, timed: dict[str, Callable[..., object]], rounds: int, calls: int) -> dict:
    """A case's row: the candidates and the copies of `moved` bytes in rounds (cpu_rounds), medians in ms, and the
    per-round ratios against the copy (the faster of the two in that round) and of OpenCV against img2gray, over the
    clean rounds (clean_rounds; all of them where fewer than 3 are clean, which the row's clean_rounds tells)."""
    timed = copy_candidates(moved) | timed
    load_before = os.getloadavg()[0]
    for fn in timed.values():  # warm-up: first-touch page faults, thread pools, caches
        fn()
    samples = cpu_rounds(timed, rounds, calls)
    medians = {candidate: statistics.median(times) for candidate, times in samples.items()}
    copies = {candidate: medians.pop(candidate) for candidate in ("memcpy", "torch copy_")}
    copy_rounds = [min(pair) for pair in zip(samples["memcpy"], samples["torch copy_"], strict=True)]
    compared = {"copy": copy_rounds, **{name: samples[name] for name in ("img2gray", OPENCV) if name in samples}}
    clean = clean_rounds(compared)
    kept = clean if len(clean) >= 3 else list(range(len(copy_rounds)))

    def in_kept(values: list[float]) -> list[float]:
        return [values[r] for r in kept]

    row = {
        "case": case,
        "bytes_moved": moved,
        "copy_ms": min(copies.values()),
        "copies_ms": copies,
        "results": medians,
        "copy_fraction": {
            candidate: ratio_summary(in_kept(copy_rounds), in_kept(samples[candidate])) for candidate in medians
        },
        "clean_rounds": len(clean),
        "rounds": len(copy_rounds),
        "load_average_before": round(load_before, 2),
        "load_average": round(os.getloadavg()[0], 2),
        "spread": {candidate: relative_spread(samples[candidate]) for candidate in medians},
    }
    if OPENCV in samples:
        row["img2gray_vs_opencv"] = ratio_summary(in_kept(samples[OPENCV]), in_kept(samples["img2gray"]))
    return row


def print_table(rows: list[dict], device: str) -> None:
    for row in rows:
        if "baseline_us" in row:
            print(f"\n{row['case']}: empty_like + one kernel = {row['baseline_us']:.1f} us")
            for peer, us in row["results"].items():
                print(f"  {peer:<30} {us:8.1f} us  ({row['ratios'][peer]:.2f}x baseline, median of per-round ratios)")
            continue
        print(
            f"\n{row['case']}: copy of the same bytes {row['copy_ms']:.3f} ms "
            f"({row['bytes_moved'] / row['copy_ms'] / 1e6:.0f} GB/s)"
        )
        # Peers against img2gray called as they are (a new output per call), where that row exists.
        ours = row["results"].get(NEW_OUTPUT) or row["results"]["img2gray"]
        for peer, ms in row["results"].items():
            if ms is None:
                print(f"  {peer:<30} failed")
                continue
            comparison = "" if peer.startswith("img2gray") else f"  {versus(ours, ms)}"
            fraction = row.get("copy_fraction", {}).get(peer)
            of_copy = (
                f"{100 * fraction['median']:5.1f}% copy [{100 * fraction['q1']:.0f}-{100 * fraction['q3']:.0f}]"
                if fraction
                else f"{100 * row['copy_ms'] / ms:5.1f}% copy"
            )
            print(f"  {peer:<30} {ms:8.3f} ms  {row['bytes_moved'] / ms / 1e6:7.0f} GB/s  {of_copy}{comparison}")
        if "clean_rounds" in row:
            against = row.get("img2gray_vs_opencv")
            print(
                "  per round: "
                + (
                    f"img2gray {against['median']:.2f}x OpenCV [{against['q1']:.2f}-{against['q3']:.2f}], "
                    if against
                    else ""
                )
                + f"{row['clean_rounds']}/{row['rounds']} rounds clean"
                + ("" if row["clean_rounds"] >= 3 else " (too few: the ratios are over every round)")
                + f"; load average {row['load_average_before']} before, {row['load_average']} after"
            )
        wide = {name: spread for name, spread in row.get("spread", {}).items() if spread > SPREAD_WARNING}
        if wide:
            print(
                "  warning: wide spread between calls (interquartile range "
                + ", ".join(f"{name} {100 * spread:.0f}%" for name, spread in wide.items())
                + " of the median): the machine is busy or throttling; these medians are rough"
            )
        for peer, diff in row.get("vs_torch_compile_ns", {}).items():
            print(
                f"  {peer:<30} {diff['mean']:+8.1f} ± {diff['standard_error']:.1f} ns against torch.compile, "
                f"faster in {diff['rounds_faster']}/{diff['rounds']} rounds"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], required=True)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--quick", action="store_true", help="smaller batches and fewer repeats")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="CPU threads for every library")
    parser.add_argument(
        "--rounds", type=int, help="CPU: rounds per case (default 11, 21 on several threads; 3 with --quick)"
    )
    parser.add_argument("--ncu", action="store_true", help="run each GPU case once, for Nsight Compute")
    parser.add_argument("--no-peers", action="store_true", help="GPU: time img2gray and the copy only")
    parser.add_argument("--latency", action="store_true", help="GPU: the per-call row only")
    parser.add_argument(
        "--cases",
        type=re.compile,
        default=re.compile(""),
        help="only the cases whose name matches this regular expression",
    )
    args = parser.parse_args()

    import img2gray

    if args.ncu:
        for name, shape, dtype, layout, dim in gpu_cases(args.quick, args.cases):
            x = input_sets(shape, dtype, layout, 1, "cuda")[0]
            torch.cuda.nvtx.range_push(name)  # the launch inside an NVTX range named after its case (ncu --nvtx)
            img2gray.img2gray(x, dim=dim)
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
        return
    if args.device == "cpu" and (warning := busy_warning(os.getloadavg()[0], os.cpu_count() or 1)):
        print(warning)
    if args.device == "cuda" and args.latency:
        rows = [bench_gpu_latency(img2gray)]
    else:
        rows = (
            bench_gpu(img2gray, args.quick, not args.no_peers, args.cases)
            if args.device == "cuda"
            else bench_cpu(img2gray, args.quick, args.threads, args.cases, args.rounds)
        )
    device = f"{this_cpu()}, {os.cpu_count()} cores" if args.device == "cpu" else torch.cuda.get_device_name()
    environment = {
        "device": device,
        "torch": torch.__version__,
        "img2gray": img2gray.metadata()["variant"],
        "threads": args.threads if args.device == "cpu" else None,
        "load_average": round(os.getloadavg()[0], 2) if args.device == "cpu" else None,
        "peers": peer_versions() if args.device == "cpu" else None,
    }
    print(f"{environment}")
    print_table(rows, args.device)
    # A machine's record is a whole run: a --quick or --cases run (a try, or a test) writes one only where --json says.
    whole_cpu_run = args.device == "cpu" and not args.quick and not args.cases.pattern
    record = args.json or (cpu_record_path(args.threads) if whole_cpu_run else None)
    if record:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"environment": environment, "rows": rows}, indent=2) + "\n")
        print(f"\nrecord: {record}")


def cpu_record_path(threads: int) -> Path:
    """Where a CPU run without --json records itself: this machine's folder (machine.results_folder), one file per
    thread count."""
    name = "bench.json" if threads == 1 else f"bench-{threads}-threads.json"
    return ROOT / "benchmarks" / "results" / this_results_folder() / name


if __name__ == "__main__":
    main()
