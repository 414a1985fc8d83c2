"""Build, packaging and release tools of img2gray, grouped by job (tools/README.md draws the pipeline); run them
from the repository root as modules, e.g. `python -m tools.builder.op`."""
