"""Is the operator build bit-reproducible? Build one source tree from two different checkout paths, compare.

    python -m tools.repro_check --cuda off          # CPU library (any machine)
    python -m tools.repro_check --cuda on           # CUDA library (a CUDA torch and nvcc; the H200)

Copies the build inputs declared in build.toml into two directories of different names and depths, runs
tools/build_op.py in each (same torch, same compiler, same commit id for provenance), and prints the sha256 of
the library and of metadata.json from both, then PASS or FAIL (exit 1). On FAIL it lists the strings of
the libraries that name a checkout path: what a prefix map missed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelpin.integrity import sha256_file
from tools.build_config import BuildConfig, copy_build_inputs
from tools.build_op import source_commit

# Two checkouts that differ in every path component and in length.
CHECKOUTS = ("a/img2gray", "second-checkout/nested/deeper/src")


@dataclass(frozen=True)
class BuiltVariant:
    checkout: Path
    library: Path
    metadata: Path

    @property
    def hashes(self) -> tuple[str, str]:
        return sha256_file(self.library), sha256_file(self.metadata)


def build_in(checkout: Path, cuda: str, env: dict[str, str]) -> subprocess.Popen:
    out = checkout.parent / (checkout.name + "-variant")
    command = [sys.executable, "-m", "tools.build_op", "--out", str(out), "--cuda", cuda,
               "--build-dir", str(checkout / "build" / "obj")]  # run in the checkout: its tools and kernelpin
    log = open(checkout.parent / (checkout.name + "-build.log"), "w")  # noqa: SIM115 (closed by the caller)
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=checkout)


def build_twice(root: Path, cuda: str) -> list[BuiltVariant]:
    """Build from both checkouts under `root` at once (one compile job each)."""
    config = BuildConfig.load()
    checkouts = [copy_build_inputs(config, root / name) for name in CHECKOUTS]
    # Same provenance for both (the copies have no .git), one job each so the two builds overlap.
    env = {**os.environ, "IMG2GRAY_SOURCE_COMMIT": source_commit() or "unknown", "MAX_JOBS": "1"}
    processes = [build_in(checkout, cuda, env) for checkout in checkouts]
    failed = [checkout for checkout, process in zip(checkouts, processes) if process.wait() != 0]
    if failed:
        logs = "\n".join((c.parent / (c.name + "-build.log")).read_text()[-3000:] for c in failed)
        raise RuntimeError(f"build failed in {', '.join(map(str, failed))}:\n{logs}")
    built = []
    for checkout in checkouts:
        variant = checkout.parent / (checkout.name + "-variant")
        [library] = variant.glob("*.so")
        built.append(BuiltVariant(checkout, library, variant / "metadata.json"))
    return built


def leaked_paths(library: Path, root: Path) -> list[str]:
    """Printable strings of `library` that name a directory under `root` (the scratch checkouts)."""
    strings = re.findall(rb"[\x20-\x7e]{6,}", library.read_bytes())
    return sorted({s.decode() for s in strings if str(root).encode() in s})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cuda", choices=["on", "off"], default="off", help="build the CUDA kernel too")
    parser.add_argument("--keep", type=Path, help="build here and keep the trees (default: a temporary dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="img2gray-repro-") as scratch:
        root = (args.keep or Path(scratch)).resolve()
        first, second = build_twice(root, args.cuda)
        for built in (first, second):
            library_hash, metadata_hash = built.hashes
            print(f"{built.checkout.relative_to(root)}:")
            print(f"  {built.library.name}  sha256 {library_hash}")
            print(f"  metadata.json  sha256 {metadata_hash}")
        if first.hashes == second.hashes:
            print(f"PASS: --cuda {args.cuda} builds are bit-identical from two checkout paths")
            return 0
        print(f"FAIL: --cuda {args.cuda} builds differ between the two checkout paths")
        for built in (first, second):
            for text in leaked_paths(built.library, root)[:20]:
                print(f"  {built.checkout.relative_to(root)} names a checkout path: {text[:200]}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
