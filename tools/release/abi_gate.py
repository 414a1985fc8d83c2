"""The ABI gate over what the build made: conda packages (a channel such as output/), variant directories or
staged release layouts. Every shared library must meet the Hub's kernel rules (manylinux_2_28, abi3 for
Python >= 3.9), checked by kernelpin.abi_gate with HF's kernel-abi-check; CI runs it before releasing.

    python -m tools.release.abi_gate output              # every .conda package below output/
    python -m tools.release.abi_gate build/release       # a staged release, or a variant dir from tools/builder/op.py

Exit 0 when everything passes; 1 with each violation (library, symbol, the version it needs, what to do).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kernelpin.abi_gate import AbiError, Violation, check_library, passed_message, refusal, shared_libraries
from kernelpin.errors import KernelpinError
from tools.release.stage import CONDA_SUFFIX, conda_packages, extract_variant


def check_sources(sources: Sequence[Path], workdir: Path) -> tuple[int, list[Violation]]:
    """(libraries checked, violations) of the sources; conda packages are unpacked into `workdir` first."""
    checked, violations = 0, []
    for source in sources:
        packages = [source] if source.suffix == CONDA_SUFFIX and source.is_file() else (
            conda_packages(source) if source.is_dir() else [])
        if packages:
            roots = [(extract_variant(package, Path(tempfile.mkdtemp(prefix="conda-", dir=workdir))), package.name)
                     for package in packages]
        elif source.exists():
            roots = [(source, str(source))]
        else:
            raise KernelpinError(f"{source}: no such file or directory")
        for root, label in roots:
            for library in shared_libraries([root]):
                checked += 1
                name = library.name if library == root else str(library.relative_to(root))
                violations += check_library(library, f"{label}: {name}")
    return checked, violations


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.release.abi_gate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", nargs="+", type=Path, metavar="SOURCE")
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="abi-gate-") as work:
            checked, violations = check_sources(args.sources, Path(work))
        if violations:
            raise refusal(violations)
        if not checked:
            raise AbiError(f"no shared library found in {', '.join(map(str, args.sources))}: nothing was built?")
    except KernelpinError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(passed_message(checked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
