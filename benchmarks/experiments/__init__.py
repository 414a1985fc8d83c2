"""Standalone kernel experiments (see README.md); `python -m tools.maintainer.experiments.frame_variants`."""
