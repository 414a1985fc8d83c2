"""Fake kernels: small pure-Python kernel variants laid out and hashed as tools/builder/op.py lays out the
operator (files + metadata.json written by the same kernelpin.format.metadata.compose), for tests that need no
compiler.

One definition serves both forms a test needs: a repository tree (`kernel_files`, `publish`) and a variant
directory on disk (`write_variant`).
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

from kernelpin.format import capabilities
from kernelpin.format import metadata as kernel_metadata
from kernelpin.format.layout import CAPABILITY_DIR, METADATA
from kernelpin.format.ranges import Version
from kernelpin.format.variant import Variant
from testkit.hub import MirrorRepo

BUILDER = {"name": "testkit.fake_kernel", "version": "1.0.0"}
CPU_213 = "torch213-cxx11-cpu-x86_64-linux"
VARIANTS = (
    CPU_213,
    "torch213-cxx11-cu128-x86_64-linux",
    "torch213-cxx11-cu130-x86_64-linux",
    "torch212-cxx11-cpu-x86_64-linux",
    "torch212-cxx11-cu129-x86_64-linux",
)
ARCHS = ("8.0", "9.0", "12.0+PTX")
ROCM_ARCHS = ("gfx90a", "gfx942")


def op_id(name: str, package: dict[str, bytes]) -> str:
    """metadata.json's id (the torch.ops namespace) of a build of the test kernel `name` whose Python package
    holds `package` (path -> bytes, before any archive): derived from that content, as tools/builder/op.py
    derives its namespace (`build_id`), so two different builds never share an id, as with kernel-builder
    (kernels 0.18+ refuses a second build under an id already imported in the process)."""
    digest = hashlib.sha256()
    for path, data in sorted(package.items()):
        digest.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
    return f"_{name.replace('-', '_')}_{digest.hexdigest()[:10]}"


def zip_archive(files: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    """A ZIP build's archive as kernel-builder makes it: the package's files at its root, reproducible (fixed
    timestamps); `links`: symbolic-link members (name -> target), for tests of hostile archives."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in sorted(files.items()):
            archive.writestr(zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0)), data)
        for path, target in (links or {}).items():
            info = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o120777 << 16  # S_IFLNK
            archive.writestr(info, target)
    return buffer.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def backend_metadata(variant: str, archs: tuple[str, ...] = ARCHS) -> dict:
    """metadata.json's `backend` as kernel-builder writes it for `variant`: the type, and the archs for CUDA
    (`archs`) and ROCm (gfx names); CPU for a name no loader reads (tests of such names)."""
    try:
        backend = Variant.parse(variant).backend
    except ValueError:
        backend = None
    name = backend.name if backend is not None else "cpu"  # `sdk`: backend-agnostic
    kind = {"npu": "cann", "universal": "cpu"}.get(name, name)
    if kind == "cuda":
        return {"type": "cuda", "version": "13.0", "archs": list(archs)}
    if kind == "rocm":
        return {"type": "rocm", "archs": list(ROCM_ARCHS)}
    return {"type": kind}


def variant_files(
    version: str,
    variant: str,
    archs: tuple[str, ...] = ARCHS,
    metadata: bool = True,
    extra: dict[str, bytes] | None = None,
    layout: str = "files",
    name: str = "img2gray",
) -> dict[str, bytes]:
    """The files of one variant directory: `__init__.py`, `_impl.py` (+ `extra`) and their metadata.json;
    with layout="zip" (kernel-builder's ZIP builds, kernels 0.19) those files are packed into `<id>.zip`."""
    files: dict[str, bytes] = {
        "__init__.py": b"from ._impl import VARIANT, gray\n" + f'VERSION = "{version}"\n'.encode(),
        "_impl.py": (
            f'VARIANT = "{variant}"\n\n\n'
            "def gray(pixels):\n"
            "    return [(299 * r + 587 * g + 114 * b) // 1000 for r, g, b in pixels]\n"
        ).encode(),
        **(extra or {}),
    }
    namespace = op_id(name, files)
    if layout == "zip":
        files = {f"{namespace}.zip": zip_archive(files)}
    if metadata:
        backend = backend_metadata(variant, archs)
        cuda = backend["type"] == "cuda"
        document = kernel_metadata.compose(
            op_id=namespace,
            name=name,
            version=Version.parse(version),
            license="Apache-2.0",
            variant=variant,
            backend=backend,
            files={path: sha256(data) for path, data in files.items()},
            builder=BUILDER,
            provenance={"source_commit": None, "torch": "2.13.0", "cuda": "13.0" if cuda else None},
            extra={"build-layout": "zip"} if layout == "zip" else None,
        )
        files[METADATA] = kernel_metadata.render(document).encode()
    return files


