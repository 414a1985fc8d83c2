"""The CPU's AVX-512 float32, float16 and bfloat16 spans (csrc/img2gray_cpu_simd.h) against the compiler's loops,
bit for bit: the same inputs through this process's widest path and through a process capped at the AVX2 path
(IMG2GRAY_CPU_ISA, read once per process), which leaves every float type to the loops of img2gray_cpu.cpp.

The 16-bit inputs are every bit pattern at random, NaNs with payloads, infinities and subnormals among them; the
float32 ones mix random bit patterns with ordinary values. Odd sizes leave tails to the loops.
"""

from __future__ import annotations

import pytest
import torch

from tests.op.test_img2gray import BT601
from tests.op.test_uint8_cpu_paths import forced, paths_of_this_cpu

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
WEIGHTS = [BT601, (0.5, -0.25, 1.5), (1e-3, 3.0, 0.7)]
PIXELS = 3 * 4099 + 5  # not a multiple of 16


def inputs(dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, int]]:
    """The same pixels as HWC, planar (CHW) and channels_last NCHW, made the same way in every process."""
    generator = torch.Generator().manual_seed(54)
    if dtype == torch.float32:
        bits = torch.randint(-(2**31), 2**31, (PIXELS, 3), generator=generator, dtype=torch.int64).to(torch.int32)
        values = bits.view(torch.float32).clone()
        values[: PIXELS // 2] = torch.randn(PIXELS // 2, 3, generator=generator) * 100
    else:
        bits = torch.randint(-(2**15), 2**15, (PIXELS, 3), generator=generator, dtype=torch.int32).to(torch.int16)
        values = bits.view(dtype).clone()
        values[: PIXELS // 4] = (torch.randn(PIXELS // 4, 3, generator=generator) * 100).to(dtype)
    hwc = values.view(1, PIXELS, 3)
    return {
        "hwc": (hwc, -1),
        "planar": (hwc.permute(2, 0, 1).contiguous(), 0),
        "channels_last": (hwc.permute(2, 0, 1).unsqueeze(0).contiguous(memory_format=torch.channels_last), 1),
    }


def outputs(img2gray, dtype_name: str) -> dict[str, torch.Tensor]:
    """The results' bits, every NaN as one value: which NaN an operation returns (its sign, its payload) depends on
    the order of its operands, which C++ leaves to the compiler, and neither device promises one (CUDA makes every
    float16 NaN 0x7FFF)."""
    dtype = DTYPES[dtype_name]
    integer = torch.int32 if dtype == torch.float32 else torch.int16
    results = {}
    for layout, (x, dim) in inputs(dtype).items():
        for weights in WEIGHTS:
            y = img2gray.img2gray(x, dim=dim, weights=weights).flatten()
            results[f"{layout} {weights}"] = torch.where(y.isnan(), torch.full_like(y, float("nan")), y).view(integer)
    return results


@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_float_spans_match_the_loops_bit_for_bit(img2gray, tmp_path, dtype_name):
    paths = paths_of_this_cpu()
    if "avx512" not in paths:
        pytest.skip("this CPU runs no AVX-512 path: the float types take the compiler's loops only")
    saved = tmp_path / "loops.pt"
    program = (
        "import sys, torch, img2gray\nfrom tests.op.test_float_cpu_paths import outputs\n"
        f"torch.save(outputs(img2gray, {dtype_name!r}), {str(saved)!r})\nprint('ok')\n"
    )
    stdout, stderr = forced(img2gray, "avx2", program).communicate(timeout=600)
    assert "ok" in stdout, stderr[-3000:]
    loops = torch.load(saved)
    for case, got in outputs(img2gray, dtype_name).items():
        wrong = (got != loops[case]).nonzero().flatten()
        assert wrong.numel() == 0, (
            f"{dtype_name} {case}: {wrong.numel()} of {got.numel()} differ, first at {int(wrong[0])}: "
            f"{int(got[wrong[0]]) & 0xFFFFFFFF:#x} instead of {int(loops[case][wrong[0]]) & 0xFFFFFFFF:#x}"
        )
