"""The ABI gate (kernelpin.publisher.abi_gate, HF's kernel-abi-check): shared libraries must meet manylinux_2_28 and abi3.

Real libraries, compiled here in a second: a C++ function that copies a std::shared_ptr, which is where
libstdc++ reads glibc's `__libc_single_threaded` (GLIBC_2.32) when the glibc headers have
<sys/single_threaded.h>. Compiled as it is, the gate refuses it, in stage and in publish; compiled with the
build's glibc floor (csrc/glibc_floor.h, what tools/builder/op.py pre-includes), it passes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpin.publisher.abi_gate import AbiError, gate, needed_libraries
from testkit.fake_kernel import write_variant
from testkit.releasing import BUILT_VERSIONS, ROOT, run
from tools.builder.config import BuildConfig
from tools.builder.op import LIBSTDCXX_DYNAMIC

pytest.importorskip("kernel_abi_check")

CPU = "torch213-cxx11-cpu-x86_64-linux"
SOURCE = """
#include <memory>
std::shared_ptr<int> keep(const std::shared_ptr<int>& p) { std::shared_ptr<int> copy = p; return copy; }
"""
# libstdc++'s own compiled code (locale, streams, call_once), which a static link copies into the library.
STREAMING_SOURCE = """
#include <sstream>
#include <string>
std::string show(int value) { std::ostringstream stream; stream << value; return stream.str(); }
"""
HAS_SINGLE_THREADED_H = (
    Path("/usr/include/x86_64-linux-gnu/sys/single_threaded.h").exists()
    or Path("/usr/include/sys/single_threaded.h").exists()
)


def compile_library(directory: Path, *flags: str, source: str = SOURCE, link: tuple[str, ...] = ()) -> Path:
    """Compile `source` into a shared library; `link` flags follow the object, as in a real link line."""
    compiler = shutil.which("g++") or pytest.skip("no g++")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "keep.cpp").write_text(source)
    library = directory / "_keep.abi3.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", *flags, str(directory / "keep.cpp"), *link, "-o", str(library)],
        check=True,
    )
    (directory / "keep.cpp").unlink()
    return library


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    if not HAS_SINGLE_THREADED_H:
        pytest.skip("this machine's glibc headers predate 2.32: its builds never reference __libc_single_threaded")
    root = tmp_path_factory.mktemp("libs")
    floor = ("-include", str(ROOT / "csrc" / "glibc_floor.h"))
    return {
        "plain": compile_library(root / "plain").read_bytes(),
        "floor": compile_library(root / "floor", *floor).read_bytes(),
        # What the H200 image's compiler wrapper does: -static-libstdc++ copies libstdc++.a into the library.
        "static-libstdc++": compile_library(
            root / "static", *floor, "-static-libstdc++", source=STREAMING_SOURCE
        ).read_bytes(),
        "static-libstdc++ relinked": compile_library(
            root / "relinked", *floor, "-static-libstdc++", source=STREAMING_SOURCE, link=tuple(LIBSTDCXX_DYNAMIC)
        ).read_bytes(),
    }


def variant_with(tmp_path: Path, library: bytes, version: str = "1.0.0") -> Path:
    return write_variant(tmp_path / f"variant-{version}", version, CPU, extra={"_keep.abi3.so": library})


def test_gate_refuses_glibc_2_32_and_says_what_to_do(libraries, tmp_path):
    directory = variant_with(tmp_path, libraries["plain"])
    with pytest.raises(AbiError) as refused:
        gate([directory])
    message = str(refused.value)
    assert (
        "_keep.abi3.so: __libc_single_threaded needs GLIBC_2.32: libstdc++ reads it when compiled against glibc"
        in message
    )
    assert "--glibc-floor 2.28" in message and "manylinux_2_28" in message


def test_the_glibc_floor_header_makes_the_same_code_pass(libraries, tmp_path):
    assert gate([variant_with(tmp_path, libraries["floor"])]) == 1


def test_a_static_libstdcxx_is_named_as_the_cause(libraries, tmp_path):
    """libstdc++.a brings the build machine's glibc symbols (on the H200 image: __isoc23_strtoul,
    __libc_single_threaded, arc4random, pthread_once) whatever the headers say; the gate says where they
    come from instead of pointing at the headers."""
    with pytest.raises(AbiError) as refused:
        gate([variant_with(tmp_path, libraries["static-libstdc++"])])
    message = str(refused.value)
    assert "it comes from a copy of libstdc++ linked into the library (it does not need libstdc++.so.6)" in message
    assert "--glibc-floor" not in message


def test_build_op_links_libstdcxx_dynamically_even_when_the_driver_adds_static(libraries, tmp_path):
    """tools/builder/op.py's link flags undo a driver's -static-libstdc++: the library needs libstdc++.so.6,
    as torch's own libraries do, and passes the gate."""
    directory = variant_with(tmp_path, libraries["static-libstdc++ relinked"])
    assert "libstdc++.so.6" in needed_libraries(directory / "_keep.abi3.so")
    assert gate([directory]) == 1


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs binutils' readelf to compare with")
def test_needed_libraries_agree_with_readelf(libraries, tmp_path):
    library = tmp_path / "lib.so"
    library.write_bytes(libraries["static-libstdc++ relinked"])
    listing = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    expected = [line.rsplit("[", 1)[1].rstrip("]") for line in listing.splitlines() if "(NEEDED)" in line]
    assert needed_libraries(library) == expected