def kernel_files(
    version: str,
    variants: tuple[str, ...] = VARIANTS,
    metadata: bool = True,
    extra: dict[str, bytes] | None = None,
    layout: str = "files",
    name: str = "img2gray",
) -> dict[str, bytes]:
    """A release's repository tree: README.md and build/<variant>/... for every variant (`layout`: files or zip)."""
    files: dict[str, bytes] = {"README.md": f"# test kernel {version}\n".encode()}
    for variant in variants:
        own = variant_files(version, variant, metadata=metadata, extra=extra, layout=layout, name=name)
        files.update({f"build/{variant}/{path}": data for path, data in own.items()})
    return files


def publish(repo: MirrorRepo, version: str, tag: str | None = None, annotated: bool = False, **kwargs) -> str:
    """Commit a release of the fake kernel as the repository's whole tree and tag it; return the commit."""
    repo.write(kernel_files(version, **kwargs), clear=True)
    commit = repo.commit(f"release {version}")
    repo.tag(tag or f"v{version}", annotated=annotated)
    return commit


def write_variant(
    directory: Path,
    version: str,
    variant: str,
    archs: tuple[str, ...] = ARCHS,
    extra: dict[str, bytes] | None = None,
    layout: str = "files",
) -> Path:
    """One variant directory on disk, as tools/builder/op.py would leave it (`extra`: more files, e.g. a library)."""
    directory.mkdir(parents=True)
    for name, data in variant_files(version, variant, archs, extra=extra, layout=layout).items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(data)
    return directory


def device_code(arch: str, size: int) -> bytes:
    """Stand-in device code of one capability: `size` bytes that differ per capability."""
    seed = hashlib.sha256(arch.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def capability_release_files(
    version: str, variant: str, archs: tuple[str, ...] = ARCHS, device_size: int = 1000
) -> dict[str, bytes]:
    """A release tree whose CUDA `variant` carries per-capability builds: build/<variant>/ (the fat build: every
    capability's stand-in device code in `_device.bin`, BUILD = "fat") and capabilities/<variant>/sm_XY/ (that
    capability's code alone, BUILD = "sm_XY"), each build's metadata.json composed as tools/builder/op.py does, the
    fat one listing the others (`capability-builds`)."""

    def build(label: str, own_archs: tuple[str, ...]) -> tuple[dict[str, bytes], dict]:
        extra = {
            "_device.bin": b"".join(device_code(arch, device_size) for arch in own_archs),
            "_build.py": f'BUILD = "{label}"\n'.encode(),
        }
        files = variant_files(version, variant, own_archs, extra=extra)
        document = json.loads(files[METADATA])
        # One op id for every build of the variant (as op.py re-links the fat build's objects), whatever the code.
        fat_id = op_id("img2gray", {k: v for k, v in variant_files(version, variant, archs).items() if k != METADATA})
        document["id"] = fat_id
        return files, document

    tree: dict[str, bytes] = {"README.md": f"# test kernel {version}\n".encode()}
    listing = {}
    for arch in archs:
        name = capabilities.build_name(arch)
        files, document = build(name, (arch,))
        files[METADATA] = kernel_metadata.render(document).encode()
        tree.update({f"{CAPABILITY_DIR}/{variant}/{name}/{path}": data for path, data in files.items()})
        listing[name] = {
            "archs": [arch],
            "files": {path: kernel_metadata.sha256_base64(sha256(data)) for path, data in sorted(files.items())},
        }
    files, document = build("fat", archs)
    document[capabilities.KEY] = listing
    files[METADATA] = kernel_metadata.render(document).encode()
    tree.update({f"build/{variant}/{path}": data for path, data in files.items()})
    return tree
