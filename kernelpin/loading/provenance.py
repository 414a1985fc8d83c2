"""A build made from uncommitted changes: its metadata.json's `provenance` says `"dirty": true` for the kernel's
sources or for kernel-builder (how kernel-builder records it, and `kernels` reads it). Such a build still loads, as
in `kernels`, with a warning: its recorded commit does not identify the sources it was built from."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

# metadata.json's provenance keys, as the warning names them
PARTS = {"kernel": "the kernel's sources", "kernel-builder": "kernel-builder"}


class DirtyBuildWarning(UserWarning):
    """A kernel build was made from a git tree with uncommitted changes."""


def dirty_parts(document: Mapping[str, Any]) -> list[str]:
    """Which of the kernel's sources and kernel-builder were dirty, as the build's provenance records them
    (`"dirty": true` exactly; anything else is not a claim of dirtiness)."""
    provenance = document.get("provenance")
    if not isinstance(provenance, Mapping):
        return []
    return [
        name
        for key, name in PARTS.items()
        if isinstance(provenance.get(key), Mapping) and provenance[key].get("dirty") is True
    ]


def warn_if_dirty(document: Mapping[str, Any], what: str) -> None:
    """Warn (DirtyBuildWarning) when the build `what` was made from uncommitted changes."""
    parts = dirty_parts(document)
    if parts:
        warnings.warn(
            f"{what} was built from uncommitted changes ({' and '.join(parts)} had changes no commit "
            "holds): its recorded git commit does not identify what it was built from, so it may not be "
            "reproducible; ask its publisher for a build from a clean tree",
            DirtyBuildWarning,
            stacklevel=4,
        )
