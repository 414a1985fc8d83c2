"""Is the operator build bit-reproducible? Build one source tree from two different checkout paths, compare.

    python -m tools.builder.repro_check --cuda off          # CPU library (any machine)
    python -m tools.builder.repro_check --cuda on           # CUDA library (a CUDA torch and nvcc; the H200)

Copies the build inputs declared in build.toml into two directories of different names and depths, runs
tools/builder/op.py in each (same torch, same compiler, same commit id for provenance), and prints the sha256 of
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

from kernelpin.files.integrity import sha256_file
from tools.builder.config import BuildConfig, copy_build_inputs
from tools.builder.op import fixed_timestamp, source_commit

# Two checkouts that differ in every path component and in length.
CHECKOUTS = ("a/img2gray", "second-checkout/nested/deeper/src")


@dataclass(frozen=True)
class BuiltVariant:
    checkout: Path
    library: Path
    metadata: Path

    @classmethod
    def of(cls, checkout: Path, variant: Path) -> BuiltVariant:
        """The build of `checkout` that tools/builder/op.py wrote to the variant directory `variant`."""
        [library] = variant.glob("*.so")
        return cls(checkout, library, variant / "metadata.json")

    @property
    def hashes(self) -> tuple[str, str]:
        return sha256_file(self.library), sha256_file(self.metadata)


def build_in(checkout: Path, cuda: str, env: dict[str, str]) -> subprocess.Popen:
    out = checkout.parent / (checkout.name + "-variant")
    command = [
        sys.executable,
        "-m",
        "tools.builder.op",
        "--out",
        str(out),
        "--cuda",
        cuda,
        "--build-dir",
        str(checkout / "build" / "obj"),
    ]  # run in the checkout: its tools and kernelpin
    with open(checkout.parent / (checkout.name + "-build.log"), "w") as log:  # the child writes its own copy
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=checkout)


def this_commit_env() -> dict[str, str]:
    """What a build in a copy of this checkout (no .git) needs to record what a build in the checkout records:
    the commit (provenance) and its time (SOURCE_DATE_EPOCH), as another clone of the commit would."""
    commit = source_commit()
    return {**({"IMG2GRAY_SOURCE_COMMIT": commit} if commit else {}), "SOURCE_DATE_EPOCH": fixed_timestamp()}


def build_copies(root: Path, cuda: str) -> list[BuiltVariant]:
    """Copy this checkout's build inputs to `root/<name>` for each of CHECKOUTS and build them all at once (one
    compile job each)."""
    config = BuildConfig.load()
    checkouts = [copy_build_inputs(config, root / name) for name in CHECKOUTS]
    # One job each so that the builds overlap.
    env = {**os.environ, **this_commit_env(), "MAX_JOBS": "1"}
    processes = [build_in(checkout, cuda, env) for checkout in checkouts]
    failed = [checkout for checkout, process in zip(checkouts, processes, strict=False) if process.wait() != 0]
    if failed:
        logs = "\n".join((c.parent / (c.name + "-build.log")).read_text()[-3000:] for c in failed)
        raise RuntimeError(f"build failed in {', '.join(map(str, failed))}:\n{logs}")
    return [BuiltVariant.of(checkout, checkout.parent / (checkout.name + "-variant")) for checkout in checkouts]


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
        first, second = build_copies(root, args.cuda)
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
