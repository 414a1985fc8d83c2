"""`kernels.lock`, the lockfile of HF's `kernels` package, kept in step with kernelpin.lock.

Its format (kernels 0.17.2, `kernels._rust.KernelLocks`): a JSON list of
`{"dependency": {"repo-id": ..., "version": N} | {"repo-id": ..., "revision": ...}, "lock": {"commit": ...}}`,
sorted by dependency, indented by 2, without a trailing newline. `kernels.get_locked_kernel`, `load_kernel` and
`LockedLayerRepository` look a kernel up by repo id and load the commit. Where a project has a `kernels.lock`,
`kernelpin lock` rewrites it with the commits kernelpin resolved (kernelpin.store.lockfiles writes it), so both
tools load the same builds:

- `= N` (the branch vN) is written as `"version": N`, as `kernels lock` writes it;
- a tag range or a revision pin, which `kernels lock` cannot express, as `"revision": <the locked tag, or the
  revision as written>`: kernels loads that commit by repo id all the same;
- model repositories are left out: kernels 0.14 and later read kernel repositories only.
"""

from __future__ import annotations

import json
from typing import Any

from kernelpin.format.lockfile import Lock, LockedKernel
from kernelpin.format.nesting import within_nesting
from kernelpin.format.spec import parse_requirement

__untrusted_input__ = ("out_of_step",)  # parsers of input kernelpin does not control (kernelpin.errors)

KERNELS_LOCK = "kernels.lock"


def dependency(kernel: LockedKernel) -> dict[str, Any] | None:
    """The `dependency` key of a kernel in kernels.lock, or None when kernels cannot load it (a model repo)."""
    if kernel.repo_type != "kernel":
        return None
    requirement = parse_requirement(kernel.repo_id, kernel.requirement, where="requirement")
    if requirement.major is not None:
        return {"repo-id": kernel.repo_id, "version": requirement.major}
    if requirement.revision is not None:
        return {"repo-id": kernel.repo_id, "revision": requirement.revision}
    tag = kernel.ref.removeprefix("refs/tags/") if kernel.ref and kernel.ref.startswith("refs/tags/") else None
    return {"repo-id": kernel.repo_id, "revision": tag or kernel.commit}


def entries(lock: Lock) -> list[dict[str, Any]]:
    found = []
    for kernel in lock.kernels:
        dep = dependency(kernel)
        if dep is not None:
            found.append({"dependency": dep, "lock": {"commit": kernel.commit}})
    return sorted(
        found,
        key=lambda entry: (
            entry["dependency"]["repo-id"],
            str(entry["dependency"].get("version", "")),
            entry["dependency"].get("revision", ""),
        ),
    )


def render(lock: Lock) -> str:
    """kernels.lock's text for `lock`, byte for byte as `kernels lock` writes the same entries."""
    return json.dumps(entries(lock), indent=2)


def left_out(lock: Lock) -> list[str]:
    """The locked kernels kernels.lock cannot name (model repositories)."""
    return [kernel.repo_id for kernel in lock.kernels if dependency(kernel) is None]


def out_of_step(content: bytes, lock: Lock) -> str | None:
    """Why a kernels.lock of `content` does not name kernelpin's commits, or None when it does."""
    try:
        present = within_nesting(json.loads(content.decode("utf-8")))
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested deeper than json parses
        return f"{KERNELS_LOCK} is not valid JSON"
    if present == entries(lock):
        return None
    commits = {}
    if isinstance(present, list):
        for entry in present:
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("dependency"), dict)
                and isinstance(entry.get("lock"), dict)
                and isinstance(entry["dependency"].get("repo-id"), str)
            ):
                commits[entry["dependency"]["repo-id"]] = entry["lock"].get("commit")
    differ = sorted(commits.keys() ^ {e["dependency"]["repo-id"] for e in entries(lock)})
    differ += sorted(
        e["dependency"]["repo-id"]
        for e in entries(lock)
        if commits.get(e["dependency"]["repo-id"], e["lock"]["commit"]) != e["lock"]["commit"]
    )
    named = f" ({', '.join(differ)})" if differ else ""
    return f"{KERNELS_LOCK} does not name the commits of kernelpin.lock{named}"


def kept_in_step(lock: Lock) -> str:
    """The change line for a kernels.lock rewritten with the commits of `lock`."""
    skipped = left_out(lock)
    more = f"; left out (model repositories, which kernels does not read): {', '.join(skipped)}" if skipped else ""
    return f"~ {KERNELS_LOCK}: kept in step with kernelpin.lock ({len(entries(lock))} kernels){more}"