def test_stage_and_publish_run_the_gate(libraries, tmp_path):
    bad = variant_with(tmp_path, libraries["plain"])
    done = run(
        [sys.executable, "-m", "tools.release", "stage", str(bad), "--repo", "acme/gray", "--out", str(tmp_path / "r")],
        cwd=ROOT,
        check=False,
    )
    assert (
        done.returncode == 1
        and "build/torch213-cxx11-cpu-x86_64-linux/_keep.abi3.so: __libc_single_threaded" in done.stderr
    )
    assert not (tmp_path / "r").exists()

    good = variant_with(tmp_path, libraries["floor"], "1.0.1")
    run(
        [
            sys.executable,
            "-m",
            "tools.release",
            "stage",
            str(good),
            "--repo",
            "acme/gray",
            "--out",
            str(tmp_path / "r"),
        ],
        cwd=ROOT,
    )
    # The library is replaced after staging (its digest updated to match): publish's own gate refuses it.
    staged = tmp_path / "r" / "build" / CPU
    shutil.rmtree(staged)
    shutil.copytree(bad, staged)
    done = run(
        [sys.executable, "-m", "kernelpin", "publish", str(tmp_path / "r"), "--repo", "acme/gray", "--dry-run"],
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 1 and "__libc_single_threaded needs GLIBC_2.32" in done.stderr


def test_gate_command_line(libraries, tmp_path):
    good, bad = variant_with(tmp_path, libraries["floor"]), variant_with(tmp_path, libraries["plain"], "2.0.0")
    passed = run([sys.executable, "-m", "kernelpin.publisher.abi_gate", str(good)], cwd=ROOT)
    assert "ABI gate passed: 1 shared library meets manylinux_2_28" in passed.stdout
    refused = run([sys.executable, "-m", "kernelpin.publisher.abi_gate", str(good), str(bad)], cwd=ROOT, check=False)
    assert refused.returncode == 1 and "1 ABI violation(s)" in refused.stderr


def test_ci_gate_over_a_conda_channel_and_variant_dirs(builds, libraries, tmp_path):
    """`python -m tools.release.abi_gate output` (the CI workflow's ABI gate step): the conda package of the offline
    build passes; a variant with a glibc 2.32 library next to it is refused by name."""
    channel = builds["0.1.0"]
    assert any(channel.rglob("*.conda"))
    passed = run([sys.executable, "-m", "tools.release.abi_gate", str(channel)], cwd=ROOT)
    assert "ABI gate passed: 1 shared library meets manylinux_2_28 and abi3" in passed.stdout
    bad = variant_with(tmp_path, libraries["plain"])
    refused = run([sys.executable, "-m", "tools.release.abi_gate", str(channel), str(bad)], cwd=ROOT, check=False)
    assert (
        refused.returncode == 1 and f"{bad}: _keep.abi3.so: __libc_single_threaded needs GLIBC_2.32" in refused.stderr
    )


def test_op_built_by_a_driver_that_links_libstdcxx_statically_passes(builds, static_libstdcxx_driver):
    """The H200 image's CXX is a wrapper that adds -static-libstdc++: the op built through it referenced
    pthread_once@GLIBC_2.34, arc4random@GLIBC_2.36, ... and the gate refused it. tools/builder/op.py links
    libstdc++ dynamically after torch's libraries, so the wrapper's build needs libstdc++.so.6 and passes.
    The release fixture compiles its bumped versions through such a wrapper (the real build_op build)."""
    if static_libstdcxx_driver is None:
        pytest.skip("needs g++ and its libstdc++.a to make a driver that links libstdc++ statically")
    linked = static_libstdcxx_driver.with_name("commands.log").read_text()
    for version in BUILT_VERSIONS:
        if version == BuildConfig.load().version:
            continue  # the conda package: built by the recipe's compiler
        out = builds[version]
        (library,) = out.glob("*.so")
        namespace = library.name.removesuffix(".abi3.so")  # build_op renames the library torch's builder links
        assert f"-o {namespace}.so" in linked  # the build's link went through the driver
        assert "libstdc++.so.6" in needed_libraries(library)
        assert gate([out]) == 1


STABLE = "torch-stable-abi211-cpu-x86_64-linux"
# Real libraries calling a shim of the target (aoti_torch_get_dim), one of torch 2.13 (torch_exception_get_what)
# and a C++ function of c10: what a stable-ABI build gets when TORCH_TARGET_VERSION is forgotten or an ATen
# header slips in. They load on new torch and fail only on old, so the gate must refuse them.
STABLE_SOURCES = {
    "target shim": 'extern "C" int aoti_torch_get_dim(void*, long*);\n'
    "long dims(void* t) { long d = 0; aoti_torch_get_dim(t, &d); return d; }",
    "newer shim": 'extern "C" const char* torch_exception_get_what();\n'
    "const char* what() { return torch_exception_get_what(); }",
    "c10 symbol": "namespace c10 { void warn_once(); }\nvoid call() { c10::warn_once(); }",
}


@pytest.mark.parametrize(
    ("case", "refusal"),
    [
        ("target shim", None),
        (
            "newer shim",
            (
                r"torch_exception_get_what needs torch 2\.13 \(a shim newer "
                r"than the variant's torch 2\.11\): build with "
                r"-DTORCH_TARGET_VERSION"
            ),
        ),
        ("c10 symbol", r"_ZN3c109warn_onceEv needs libtorch's C\+\+ ABI"),
    ],
)
def test_stable_abi_variants_keep_the_stable_abi_rule(tmp_path, case, refusal):
    stable = compile_library(tmp_path / STABLE, source=STABLE_SOURCES[case])
    if refusal is None:
        assert gate([stable.parent]) == 1
    else:
        with pytest.raises(AbiError, match=refusal):
            gate([stable.parent])
    # The rule is the stable variants' own: an exact build may use libtorch's C++ ABI and every shim.
    exact = compile_library(tmp_path / CPU, source=STABLE_SOURCES[case])
    assert gate([exact.parent]) == 1


def test_stable_abi_variant_found_by_its_metadata(tmp_path):
    """A variant directory of another name (tools/builder/op.py --out DIR) is known by its metadata.json."""
    library = compile_library(tmp_path / "img2gray", source=STABLE_SOURCES["newer shim"])
    (library.parent / "metadata.json").write_text(f'{{"variant": "{STABLE}"}}')
    with pytest.raises(AbiError, match="torch_exception_get_what needs torch 2.13"):
        gate([library.parent])
