"""The ABI gate over what the build made: conda packages (a channel such as output/), variant directories or
staged release layouts. Every shared library must meet the Hub's kernel rules (manylinux_2_28, abi3 for
Python >= 3.9), checked by kernelpin.publisher.abi_gate with HF's kernel-abi-check; CI runs it before releasing.

    python -m tools.release.abi_gate output              # every .conda package below output/
    python -m tools.release.abi_gate build/release       # a staged release, or a variant dir from tools/builder/op.py

Exit 0 when everything passes; 1 with each violation (library, symbol, the version it needs, what to do).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kernelpin import KernelpinError
from kernelpin.publisher import abi_gate
from kernelpin.publisher.abi_gate import AbiError, Violation, check_library, refusal, shared_libraries
from tools.release.stage import CONDA_SUFFIX, conda_packages, extract_variant


def check_sources(sources: Sequence[Path], workdir: Path) -> tuple[int, list[Violation]]:
    """(libraries checked, violations) of the sources; conda packages are unpacked into `workdir` first."""
    checked, violations = 0, []
    for source in sources:
        packages = (
            [source]
            if source.suffix == CONDA_SUFFIX and source.is_file()
            else (conda_packages(source) if source.is_dir() else [])
        )
        if packages:
            roots = [
                (extract_variant(package, Path(tempfile.mkdtemp(prefix="conda-", dir=workdir))), package.name)
                for package in packages
            ]
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


def check(sources: Sequence[Path]) -> int:
    """How many libraries of the sources passed; AbiError listing every violation, or when there is none to check."""
    with tempfile.TemporaryDirectory(prefix="abi-gate-") as work:
        checked, violations = check_sources(sources, Path(work))
    if violations:
        raise refusal(violations)
    if not checked:
        raise AbiError(f"no shared library found in {', '.join(map(str, sources))}: nothing was built?")
    return checked


def main(argv: Sequence[str] | None = None) -> int:
    return abi_gate.main(argv, prog="python -m tools.release.abi_gate", description=__doc__, check=check)


if __name__ == "__main__":
    sys.exit(main())
