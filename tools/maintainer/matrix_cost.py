"""Compile CPU-minutes of the CI matrix: jobs x measured build time, for an earlier commit's matrix and this one.

    python -m tools.maintainer.matrix_cost [--before 214c74f] [--out benchmarks/results/cpu/matrix-compile-minutes.json]
                                           [--seconds-from RECORD]   # reuse an earlier record's measured times

Each matrix is what tools/ci/workflow.py makes of it: recipe/recipe.yaml rendered with tools/conda/variants.yaml (of
that commit, read with `git show`) for every plain platform of pixi.toml, one job per variant, plus (this commit) the
Hub-only stable CUDA 12.6 jobs (tools.ci.workflow.hub_jobs: build.toml's 12.6 list). A job compiles the
library of its ABI (exact or stable) and, for CUDA, the device code for its TORCH_CUDA_ARCH_LIST as rendered.

Measured on this machine, as CPU time (user + system of the build and its compilers): one exact and one stable CPU
library (`tools.builder.op --abi exact|stable --cuda off`, fresh build directories) and, for every distinct arch
list of the two matrices, the CUDA device code with the release flags (`tools.builder.op --nvcc-check` with that
TORCH_CUDA_ARCH_LIST), a CUDA job being its ABI's CPU build plus that (a full CUDA build needs a CUDA torch). Only
the local nvcc runs: an arch list of another toolkit (CUDA 12.6's, 12.9's) is timed with it, an estimate the record
says so; an architecture the local nvcc names otherwise is timed under its name there (12.9's 10.1 is 13.0's 11.0).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from rattler_build import RenderedVariant

from tools.builder.config import BuildConfig
from tools.builder.op import nvcc_version_output, source_commit, toolkit_cuda_version
from tools.ci.workflow import HUB_CUDA, hub_jobs, workspace_platforms
from tools.conda.build import PROJECT_VARIANTS, RECIPE, abi_of, cuda_version_of, render_variants, variant_config

ROOT = Path(__file__).resolve().parents[2]
Build = tuple[str, str | None, str]  # (abi, CUDA version or None, TORCH_CUDA_ARCH_LIST or "")
# Architectures CUDA 13 renamed: a list of an older toolkit is timed with a CUDA 13 nvcc under the new name.
RENAMED_IN_13 = {"10.1": "11.0"}


def local_spelling(archs: str, nvcc: str) -> str:
    """An arch list as the local nvcc names its architectures."""
    if int(nvcc.split(".")[0]) < 13:
        return archs
    return ";".join(
        RENAMED_IN_13.get(arch.removesuffix("+PTX"), arch.removesuffix("+PTX"))
        + ("+PTX" if arch.endswith("+PTX") else "")
        for arch in archs.split(";")
    )


def cpu_seconds(*args: str, env: dict[str, str] | None = None) -> float:
    """CPU seconds of `python -m tools.builder.op ARGS` and everything it starts."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "tools.builder.op", *args],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, **(env or {})},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1)


def _cuda_arch_list(variant: RenderedVariant) -> str:
    """The TORCH_CUDA_ARCH_LIST a rendered variant's build script sets ("" for none)."""
    script = variant.recipe.build.script
    return (script.get("env", {}).get("TORCH_CUDA_ARCH_LIST", "") or "") if script is not None else ""


def matrix_builds(recipe: Path = RECIPE, variants: Path = PROJECT_VARIANTS) -> list[Build]:
    """One entry per CI job of the matrix `variants` makes of `recipe`."""
    return [
        (abi_of(v), cuda_version_of(v), _cuda_arch_list(v))
        for platform in workspace_platforms()
        for v in render_variants(variant_config([variants]), target_platform=platform, recipe=recipe)
    ]


