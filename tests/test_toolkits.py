"""Every CUDA toolkit of the matrix compiles here (issue 51), in a CI-sized piece: the table build.toml is checked
against is what each installed toolkit's own tools list, an arch a toolkit cannot compile is refused, and CUDA 13.2
from PyPI compiles the device code for two capabilities (exact flavour; the stable flavour's SASS compared), whose
object then splits into per-capability builds that NVIDIA's cuobjdump reads as such.

The toolkits are installed by `python -m tools.maintainer.toolkits --install-only` (about 400 MB from PyPI, cached
under build/toolkits/); without them these tests skip and say so. The full run is the maintainer script's.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kernelpin.files.integrity import sha256_file
from tools.builder import capability_builds
from tools.builder.config import TOOLKIT_ARCHS, BuildConfig, BuildConfigError
from tools.maintainer.toolkits import MARKER, TOOLKITS, ToolkitError, check_list, compile_device_code, gpu_codes

INSTALLED = [release for release, toolkit in TOOLKITS.items() if (toolkit.prefix() / MARKER).is_file()]
needs = pytest.mark.skipif(
    not INSTALLED, reason="no toolkit installed: python -m tools.maintainer.toolkits --install-only"
)


@needs
@pytest.mark.parametrize("release", INSTALLED)
def test_the_table_is_what_each_toolkit_compiles(release):
    assert frozenset(gpu_codes(TOOLKITS[release])) == TOOLKIT_ARCHS[release]


def test_every_toolkit_of_the_matrix_has_its_measured_row():
    assert set(TOOLKITS) == set(TOOLKIT_ARCHS) >= set(BuildConfig.load().cuda_capabilities)


def test_an_arch_a_toolkit_cannot_compile_is_refused():
    with pytest.raises(ToolkitError, match=r"CUDA 12\.6 cannot compile 10\.0\+PTX \(build\.toml"):
        check_list("12.6", ["9.0", "10.0+PTX"], sorted(TOOLKIT_ARCHS["12.6"]))
    config = {
        "general": {"name": "x", "version": "0.1.0", "license": "MIT", "homepage": "h", "repository": "r"},
        "cuda": {"capabilities": {"12.6": ["9.0", "12.0+PTX"]}},
        "torch": {"src": ["build.toml"]},
        "kernel": {"cpu": {"backend": "cpu", "src": ["build.toml"]}},
    }
    root = Path(__file__).resolve().parents[1]
    with pytest.raises(BuildConfigError, match=r"CUDA 12\.6 cannot compile 12\.0"):
        BuildConfig.from_dict(config, root)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    if "13.2" not in INSTALLED:
        pytest.skip("CUDA 13.2 not installed: python -m tools.maintainer.toolkits --toolkit 13.2 --install-only")
    work = tmp_path_factory.mktemp("toolkit")
    return compile_device_code(TOOLKITS["13.2"], ["8.0", "9.0+PTX"], work), work


def test_cuda_13_2_compiles_the_device_code(compiled):
    result, _ = compiled
    assert result.version == "13.2.86" and result.archs == ("8.0", "9.0+PTX")
    assert {"sm_80", "sm_90", "ptx_90"} <= set(result.sizes)
    # The record says whether the stable flavour's device code is the exact one's (on CUDA 13.2 it is not: its
    # BFloat16 kernels inline otherwise); either way each flavour compiles its own.
    assert result.notes[0].startswith("stable flavour (-DUSE_CUDA -DTORCH_TARGET_VERSION) compiled for 8.0: its sm_80")


def test_the_object_splits_into_per_capability_builds(compiled):
    _, work = compiled
    fat = work / "img2gray-exact.o"
    cuobjdump = TOOLKITS["13.2"].bin_dir() / "cuobjdump"
    listing = {}
    for arch in ("8.0", "9.0+PTX"):
        part = capability_builds.split_object(fat, arch, work / f"{arch}.o")
        library = work / f"{arch}.so"
        subprocess.run(["c++", "-shared", str(part), "-o", str(library)], check=True)
        listed = subprocess.run(
            [str(cuobjdump), "--list-elf", "--list-ptx", str(library)], capture_output=True, text=True
        )
        listing[arch] = sorted(line.split(": ", 1)[1] for line in listed.stdout.splitlines() if ": " in line)
        # The same bytes as the fat build's image of that capability: nothing recompiled.
        [images] = capability_builds.images(capability_builds.section(library))
        [fat_images] = capability_builds.images(capability_builds.section(fat))
        sm = capability_builds.sm_of(arch)[0]
        assert [i.raw for i in images] == [i.raw for i in fat_images if i.sm == sm]
        assert library.stat().st_size < fat.stat().st_size
    assert listing == {"8.0": ["img2gray.sm_80.cubin"], "9.0+PTX": ["img2gray.sm_90.cubin", "img2gray.sm_90.ptx"]}
    with pytest.raises(capability_builds.FatbinError, match="no SASS for it"):
        capability_builds.split_object(fat, "8.6", work / "8.6.o")


def test_the_builder_relinks_one_library_per_capability(compiled, tmp_path):
    """capability_builds.write (tools/builder/capability_builds.py) as tools/builder/op.py calls it after the fat link: the link line read
    from build.ninja (as torch's extension builder writes it), each library re-linked with the CUDA object cut down,
    its own metadata.json, and the listing the fat metadata.json gets."""
    from kernelpin.format.metadata import parse_metadata, sha256_base64
    from testkit.fake_kernel import variant_files

    _, work = compiled
    build_dir = tmp_path / "obj"
    build_dir.mkdir()
    (build_dir / "img2gray.cuda.o").write_bytes((work / "img2gray-exact.o").read_bytes())
    (build_dir / "build.ninja").write_text(
        "ninja_required_version = 1.3\ncxx = c++\nldflags = -shared -Wl,-x\n\n"
        "rule link\n  command = $cxx $in $ldflags -o $out\n\n"
        "build img2gray.cuda.o: cuda_compile /src/img2gray.cu\n"
        "build _img2gray_0123456789.so: link img2gray.cuda.o\n"
    )
    variant = tmp_path / "variant"
    files = variant_files("1.0.0", "torch213-cxx11-cu130-x86_64-linux", ("8.0", "9.0+PTX"))
    for name, data in files.items():
        if name != "metadata.json":
            (variant / name).parent.mkdir(parents=True, exist_ok=True)
            (variant / name).write_bytes(data)
    (variant / "_img2gray_0123456789.abi3.so").write_bytes(b"the fat library")
    document = json.loads(files["metadata.json"])
    listing = capability_builds.write(
        variant, document, build_dir, "_img2gray_0123456789.abi3.so", ["8.0", "9.0+PTX"], tmp_path / "builds"
    )
    assert sorted(listing) == ["sm_80", "sm_90"] and listing["sm_90"]["archs"] == ["9.0+PTX"]
    cuobjdump = TOOLKITS["13.2"].bin_dir() / "cuobjdump"
    for name, expected in (
        ("sm_80", ["img2gray.sm_80.cubin"]),
        ("sm_90", ["img2gray.sm_90.cubin", "img2gray.sm_90.ptx"]),
    ):
        build = tmp_path / "builds" / name
        library = build / "_img2gray_0123456789.abi3.so"
        listed = subprocess.run(
            [str(cuobjdump), "--list-elf", "--list-ptx", str(library)], capture_output=True, text=True
        )
        assert sorted(line.split(": ", 1)[1] for line in listed.stdout.splitlines() if ": " in line) == expected
        own = parse_metadata((build / "metadata.json").read_bytes(), name)
        assert own.archs == tuple(listing[name]["archs"]) and "capability-builds" not in own.document
        on_disk = {p.relative_to(build).as_posix(): p for p in build.rglob("*") if p.is_file()}
        assert listing[name]["files"] == {path: sha256_base64(sha256_file(p)) for path, p in sorted(on_disk.items())}
