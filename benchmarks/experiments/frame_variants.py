"""Experiment: the planar float kernels of frame_variants.cu against the product op and torch.compile's own
Triton kernel, in one process, on the frames where torch.compile was up to 1% ahead.

    python -m benchmarks.experiments.frame_variants LIB.so [--rounds N] [--json F] [--ncu] [--only RE] [--cases RE]
                                                         [--fresh-outputs]

Timed as bench_op.py times (each call behind ~1 ms of GPU busy-wait, inputs rotated over 512 MB, candidates
taking turns in blocks, each from a clean L2, after a round that is not kept: bench_op.time_rounds), with more and
longer rounds (`--rounds` blocks of 30 calls). Reported: median, trimmed mean, and the mean of per-round
differences against torch.compile with its standard error; the CUDA event timer ticks in 32 ns, about 0.6% of a
720p frame, and means of many calls resolve below a tick where medians cannot.
Outputs: by default every candidate returns a new output per call (the "new output" convention of the peers: the
caching allocator hands each call the block the previous call freed, so an output that fits in L2 stays there);
`--fresh-outputs` has the op (out=) and the variants write outputs that rotate with the inputs, as the copy does
(torch.compile keeps its own convention there, as a fixed point of reference).
Variants' outputs are compared with the product's (bitwise) and torch.compile's (max difference, share of
elements that differ). `--ncu`: each candidate three times per case, for Nsight Compute.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import re
import statistics
from pathlib import Path

import torch

from benchmarks.bench_op import ROTATION_BYTES, eager_expression, input_sets, paired, time_rounds, trimmed_mean

CASES = [
    ("720p float16", (1, 3, 720, 1280), torch.float16),
    ("720p float32", (1, 3, 720, 1280), torch.float32),
    ("1080p float16", (1, 3, 1080, 1920), torch.float16),
    ("1080p float32", (1, 3, 1080, 1920), torch.float32),
    ("8x720p float16", (8, 3, 720, 1280), torch.float16),
    ("4K float16", (1, 3, 2160, 3840), torch.float16),
    ("4K float32", (1, 3, 2160, 3840), torch.float32),
    ("4K uint8", (1, 3, 2160, 3840), torch.uint8),
    ("8x1080p uint8", (8, 3, 1080, 1920), torch.uint8),
]
DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2, torch.uint8: 3}
BLOCK_CALLS = 30


def load_variants(path: Path) -> tuple[ctypes.CDLL, list[str]]:
    lib = ctypes.CDLL(str(path))
    lib.fv_name.restype = ctypes.c_char_p
    lib.fv_launch.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_longlong,
        ctypes.c_longlong,
        ctypes.c_void_p,
    ]
    return lib, [lib.fv_name(i).decode() for i in range(lib.fv_count())]


def candidates(lib, names, img2gray, shape, dtype, inputs, outputs, only: re.Pattern) -> dict:
    """The op, torch.compile and the variants that apply, each as fn(i) on inputs[i]. With `outputs` (fresh
    outputs) the op and the variants write outputs[i]; without, each call returns a new output, as the op and
    torch.compile do (a fixed buffer of a variant's own measured 30-100 ns apart from the same kernel writing
    the allocator's block: where an output lies matters)."""
    planes, inner = shape[0], shape[2] * shape[3]
    out_shape = (planes, 1, shape[2], shape[3])
    stream = torch.cuda.current_stream().cuda_stream
    torch._dynamo.reset()
    compiled = torch.compile(eager_expression, dynamic=False)

    def output(i: int) -> torch.Tensor:
        return outputs[i] if outputs else torch.empty(out_shape, dtype=dtype, device="cuda")

    found = (
        {"img2gray (out=)": lambda i: img2gray.img2gray(inputs[i], dim=-3, out=outputs[i])}
        if outputs
        else {"img2gray (new output)": lambda i: img2gray.img2gray(inputs[i], dim=-3)}
    )
    found["torch.compile"] = lambda i: compiled(inputs[i], -3)
    for index, name in enumerate(names):
        if not only.search(name):
            continue

        def call(i, index=index):
            out = output(i)
            if (
                lib.fv_launch(index, DTYPE_CODE[dtype], inputs[i].data_ptr(), out.data_ptr(), planes, inner, stream)
                != 1
            ):
                raise RuntimeError(f"variant {names[index]} failed")
            return out

        if (
            lib.fv_launch(index, DTYPE_CODE[dtype], inputs[0].data_ptr(), output(0).data_ptr(), planes, inner, stream)
            == 1
        ):
            found[name] = call
    return found


def agreement(got: torch.Tensor, product: torch.Tensor, compiled: torch.Tensor) -> dict:
    return {
        "equals product": bool(torch.equal(got, product)),
        "max diff vs torch.compile": (got.double() - compiled.double()).abs().max().item(),
        "share differing from torch.compile": (got != compiled).double().mean().item(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lib", type=Path)
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--ncu", action="store_true")
    parser.add_argument("--only", type=re.compile, default=re.compile(""), help="variants whose name matches")
    parser.add_argument("--cases", type=re.compile, default=re.compile(""), help="cases whose name matches")
    parser.add_argument("--fresh-outputs", action="store_true", help="op (out=) and variants write rotating outputs")
    args = parser.parse_args()
    import img2gray

    lib, names = load_variants(args.lib)
    report = []
    for case, shape, dtype in (c for c in CASES if args.cases.search(c[0])):
        probe = input_sets(shape, dtype, "nchw", 1, "cuda")[0]
        moved = probe.numel() * probe.element_size() * 4 // 3
        sets = max(2, -(-ROTATION_BYTES // moved))
        inputs = [probe, *input_sets(shape, dtype, "nchw", sets - 1, "cuda")]
        outputs = (
            [torch.empty((shape[0], 1, shape[2], shape[3]), dtype=dtype, device="cuda") for _ in inputs]
            if args.fresh_outputs
            else None
        )
        found = candidates(lib, names, img2gray, shape, dtype, inputs, outputs, args.only)
        if args.ncu:
            for fn in found.values():  # compiles torch.compile's kernel outside the profiled ranges
                fn(0)
            for _ in range(3):
                for name, fn in found.items():
                    torch.cuda.nvtx.range_push(f"{case} | {name}")
                    fn(1)
                    torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
            continue
        product = img2gray.img2gray(probe, dim=-3)
        compiled_result = found["torch.compile"](0).unsqueeze(-3).clone()
        checks = {
            name: agreement(fn(0), product, compiled_result)
            for name, fn in found.items()
            if not name.startswith(("img2gray", "torch.compile"))
        }
        copy_src = [torch.empty(moved // 2, dtype=torch.uint8, device="cuda") for _ in inputs]
        copy_dst = [torch.empty_like(t) for t in copy_src]
        copy = {"copy": lambda i, src=copy_src, dst=copy_dst: dst[i].copy_(src[i])}  # bound: `del` below frees them
        samples, round_means = time_rounds({**found, **copy}, sets, args.rounds, BLOCK_CALLS)
        base = round_means["torch.compile"]
        rows = []
        for name, times in samples.items():
            diff, error, faster = paired(round_means[name], base)
            rows.append(
                {
                    "candidate": name,
                    "median_us": statistics.median(times) * 1e3,
                    "mean_us": trimmed_mean(times) * 1e3,
                    "vs_compile_ns": diff * 1e6,
                    "vs_compile_se_ns": error * 1e6,
                    "rounds_faster": faster,
                    "round_means_us": [m * 1e3 for m in round_means[name]],
                    **checks.get(name, {}),
                }
            )
        print(
            f"{case}: {moved / 1e6:.1f} MB, {len(samples['copy'])} calls per candidate; "
            f"paired against torch.compile over {args.rounds} rounds"
        )
        for row in rows:
            flag = (
                ""
                if row.get("equals product", True)
                else f"  (differs: max {row['max diff vs torch.compile']:.3g} vs compile)"
            )
            print(
                f"    {row['candidate']:<34} median {row['median_us']:7.2f} us  mean {row['mean_us']:7.3f} us  "
                f"{row['vs_compile_ns']:+7.1f} ± {row['vs_compile_se_ns']:4.1f} ns, faster in "
                f"{row['rounds_faster']}/{args.rounds}{flag}"
            )
        report.append({"case": case, "moved_bytes": moved, "rows": rows})
        del found, copy, inputs, outputs, copy_src, copy_dst
        torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(
            json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "cases": report}, indent=1)
            + "\n"
        )


if __name__ == "__main__":
    main()