def builds_at(commit: str, scratch: Path) -> list[Build]:
    """The matrix of an earlier commit: its recipe and variants.yaml, read with git show."""
    (scratch / "recipe").mkdir(parents=True, exist_ok=True)
    for path, target in (
        ("recipe/recipe.yaml", scratch / "recipe" / "recipe.yaml"),
        ("tools/conda/variants.yaml", scratch / "variants.yaml"),
    ):
        target.write_text(
            subprocess.run(
                ["git", "show", f"{commit}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
            ).stdout
        )
    return matrix_builds(scratch / "recipe" / "recipe.yaml", scratch / "variants.yaml")


def hub_builds() -> list[Build]:
    """The Hub-only jobs: a stable library with CUDA 12.6's list each."""
    return [("stable", HUB_CUDA, ";".join(BuildConfig.load().capabilities_for(HUB_CUDA)))] * len(hub_jobs())


def measure(arch_lists: set[str], scratch: Path, nvcc: str, known: dict[str, float]) -> dict[str, float]:
    """CPU seconds: "exact" and "stable" CPU libraries, and the device code of each arch list (as the local nvcc spells
    it); what `known` (an earlier record's times) has is not measured again."""
    seconds = {
        abi: known.get(abi)
        or cpu_seconds(
            "--abi", abi, "--cuda", "off", "--out", f"{scratch}/{abi}", "--build-dir", f"{scratch}/obj-{abi}"
        )
        for abi in ("exact", "stable")
    }
    for number, archs in enumerate(sorted(arch_lists)):
        local = local_spelling(archs, nvcc)
        seconds[archs] = (
            known.get(archs)
            or known.get(local)
            or cpu_seconds(
                "--nvcc-check", "--build-dir", f"{scratch}/nvcc-{number}", env={"TORCH_CUDA_ARCH_LIST": local}
            )
        )
    return seconds


def recorded_seconds(record: Path) -> dict[str, float]:
    """The measured times of an earlier record, keyed as measure() keys them."""
    seconds = json.loads(record.read_text())["cpu_seconds"]
    return {key.removesuffix("-cpu").removeprefix("device code "): value for key, value in seconds.items()}


def cost(builds: list[Build], seconds: dict[str, float]) -> dict:
    kinds = Counter(f"{abi}-{'cpu' if cuda is None else 'cuda' + cuda.replace('.', '')}" for abi, cuda, _ in builds)
    total = sum(seconds[abi] + (seconds[archs] if cuda else 0.0) for abi, cuda, archs in builds)
    return {"jobs": len(builds), "compiles": dict(sorted(kinds.items())), "cpu_minutes": round(total / 60, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--before",
        default="214c74f",
        help="the commit whose matrix is 'before' (default: the last one with CUDA 12.9/13.0 and one capability list)",
    )
    parser.add_argument("--out", type=Path, help="write the record as JSON here")
    parser.add_argument(
        "--seconds-from", type=Path, help="reuse the CPU seconds of this earlier record (measure the rest)"
    )
    args = parser.parse_args(argv)
    nvcc = toolkit_cuda_version(nvcc_version_output())
    known = recorded_seconds(args.seconds_from) if args.seconds_from else {}
    with tempfile.TemporaryDirectory(prefix="img2gray-cost-") as scratch:
        matrices = {
            f"before ({args.before})": builds_at(args.before, Path(scratch) / "before"),
            "after": matrix_builds() + hub_builds(),
        }
        arch_lists = {archs for builds in matrices.values() for _, cuda, archs in builds if cuda}
        seconds = measure(arch_lists, Path(scratch), nvcc, known)
    record: dict[str, Any] = {
        "commit": source_commit(),
        "nvcc": nvcc,
        "note": f"device code of every arch list timed with the local nvcc {nvcc}, also where a job compiles with another "
        "toolkit (CUDA 12.6 and 12.9 cannot be run here; 12.9's 10.1 timed as 11.0); a CUDA job = its ABI's CPU "
        "library + its device code"
        + (
            f"; times reused from the record of {json.loads(args.seconds_from.read_text())['commit'][:7]}"
            if known
            else ""
        ),
        "cpu_seconds": {
            "exact-cpu": seconds["exact"],
            "stable-cpu": seconds["stable"],
            **{f"device code {archs}": seconds[archs] for archs in sorted(arch_lists)},
        },
        "matrices": {name: cost(builds, seconds) for name, builds in matrices.items()},
    }
    for name, result in record["matrices"].items():
        print(f"{name}: {result['jobs']} jobs, {result['cpu_minutes']} CPU-minutes {result['compiles']}")
    if args.out:
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
