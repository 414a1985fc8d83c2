"""The CPU's hand-written uint8 paths (csrc/img2gray_cpu_simd.h) against the float32 contract on all 2^24 colours.

The AVX-512 VNNI path computes in fixed point and proves lane by lane that it rounds as the float formula does
(the other lanes take the float path), so it is checked for weights whose rounding ties it must hand on (binary
fractions: every colour with r + b odd is an exact tie), weights that saturate, and weights it refuses. Three
levels: the operator on this CPU's widest path (every layout, one and two threads, in this process); the operator
with each narrower path forced by IMG2GRAY_CPU_ISA (read once per process: one process per path); and every path's
spans directly (tests/op/every_colour.cpp, without torch), natively and, for NEON, cross-compiled under qemu.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.op.test_img2gray import BT601, BT709, ROOT, reference_uint8

WEIGHTS = [
    BT601,
    (0.25, 0.5, 0.25),  # binary fractions: exact ties
    (0.5, -0.25, 1.5),  # saturates both ways; negative and above 1: the fixed-point path refuses these weights
    BT709,
    (0.5, 0.5, 0.0021),  # white sums to 255.54: saturates above, within the fixed-point path
    (0.1234567, 0.654321, 0.2222222),
]
EVERY_COLOUR = ROOT / "tests" / "op" / "every_colour.cpp"


def every_colour() -> torch.Tensor:
    """The 2^24 colours as a 4096x4096 HWC image."""
    values = torch.arange(1 << 24, dtype=torch.int32)
    return torch.stack([values >> 16, (values >> 8) & 255, values & 255], dim=-1).to(torch.uint8).view(4096, 4096, 3)


def check_every_colour(img2gray, weights_list=WEIGHTS, threads=(1, 2)) -> None:
    """The op on all 2^24 colours, HWC, planar (CHW) and channels_last NCHW, against reference_uint8."""
    hwc = every_colour()
    layouts = {
        "hwc": (hwc, -1),
        "planar": (hwc.permute(2, 0, 1).contiguous(), 0),
        "channels_last": (hwc.permute(2, 0, 1).unsqueeze(0).contiguous(memory_format=torch.channels_last), 1),
    }
    saved = torch.get_num_threads()
    try:
        for weights in weights_list:
            expected = reference_uint8(hwc, -1, weights).flatten()
            for count in threads:
                torch.set_num_threads(count)
                for name, (x, dim) in layouts.items():
                    got = img2gray.img2gray(x, dim=dim, weights=weights).flatten()
                    wrong = (got != expected).nonzero().flatten()
                    assert wrong.numel() == 0, (
                        f"{name}, weights {weights}, {count} thread(s): {wrong.numel()} colours differ, "
                        f"first {int(wrong[0]):#08x}: {int(got[wrong[0]])} instead of {int(expected[wrong[0]])}"
                    )
    finally:
        torch.set_num_threads(saved)


def cpu_flags() -> set[str]:
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return set()
    for line in cpuinfo.read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def paths_of_this_cpu() -> list[str]:
    """IMG2GRAY_CPU_ISA values of the paths this CPU runs, narrowest first (kIsaNames in csrc/img2gray_cpu_simd.h)."""
    if platform.machine() == "aarch64":
        return ["scalar", "neon"]
    flags = cpu_flags()
    paths = ["scalar"]
    for path, needs in (("avx2", {"avx2"}), ("avx512", {"avx512bw", "avx512vbmi"}), ("avx512vnni", {"avx512_vnni"})):
        if not needs <= flags:
            break
        paths.append(path)
    return paths


def test_every_colour_on_the_widest_path(img2gray, forced_runs):
    check_every_colour(img2gray)  # while the narrower paths' processes run


@pytest.mark.parametrize("weights", WEIGHTS[:2], ids=["bt601", "ties"])
def test_interleaved_spans_of_every_short_length(img2gray, weights):
    """HWC frames of 1 to 300 pixels: the interleaved VNNI loop reads a span's two halves side by side, so the
    lengths with no block, one block (no second half), an odd number of blocks (a second half one block shorter) and
    every tail after them each take their own turn; with the tie weights half of all lanes are redone in both halves."""
    generator = torch.Generator().manual_seed(54)
    for pixels in range(1, 301):
        x = torch.randint(0, 256, (pixels, 3), dtype=torch.uint8, generator=generator)
        got = img2gray.img2gray(x, dim=-1, weights=weights)
        assert torch.equal(got, reference_uint8(x, -1, weights)), f"{pixels} pixels"


FORCED = ["scalar", "avx2", "avx512"] if platform.machine() != "aarch64" else ["scalar"]


# A last-level cache so small for the op that every 4096x4096 image streams its output (csrc/img2gray_cpu.cpp): the
# widest path in this process streams where this CPU's cache is small, the forced processes on every CPU.
STREAMED = {"IMG2GRAY_CPU_CACHE_BYTES": str(1 << 20)}


@pytest.fixture(scope="module")
def forced_runs(img2gray):
    """One process per narrower path of this CPU, and one for the widest path, all started at once, each writing
    its output with streaming stores: the default weights and the ties (every path meets every weight in
    test_every_path_spans_natively)."""
    program = (
        "import img2gray\nfrom tests.op.test_uint8_cpu_paths import WEIGHTS, check_every_colour\n"
        "check_every_colour(img2gray, WEIGHTS[:2])\nprint('ok')\n"
    )
    paths = paths_of_this_cpu()
    runs = {path: forced(img2gray, path, program, STREAMED) for path in FORCED if path in paths[:-1]}
    runs["widest, streamed"] = forced(img2gray, paths[-1], program, STREAMED)
    yield runs
    for run in runs.values():
        run.kill()


def forced(img2gray, path: str, program: str, environ: dict[str, str] | None = None) -> subprocess.Popen:
    variant_parent = str(Path(img2gray.__file__).parent.parent)
    return subprocess.Popen(
        [sys.executable, "-c", program],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={
            **os.environ,
            "IMG2GRAY_CPU_ISA": path,
            **(environ or {}),
            "PYTHONPATH": os.pathsep.join([variant_parent, str(ROOT)]),
        },
    )


@pytest.mark.parametrize("path", [*FORCED, "widest, streamed"])
def test_every_colour_on_each_narrower_path(forced_runs, path):
    if path not in forced_runs:
        pytest.skip(f"{path} is this CPU's widest path (tested above) or one it does not run")
    stdout, stderr = forced_runs[path].communicate(timeout=600)
    assert forced_runs[path].returncode == 0 and "ok" in stdout, stderr[-3000:]


def test_unknown_cpu_path_is_refused_by_name(img2gray):
    program = "import torch, img2gray\nimg2gray.img2gray(torch.zeros(4, 4, 3, dtype=torch.uint8), dim=-1)\n"
    _stdout, stderr = forced(img2gray, "avx1024", program).communicate(timeout=600)
    assert "IMG2GRAY_CPU_ISA=avx1024 is not a CPU path of this build; use one of scalar, " in stderr, stderr[-3000:]


@pytest.mark.parametrize("given", ["lots", "0", "-5", "12kB", "99999999999999999999"])
def test_a_cache_size_that_is_none_is_refused_by_name(img2gray, given):
    program = "import torch, img2gray\nimg2gray.img2gray(torch.zeros(4, 4, 3, dtype=torch.uint8), dim=-1)\n"
    widest = paths_of_this_cpu()[-1]
    _, stderr = forced(img2gray, widest, program, {"IMG2GRAY_CPU_CACHE_BYTES": given}).communicate(timeout=600)
    assert f"IMG2GRAY_CPU_CACHE_BYTES={given} is not a number of bytes" in stderr, stderr[-3000:]


def compile_every_colour(compiler: str, binary: Path, *flags: str) -> None:
    include = Path(torch.__file__).parent / "include"
    subprocess.run(
        [
            compiler,
            "-std=c++17",
            "-O2",
            "-ffp-contract=off",
            *flags,
            f"-I{ROOT / 'csrc'}",
            "-isystem",
            str(include),
            str(EVERY_COLOUR),
            "-o",
            str(binary),
        ],
        check=True,
    )


def test_every_path_spans_natively(tmp_path):
    compiler = shutil.which(os.environ.get("CXX", "c++"))
    if compiler is None:
        pytest.skip("no C++ compiler")
    compile_every_colour(compiler, tmp_path / "every_colour")
    result = subprocess.run([tmp_path / "every_colour"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    for path in paths_of_this_cpu()[1:]:
        assert f"{path}: all 2^24 colours match for 6 weights" in result.stdout


@pytest.mark.skipif(platform.machine() == "aarch64", reason="runs natively here: test_every_path_spans_natively")
def test_neon_spans_under_qemu(tmp_path):
    """The NEON path, cross-compiled for linux-aarch64 and run under qemu user emulation (./dev setup and .ci/run
    install g++-aarch64-linux-gnu and qemu-user-static where apt-get works). Three weights: the emulator is slow."""
    compiler, emulator = shutil.which("aarch64-linux-gnu-g++"), shutil.which("qemu-aarch64-static")
    if compiler is None or emulator is None:
        pytest.skip(
            "needs aarch64-linux-gnu-g++ and qemu-aarch64-static (apt-get install g++-aarch64-linux-gnu "
            "qemu-user-static)"
        )
    compile_every_colour(compiler, tmp_path / "every_colour", "-static")
    result = subprocess.run([emulator, tmp_path / "every_colour", "3"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    assert "neon: all 2^24 colours match for 3 weights, interleaved and planar" in result.stdout
