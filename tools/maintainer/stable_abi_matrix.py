"""One stable-ABI build of the operator, loaded and tested under several torch releases.

    python -m tools.maintainer.stable_abi_matrix --python /venvs/torch-2.11/bin/python [--python ...] [--out FILE.json]

Builds the CPU stable-ABI variant once, with this interpreter's torch (`tools/builder/op.py --abi stable`), then
runs tests/op against that same variant directory (IMG2GRAY_OP_BUILD) under each given interpreter, whose
torch may be older or newer than the one it was built with (down to build.toml's [torch.stable-abi] version).
Each interpreter needs torch, pytest, numpy, pillow and filelock. Prints a table, writes the results as JSON
(benchmarks/results/cpu/stable-abi-matrix.json in the project's records) and exits 1 unless every run passed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelpin.files.integrity import sha256_file

ROOT = Path(__file__).resolve().parents[2]


def build_variant(into: Path) -> Path:
    variant = into / "img2gray"
    subprocess.run(
        [sys.executable, "-m", "tools.builder.op", "--abi", "stable", "--cuda", "off", "--out", str(variant)],
        cwd=ROOT,
        check=True,
    )
    return variant


def run_suite(python: str, variant: Path) -> dict:
    probe = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        return {"python": python, "torch": None, "passed": False, "summary": f"no torch: {probe.stderr.strip()[-300:]}"}
    env = {**os.environ, "IMG2GRAY_OP_BUILD": str(variant), "IMG2GRAY_OP_ABI": "stable", "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    result = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/op"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    return {
        "python": python,
        "torch": probe.stdout.strip(),
        "passed": result.returncode == 0,
        "summary": lines[-1].strip("= ") if lines else result.stderr.strip()[-300:],
        "failures": [line for line in result.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))],
        "seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", action="append", required=True, help="an interpreter with torch (repeat)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    import torch

    with tempfile.TemporaryDirectory(prefix="img2gray-stable-") as scratch:
        variant = build_variant(Path(scratch))
        metadata = json.loads((variant / "metadata.json").read_text())
        [library] = variant.glob("*.so")
        record = {
            "variant": metadata["variant"],
            "built_with_torch": torch.__version__,
            "library": library.name,
            "library_sha256": sha256_file(library),
            "runs": [run_suite(python, variant) for python in args.python],
        }
    runs = record["runs"]
    for run in runs:
        print(f"torch {run['torch']}: {'PASS' if run['passed'] else 'FAIL'} ({run['summary']})")
    if args.out:
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0 if all(run["passed"] for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
