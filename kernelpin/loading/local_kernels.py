"""LOCAL_KERNELS, the variable: which repositories it names, and the directory of each (as `kernels` reads it).
What a load does with a local build is kernelpin.loading.local_override's; this is apart, and light, so that a load
without a lock can tell whether it will ask the Hub before it imports the rest of its way (kernelpin.front.get_kernel
asks the Hub ahead)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kernelpin.errors import KernelpinError
from kernelpin.format.spec import check_repo_id

__untrusted_input__ = ("parse",)  # parsers of input kernelpin does not control (kernelpin.errors)

VARIABLE = "LOCAL_KERNELS"


def parse(text: str) -> dict[str, Path]:
    """LOCAL_KERNELS as `kernels` reads it: `repo=path` entries separated by ':' (the path may hold '=')."""
    overrides = {}
    for entry in text.split(":"):
        repo_id, separator, path = entry.partition("=")
        if not separator or not path:
            raise KernelpinError(
                f"{VARIABLE}: entry {entry[:200]!r} is not REPO=PATH; write it as "
                "org/a=/path/a:org/b=/path/b (each path holding build/<variant>/)"
            )
        try:
            overrides[check_repo_id(repo_id.strip())] = Path(path).expanduser()
        except KernelpinError as error:
            raise KernelpinError(f"{VARIABLE}: {error}") from None
        except RuntimeError:  # pathlib: `~name` of no such user, or no home directory to put for `~`
            raise KernelpinError(
                f"{VARIABLE}: entry {entry[:200]!r}: {path.split('/')[0][:100]!r} names no home directory here; "
                "write the path out in full"
            ) from None
    return overrides


def override_for(repo_id: str, environ: Mapping[str, str] = os.environ) -> Path | None:
    text = environ.get(VARIABLE)
    return parse(text).get(repo_id) if text else None
