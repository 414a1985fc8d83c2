"""Build, packaging and release tools of img2gray; run them from the repository root as `python -m tools.<name>`."""
