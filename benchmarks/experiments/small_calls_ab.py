"""Host cost of small img2gray calls, builds side by side in one process (CPU or CUDA).

    python -m benchmarks.experiments.small_calls_ab cpu|cuda NAME=DIR [NAME=DIR ...]

DIR: variant directories from `tools/builder/op.py --out DIR`, imported as img2gray_NAME (builds of the same C++
sources share a torch.ops namespace and cannot be loaded together). Each candidate runs 20000 calls of a
uint8 image of 12 pixels (the kernel's share is small) in turns, in 21 rounds, each starting one candidate later;
prints the fastest and the median round per call. A `clone` of the same bytes is the reference.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.stable_abi_latency import load

CALLS, ROUNDS = 20000, 21


def main() -> None:
    device, builds = sys.argv[1], sys.argv[2:]
    torch.set_num_threads(1)
    modules = {name: load(f"img2gray_{name}", Path(path)) for name, path in (b.split("=", 1) for b in builds)}
    hwc = torch.randint(0, 256, (1, 2, 2, 3), dtype=torch.uint8, device=device)
    nchw = hwc.permute(0, 3, 1, 2).contiguous()
    chw = nchw[0]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    candidates: dict[str, Callable[..., object]] = {"clone": hwc.clone}
    for name, module in modules.items():
        candidates[f"{name}: img2gray(x, dim=-1)"] = lambda m=module: m.img2gray(hwc, dim=-1)
        candidates[f"{name}: img2gray(x)"] = lambda m=module: m.img2gray(nchw)
        candidates[f"{name}: img2gray(x, dim=0)"] = lambda m=module: m.img2gray(chw, dim=0)
        candidates[f"{name}: ops.img2gray(x)"] = lambda m=module: m.ops.img2gray(nchw)
    times: dict[str, list[float]] = {name: [] for name in candidates}
    names = list(candidates)
    for round_index in range(ROUNDS):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            call = candidates[name]
            start = time.perf_counter_ns()
            for _ in range(CALLS):
                call()
            sync()
            times[name].append((time.perf_counter_ns() - start) / CALLS / 1000)
    for name, samples in times.items():
        print(f"{name:34s} fastest {min(samples):.3f} us  median {statistics.median(samples):.3f} us")


if __name__ == "__main__":
    main()
