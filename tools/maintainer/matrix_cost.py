"""Compile CPU-minutes of the CI matrix: jobs x measured build time, before and after the stable-ABI packages.

    python -m tools.maintainer.matrix_cost [--out benchmarks/results/cpu/matrix-compile-minutes.json]

Measures, on this machine, the CPU time (user + system, of the build and its compilers) of one build of each kind a
CI job runs: the exact CPU library, the stable CPU library (`tools.builder.op --abi exact|stable --cuda off`, fresh
build directories) and the CUDA device code with the release flags (`tools.builder.op --nvcc-check`; a CUDA job's
time is taken as the CPU build of its ABI plus that, since a full CUDA build needs a CUDA torch). Then counts the
compiles of each matrix per kind:

- before (the workflow until the stable packages): one exact package per pytorch pin x backend x platform, plus the
  Hub's stable variants compiled apart with tools.builder.op, one per backend x platform; serving pytorch 2.14 and
  2.15 that way takes two more pins;
- after (tools.ci.workflow.matrix(), what the committed workflow runs): the same exact packages, and the stable
  packages compiled once per backend x platform, which are the Hub's stable variants too.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from tools.builder.op import source_commit
from tools.ci.workflow import matrix

ROOT = Path(__file__).resolve().parents[2]


def cpu_seconds(*args: str) -> float:
    """CPU seconds of `python -m tools.builder.op ARGS` and everything it starts."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "tools.builder.op", *args], cwd=ROOT, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1)


def measure() -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="img2gray-cost-") as scratch:
        times = {abi: cpu_seconds("--abi", abi, "--cuda", "off", "--out", f"{scratch}/{abi}", "--build-dir", f"{scratch}/obj-{abi}")
                 for abi in ("exact", "stable")}
        nvcc = cpu_seconds("--nvcc-check", "--build-dir", f"{scratch}/nvcc")
    return {"exact-cpu": times["exact"], "stable-cpu": times["stable"], "exact-cuda": times["exact"] + nvcc,
            "stable-cuda": times["stable"] + nvcc, "nvcc-device-code": nvcc}


def kind(abi: str, cuda: str | None) -> str:
    return f"{abi}-{'cpu' if cuda is None else 'cuda'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="write the record as JSON here")
    args = parser.parse_args(argv)
    seconds = measure()
    jobs = matrix()
    exact = Counter(kind(job.abi, job.cuda) for job in jobs if not job.stable)
    stable = Counter(kind(job.abi, job.cuda) for job in jobs if job.stable)
    pins = len({job.pytorch for job in jobs if not job.stable})
    per_pin = Counter({key: count // pins for key, count in exact.items()})
    matrices = {
        "before": exact + stable,  # the same compiles, the stable ones in separate tools.builder.op jobs
        "before, pins to 2.15": exact + Counter({key: count * 2 for key, count in per_pin.items()}) + stable,
        "after": exact + stable,  # the stable packages are the Hub's stable variants: no second compile
    }
    record = {"commit": source_commit(), "cpu_seconds_per_build": seconds, "matrices": {}}
    for name, compiles in matrices.items():
        minutes = sum(seconds[key] * count for key, count in compiles.items()) / 60
        record["matrices"][name] = {"compiles": dict(sorted(compiles.items())), "jobs": sum(compiles.values()),
                                    "cpu_minutes": round(minutes, 1)}
        print(f"{name}: {sum(compiles.values())} compiles, {minutes:.1f} CPU-minutes ({dict(sorted(compiles.items()))})")
    if args.out:
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
