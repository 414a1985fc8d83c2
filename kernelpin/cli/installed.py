"""How `sync` and `download` show what they installed (kernelpin.commands.sync's Synced)."""

from __future__ import annotations

from typing import Any

from kernelpin.cli.context import Context, emit_json
from kernelpin.commands import sync as syncing
from kernelpin.store.install import SyncedVariant


def render_synced(ctx: Context, synced: syncing.Synced, env: Any) -> None:
    results = synced.variants
    for result in results:
        for path in result.downloaded:
            ctx.note(f"{result.repo_id}: downloaded and verified {path}")
    if ctx.args.json:
        emit_json({"environment": None if env is None else env.describe(), "synced": [synced_json(r) for r in results]})
        return
    if env is not None:
        ctx.out.print(f"Environment: {env.describe()}")
    if not synced.lock.lock.kernels:
        ctx.out.print(
            f"nothing to sync: {ctx.project.lockfile.name} locks no kernels; add one with `kernelpin add ORG/NAME`"
        )
    for result in results:
        parts = [f"{len(result.downloaded)} downloaded", f"{len(result.reused)} already present"]
        if result.repaired:
            parts.append(f"{len(result.repaired)} replaced (modified in the cache)")
        ctx.out.print(f"{result.label}: {result.variant}: {', '.join(parts)}, all verified")
        ctx.out.print(f"  {result.directory}", style="dim")
        for path in result.repaired:
            ctx.err.print(f"warning: {result.repo_id}: {path} did not match the lock; replaced", style="yellow")
        for path in result.removed:
            ctx.err.print(f"warning: {result.repo_id}: {path} is not in the lock; removed", style="yellow")


def synced_json(result: SyncedVariant) -> dict[str, Any]:
    return {
        "repo": result.repo_id,
        "variant": result.variant,
        "directory": str(result.directory),
        "downloaded": result.downloaded,
        "reused": result.reused,
        "repaired": result.repaired,
        "removed": result.removed,
    }
