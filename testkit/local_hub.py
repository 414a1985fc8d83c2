"""A local Hub with this checkout's img2gray released on it, for trying kernelpin without the real Hub.

    python -m testkit.local_hub [--port 8765] [--root DIR]      (or `./dev hub`)

Builds the operator from this checkout (tools/builder/op.py, into build/dev as `./dev setup` does: a second run
reuses the objects), stages it as `python -m tools.release stage` stages a release, commits and tags it
v<version> in the kernel repository acme/img2gray of a test Hub (testkit.hub: olah over local git repositories,
the real Hub API), adds acme/gray-layers (a Python-only kernel with a `layers` module, for the kernelize
example) and the kernels the examples of `kernels`' own docs load (kernels-community/activation and relu, in
torch), prints the HF_ENDPOINT to export, and serves until Ctrl-C. docs/kernelpin.md walks through lock, sync
and load against it, and every example of its "Without a lock" section runs against it
(tests/kernelpin/journeys/test_doc_examples.py starts this module as `./dev hub` does).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from testkit.fake_kernel import kernel_files
from testkit.hub import HubServer
from testkit.releasing import REPO_ID, ROOT, release_into_mirror, stage
from testkit.sigstore_root import SigstoreRoot
from tools.builder.config import BuildConfig

DEFAULT_PORT = 8765
LAYERS_REPO_ID = "acme/gray-layers"
LAYERS_VARIANT = "torch-universal"  # Python only: fits any machine
LAYERS = b"""\
import torch
from torch import nn


class Gray(nn.Module):
    \"\"\"Every pixel mid-gray: a layer whose forward replaces the model's own.\"\"\"

    def forward(self, rgb: torch.Tensor) -> torch.Tensor:
        return torch.full(rgb.shape[:-1], 0.5)
"""


# The kernels `kernels`' own README and docstrings load (kernels-community/activation and /relu, both at version=1),
# as Python-only builds doing in torch what the real ones do on a GPU: so that kernels' documented examples run
# unchanged against this Hub with `from kernelpin import ...` (tests/kernelpin/journeys/test_kernels_doc_examples.py).
KERNELS_DOCS_ORG = "kernels-community"
SIGSTORE_ROOT = "sigstore/trusted_root.json"
ACTIVATION = b"""\
import torch.nn.functional as F

from . import layers

VARIANT = "torch-universal"


def gelu_fast(out, x):
    out.copy_(F.gelu(x, approximate="tanh"))
    return out


def silu_and_mul(out, x):
    d = x.shape[-1] // 2
    out.copy_(F.silu(x[..., :d]) * x[..., d:])
    return out
"""
ACTIVATION_LAYERS = b"""\
import torch.nn.functional as F
from torch import nn


class SiluAndMul(nn.Module):
    has_backward = True
    can_torch_compile = True

    def forward(self, x):
        d = x.shape[-1] // 2
        return F.silu(x[..., :d]) * x[..., d:]
"""
RELU = b"""\
import torch

VARIANT = "torch-universal"


def relu(out, x):
    out.copy_(torch.relu(x))
    return out
