"""Install packages from the built channel into a fresh prefix, as `pixi add img2gray` would (py-rattler).

    python -m tools.conda.install --prefix /tmp/env --offline          # output/ + this machine's stand-ins
    python -m tools.conda.install --prefix /tmp/env                    # output/ + conda-forge
    /tmp/env/bin/python -c "import torch, img2gray; print(img2gray.metadata()['variant'])"

The GPU decides the flavour: with a CUDA driver (`__cuda`) the CUDA build wins, without one the CPU build.
`--cuda none|X.Y` pretends otherwise (like CONDA_OVERRIDE_CUDA).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tools.conda.channel import DETECT, NoCandidateError, install_environment
from tools.conda.standins import build_standin_channel, detect_machine

REPO_ROOT = Path(__file__).resolve().parents[2]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("specs", nargs="*", default=["img2gray"], help="match specs to install (default: img2gray)")
    parser.add_argument("--prefix", type=Path, required=True, help="environment to create (must not exist)")
    parser.add_argument("--channel", type=Path, default=REPO_ROOT / "output", help="the built img2gray channel")
    parser.add_argument(
        "--offline",
        action="store_true",
        help="resolve python/pytorch from stand-ins for this machine instead of conda-forge",
    )
    parser.add_argument("--cuda", default="auto", help="auto (detect the driver), none, or a version such as 13.0")
    args = parser.parse_args(argv)
    if args.prefix.exists():
        parser.error(f"--prefix {args.prefix} exists; give a new directory")
    if not (args.channel / "noarch" / "repodata.json").exists():
        parser.error(f"--channel {args.channel} is not a built channel; run `python -m tools.conda.build` first")
    cuda = {"auto": DETECT, "none": None}.get(args.cuda, args.cuda)
    with tempfile.TemporaryDirectory(prefix="img2gray-standins-") as scratch:
        second = build_standin_channel(detect_machine(), Path(scratch) / "standins") if args.offline else "conda-forge"
        try:
            records = install_environment([args.channel.resolve().as_uri(), second], args.specs, args.prefix, cuda=cuda)
        except NoCandidateError as error:
            print(error, file=sys.stderr)
            return 1
    standin_names = {r.name.normalized for r in records if args.offline and str(r.url).startswith(second)}
    for record in sorted(records, key=lambda r: r.name.normalized):
        marker = "  (stand-in)" if record.name.normalized in standin_names else ""
        print(f"  {record.name.normalized} {record.version} {record.build}{marker}")
    if standin_names:
        print(
            "  stand-in: a package made on the spot that wraps this machine's own interpreter, torch or compiler, "
            "so that the recipe resolves offline (tools/conda/standins.py); with network these come from conda-forge"
        )
    print(f"installed into {args.prefix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
