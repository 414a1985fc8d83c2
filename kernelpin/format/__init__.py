"""kernelpin's file formats and names, pure (text in, values out, and back; no files, processes or network): the
lockfile, variant names, ranges, metadata.json, spec, kernels.lock, signers, kernel status, a build's Python API.
kernelpin.store.lockfiles reads and writes the lock files; tests/kernelpin/package/test_structure.py checks each
module."""
