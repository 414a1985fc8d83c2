"""kernelpin's file formats and names, pure: lockfile, variant names, ranges, metadata.json, spec, kernels.lock."""
