"""A local Hub with this checkout's img2gray released on it, for trying kernelpin without the real Hub.

    python -m testkit.local_hub [--port 8765] [--root DIR]      (or `./dev hub`)

Builds the operator from this checkout (tools/builder/op.py, into build/dev as `./dev setup` does: a second run
reuses the objects), stages it as `python -m tools.release stage` stages a release, commits and tags it
v<version> in the kernel repository acme/img2gray of a test Hub (testkit.hub: olah over local git repositories,
the real Hub API), prints the HF_ENDPOINT to export, and serves until Ctrl-C. docs/kernelpin.md walks through
lock, sync and load against it.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from testkit.hub import HubServer
from testkit.releasing import REPO_ID, ROOT, release_into_mirror, stage
from tools.builder.config import BuildConfig

DEFAULT_PORT = 8765


def publish_checkout(hub: HubServer, root: Path, variant: Path | None = None) -> str:
    """Release this checkout's operator as acme/img2gray v<version> (built into build/dev unless `variant`, a
    build of it, is given); returns the tag."""
    if variant is None:
        variant = ROOT / "build" / "dev" / "img2gray"
        subprocess.run([sys.executable, "-m", "tools.builder.op", "--out", str(variant)], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    tag = f"v{BuildConfig.load().version}"
    release_into_mirror(hub.repo(REPO_ID, "kernel"), stage([variant], root / "staged", REPO_ID), tag)
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"where the Hub API listens (default {DEFAULT_PORT})")
    parser.add_argument("--root", type=Path, help="where its repositories and logs go (default: a new temporary directory)")
    parser.add_argument("--variant", type=Path,
                        help="release this build of the checkout (a `tools.builder.op --out` directory) instead of building")
    args = parser.parse_args(argv)
    root = args.root or Path(tempfile.mkdtemp(prefix="kernelpin-local-hub-"))
    root.mkdir(parents=True, exist_ok=True)
    hub = HubServer(root, trusted_publishers=("acme",))
    what = args.variant or "this checkout's operator (building it into build/dev)"
    print(f"releasing {what} on a local Hub in {root} ...", flush=True)
    tag = publish_checkout(hub, root, args.variant)
    try:
        hub.start(args.port)
    except RuntimeError as error:
        hint = f" (is port {args.port} taken? give another with --port)" if "port" in str(error) or "exited" in str(error) else ""
        sys.exit(f"error: {error}{hint}")
    print(f"serving {REPO_ID} {tag} (this checkout's CPU build) on a local Hub; in another shell:", flush=True)
    print(f"  export HF_ENDPOINT={hub.endpoint}", flush=True)
    print("Ctrl-C stops it.", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        hub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