"""


def publish_kernels_docs_kernels(hub: HubServer, root: Path) -> list[str]:
    """kernels-community/activation and kernels-community/relu 1.0.0 (tag v1.0.0, branch v1): the kernels the
    examples of `kernels`' own docs load, signed as kernels-community's CI signs (kernelpin's built-in policy
    requires it) by the test kit's Sigstore instance, whose trusted root goes to SIGSTORE_ROOT under `root` (a
    project trusts it with `[tool.kernelpin.trust] trusted-root = ...`); returns their repository ids."""
    sigstore = SigstoreRoot()
    (root / SIGSTORE_ROOT).parent.mkdir(parents=True, exist_ok=True)
    sigstore.write_trusted_root(root / SIGSTORE_ROOT)
    released = []
    for name, extra in (
        ("activation", {"__init__.py": ACTIVATION, "layers.py": ACTIVATION_LAYERS}),
        ("relu", {"__init__.py": RELU}),
    ):
        repo = hub.repo(f"{KERNELS_DOCS_ORG}/{name}", "kernel")
        files = kernel_files("1.0.0", variants=(LAYERS_VARIANT,), extra=extra, name=name)
        repo.write(sigstore.sign_files(files), clear=True)
        repo.commit("release 1.0.0")
        repo.tag("v1.0.0")
        repo.branch("v1")
        released.append(f"{KERNELS_DOCS_ORG}/{name}")
    return released


def publish_checkout(hub: HubServer, root: Path, variant: Path | None = None) -> str:
    """Release this checkout's operator as acme/img2gray v<version> (built into build/dev unless `variant`, a
    build of it, is given); returns the tag."""
    if variant is None:
        variant = ROOT / "build" / "dev" / "img2gray"
        subprocess.run(
            [sys.executable, "-m", "tools.builder.op", "--out", str(variant)],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    tag = f"v{BuildConfig.load().version}"
    release_into_mirror(hub.repo(REPO_ID, "kernel"), stage([variant], root / "staged", REPO_ID), tag)
    return tag


def publish_layers(hub: HubServer) -> str:
    """acme/gray-layers 1.0.0 (tag v1.0.0, branch v1): the layer kernel docs/kernelpin.md's kernelize example maps
    a layer to; returns the tag."""
    layers = hub.repo(LAYERS_REPO_ID, "kernel")
    extra = {"__init__.py": b"from . import layers\n", "layers.py": LAYERS}
    layers.write(kernel_files("1.0.0", variants=(LAYERS_VARIANT,), extra=extra, name="gray-layers"), clear=True)
    layers.commit("release 1.0.0")
    layers.tag("v1.0.0")
    layers.branch("v1")
    return "v1.0.0"


def _port_taken(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"where the Hub API listens (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--root", type=Path, help="where its repositories and logs go (default: a new temporary directory)"
    )
    parser.add_argument(
        "--variant",
        type=Path,
        help="release this build of the checkout (a `tools.builder.op --out` directory) instead of building",
    )
    args = parser.parse_args(argv)
    if _port_taken(args.port):  # said before the build, in words: not after minutes, as a process's arguments
        sys.exit(
            f"error: port {args.port} on 127.0.0.1 is taken (another `./dev hub`?); stop that, or give another "
            "port with --port N"
        )
    own_root = args.root is None  # a temporary directory of its own is removed when it stops; a given one is kept
    root = args.root or Path(tempfile.mkdtemp(prefix="kernelpin-local-hub-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        root.mkdir(parents=True, exist_ok=True)
        return _serve(root, args.port, args.variant)
    except KeyboardInterrupt:
        return 0
    except SystemExit as exit_:
        own_root = own_root and exit_.code in (0, None)  # a failed start keeps its logs for the message's path
        raise
    finally:
        if own_root:
            shutil.rmtree(root, ignore_errors=True)


def _serve(root: Path, port: int, variant: Path | None) -> int:
    hub = HubServer(root, trusted_publishers=("acme", KERNELS_DOCS_ORG))
    what = variant or "this checkout's operator (building it into build/dev)"
    print(f"releasing {what} on a local Hub in {root} ...", flush=True)
    tag = publish_checkout(hub, root, variant)
    layers_tag = publish_layers(hub)
    docs_kernels = publish_kernels_docs_kernels(hub, root)
    try:
        hub.start(port)
    except RuntimeError as error:
        sys.exit(f"error: {error}")
    try:
        print(
            f"serving {REPO_ID} {tag} (this checkout's CPU build), {LAYERS_REPO_ID} {layers_tag} and "
            f"{', '.join(docs_kernels)} v1.0.0 (for kernels' own examples) on a local Hub; in another shell:",
            flush=True,
        )
        print(f"  export HF_ENDPOINT={hub.endpoint}", flush=True)
        print("Ctrl-C stops it.", flush=True)
        signal.pause()
    finally:
        hub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
