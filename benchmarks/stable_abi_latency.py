"""Small calls of the stable-ABI build against the exact build, side by side in one process.

    python benchmarks/stable_abi_latency.py --exact DIR --stable DIR --device cpu|cuda [--stable-first] [--json FILE]

DIR: variant directories from `tools/builder/op.py --out DIR` (--abi exact / --abi stable). Both are imported
(under the module names img2gray_exact and img2gray_stable); the one imported first owns the public name
`torch.ops.img2gray.img2gray` (--stable-first: the stable build). A 1x3x64x64 float32 image (and the same pixels as
a 64x64x3 image with dim=-1, the other call img2gray.img2gray has an overload for), per-call time from
Python: the candidates take turns within each of 21 rounds, and each ratio is the median over rounds of that
round's time over the exact build's same entry point (or over the baseline, an empty_like + fill_).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch


def load(name: str, directory: Path):
    spec = importlib.util.spec_from_file_location(
        name, directory / "__init__.py", submodule_search_locations=[str(directory)]
    )
    assert spec is not None and spec.loader is not None  # a file location always has both
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exact", type=Path, required=True)
    parser.add_argument("--stable", type=Path, required=True)
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--stable-first", action="store_true", help="the stable build owns torch.ops.img2gray")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    order = (
        [("stable", args.stable), ("exact", args.exact)]
        if args.stable_first
        else [("exact", args.exact), ("stable", args.stable)]
    )
    builds = {abi: load(f"img2gray_{abi}", directory) for abi, directory in order}
    owner = order[0][0]
    x = torch.rand(1, 3, 64, 64, device=args.device)
    xg = x.clone().requires_grad_()
    hwc = x[0].permute(1, 2, 0).contiguous()
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    candidates: dict[str, Callable[..., object]] = {"baseline": lambda: torch.empty_like(x).fill_(1.0)}
    for abi, module in builds.items():
        op = module.ops.img2gray.default
        candidates[f"{abi}: img2gray.img2gray"] = lambda m=module: m.img2gray(x)
        candidates[f"{abi}: img2gray.img2gray, dim=-1"] = lambda m=module: m.img2gray(hwc, dim=-1)
        candidates[f"{abi}: torch.ops.<build>.img2gray"] = lambda op=op: op(x)
        candidates[f"{abi}: img2gray.img2gray, input requires grad"] = lambda m=module: m.img2gray(xg)
        candidates[f"{abi}: img2gray.img2gray under no_grad"] = lambda m=module: _no_grad(m.img2gray, x)
    candidates[f"{owner}: torch.ops.img2gray.img2gray"] = lambda: torch.ops.img2gray.img2gray(x)

    def per_call_us(fn: Callable[..., object], calls: int = 1000) -> float:
        for _ in range(100):
            fn()
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        return (time.perf_counter() - start) / calls * 1e6

    rounds = [{name: per_call_us(fn) for name, fn in candidates.items()} for _ in range(21)]
    results = {name: statistics.median(r[name] for r in rounds) for name in candidates}
    over_baseline = {name: statistics.median(r[name] / r["baseline"] for r in rounds) for name in candidates}
    stable_over_exact = {}
    for name in candidates:
        if name.startswith("stable: ") and (twin := "exact: " + name.removeprefix("stable: ")) in candidates:
            stable_over_exact[name.removeprefix("stable: ")] = statistics.median(r[name] / r[twin] for r in rounds)
    record = {
        "environment": {
            "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "public name owned by": owner,
            "variants": {abi: m.metadata()["variant"] for abi, m in builds.items()},
        },
        "case": "1x3x64x64 float32, us per call (median of 21 rounds)",
        "us": results,
        "over_baseline": over_baseline,
        "stable_over_exact": stable_over_exact,
    }
    print(json.dumps(record, indent=2))
    print(summary(stable_over_exact))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=2) + "\n")


def summary(stable_over_exact: dict[str, float]) -> str:
    """One line for logs (tools/gpu/record.py quotes a log's last line): the highest ratio with and without grad."""

    def highest(names: list[str]) -> str:
        name = max(names, key=stable_over_exact.__getitem__)
        return f"{stable_over_exact[name]:.3f}x ({name})"

    with_grad = [name for name in stable_over_exact if "requires grad" in name]
    without = [name for name in stable_over_exact if name not in with_grad]
    return f"stable over exact, highest: {highest(without)} without grad, {highest(with_grad)} with grad"


def _no_grad(fn, x):
    with torch.no_grad():
        return fn(x)


if __name__ == "__main__":
    main()
