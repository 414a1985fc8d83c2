"""Write kernelpin/publisher/stable_abi_shims.json: the C shims of PyTorch's stable ABI, by the torch release that added them.

    python -m tools.release.stable_abi_shims 2.11=/venv211/.../torch/include 2.12=... [2.13=...] ...

Each argument names a torch release and its include directory (a wheel's `torch/include`). A shim is every
AOTI_TORCH_EXPORT function declared in torch/csrc/inductor/aoti_torch/c/shim.h or torch/csrc/stable/c/shim.h;
the oldest release given is the floor (everything it declares is listed under it), each later one lists what it
added. kernelpin's ABI gate reads the file (a release's ABI must not depend on torch being installed).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "kernelpin" / "publisher" / "stable_abi_shims.json"
HEADERS = ("torch/csrc/inductor/aoti_torch/c/shim.h", "torch/csrc/stable/c/shim.h")
DECLARATION = re.compile(r"AOTI_TORCH_EXPORT\s+[\w\s\*]*?\b(\w+)\s*\(")


def declared(include: Path) -> set[str]:
    return {name for header in HEADERS for name in DECLARATION.findall((include / header).read_text())}


def main(argv: list[str]) -> int:
    releases = sorted(
        (tuple(int(p) for p in version.split(".")), Path(include))
        for version, include in (arg.split("=", 1) for arg in argv)
    )
    if not releases:
        print(__doc__, file=sys.stderr)
        return 2
    seen: set[str] = set()
    versions = {}
    for (major, minor), include in releases:
        names = declared(include)
        versions[f"{major}.{minor}"] = sorted(names - seen)
        seen |= names
    OUT.write_text(json.dumps({"headers": list(HEADERS), "added": versions}, indent=1) + "\n")
    print(f"wrote {OUT}: " + ", ".join(f"{v}: {len(n)}" for v, n in versions.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
