"""The repository's scripts, run from the repository root as modules: `python -m tools.build_op ...`.

A regular package (not a namespace one), so that no installed top-level `tools` can shadow it; `-m` puts the
root on sys.path, which is how the scripts import `kernelpin` and `testkit` without path edits.
"""
