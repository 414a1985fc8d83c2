"""Standalone kernel experiments (see README.md); `python -m benchmarks.experiments.frame_variants`."""
