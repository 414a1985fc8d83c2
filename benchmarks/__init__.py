"""Benchmarks, run from the repository root (`python -m benchmarks.kernelpin_bench`, `python benchmarks/bench_op.py`)."""
