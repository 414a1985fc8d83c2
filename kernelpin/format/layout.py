"""Names of the files and directories kernelpin reads and writes, in one place (no logic, no imports)."""

LOCKFILE = "kernelpin.lock"  # next to pyproject.toml
BUILD_DIR = "build"  # a kernel repository's variants: build/<variant>/
METADATA = "metadata.json"  # in every variant: name, version, backend, file digests
SIGNATURE = "metadata.json.sigstore"  # beside it when signed: a Sigstore bundle over its bytes (cosign sign-blob)
PROJECT_STATE_DIR = ".kernelpin"  # next to pyproject.toml: kernelpin's own files (the edit lock), git-ignored
LOCKS_DIR = ".kernelpin-locks"  # in the Hub cache (or a --target directory): one file lock per repository
# Per-capability builds of a variant, beside build/ so that `kernels` (which downloads build/*) never fetches them:
# capabilities/<variant>/sm_<XY>/ holds the variant's files with device code for that capability alone.
CAPABILITY_DIR = "capabilities"
CAPABILITY_BUILDS = "capability-builds"  # their listing's key in metadata.json (kernelpin.format.capabilities)
STATUS_FILE = "kernel-status.toml"  # at a repository's root: the kernel moved (kernelpin.format.kernel_status)
