"""tests/kernelpin mirrors kernelpin's rooms (issue 52): a folder per room, and each module's own test file where the
room's folder puts it (kernelpin/<room>/<name>.py -> tests/kernelpin/<room>/test_<name>.py; a top-level module ->
tests/kernelpin/toplevel/test_<name>.py). A module without one is named below with the reason; a new module needs
either, and a listed module that gains its file (or goes away) must leave the list."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.kernelpin.helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "kernelpin"
TESTS = REPO_ROOT / "tests" / "kernelpin"
# Test folders that are no room of kernelpin: what each holds.
NOT_ROOMS = {
    "toplevel": "the top-level modules (kernelpin/*.py)",
    "package": "kernelpin as a whole: its API, its module boundaries, the files its wheel ships, this layout",
    "journeys": "cross-room runs: lock -> sync -> load, trust through every path, the docs' examples",
}
# Module -> why it has no test file of its own. "Tested by" names the files that test it under other names.
WITHOUT_OWN_TEST = {
    "kernelpin.__main__": "two lines calling cli.main: tests/kernelpin/cli/test_cli.py runs `python -m kernelpin`",
    "kernelpin.cli.context": "what every command runs with: tested through them by "
    "tests/kernelpin/cli/test_cli_conventions.py (tables, colour, --json errors) and tests/kernelpin/cli/test_cli.py",
    "kernelpin.cli.relocking": "what lock, add, remove and sync share: tested through them by "
    "tests/kernelpin/commands/test_lock.py and tests/kernelpin/journeys/test_lock_signatures.py (--accept-signer)",
    "kernelpin.cli.download": "kernels' `download DIR`: tested by tests/kernelpin/cli/test_kernels_shapes.py",
    "kernelpin.cli.lock": "the command's rendering: tested with the command by tests/kernelpin/commands/test_lock.py",
    "kernelpin.cli.add": "tested with the command by tests/kernelpin/commands/test_lock.py and "
    "tests/kernelpin/cli/test_cli.py (--json)",
    "kernelpin.cli.remove": "tested with the command by tests/kernelpin/commands/test_lock.py and "
    "tests/kernelpin/cli/test_cli.py (--json)",
    "kernelpin.cli.sync": "tested with the command by tests/kernelpin/commands/test_sync.py",
    "kernelpin.cli.outdated": "tested with the command by tests/kernelpin/commands/test_lock.py",
    "kernelpin.cli.versions": "tested with the command by tests/kernelpin/commands/test_lock.py and "
    "tests/kernelpin/commands/test_inspection.py (--variants)",
    "kernelpin.cli.variants": "tested with the command by tests/kernelpin/commands/test_variants_command.py",
    "kernelpin.cli.info": "tested with the command by tests/kernelpin/commands/test_inspection.py and "
    "tests/kernelpin/commands/test_info_dep_tree.py",
    "kernelpin.cli.describe_api": "tested with the command by tests/kernelpin/commands/test_describe_api.py",
    "kernelpin.cli.verify": "tested with the command by tests/kernelpin/commands/test_sync.py and "
    "tests/kernelpin/journeys/test_lock_signatures.py",
    "kernelpin.store.lockfiles": "the file side of format.lockfile and format.kernels_lock (read, atomic write, the "
    "kernels.lock kept in step): tested with them by tests/kernelpin/commands/test_lock.py and "
    "tests/kernelpin/journeys/test_end_to_end.py",
    "kernelpin.cli.verify_conda": "tested with the command by tests/kernelpin/journeys/test_verify_conda.py",
    "kernelpin.commands.verify_conda": "tested end to end (a conda prefix, a channel, the Hub) by "
    "tests/kernelpin/journeys/test_verify_conda.py",
    "kernelpin.trust.conda_signature": "tested through verify-conda by tests/kernelpin/journeys/test_verify_conda.py",
    "kernelpin.cli.publish": "tested with the command by tests/release/test_publish.py and tests/kernelpin/cli/test_cli.py",
    "kernelpin.cli.cache": "tested with the command by tests/kernelpin/files/test_cache_removal.py and "
    "tests/kernelpin/cli/test_cli_conventions.py",
    "kernelpin.cli.help": "tested by tests/kernelpin/cli/test_cli_conventions.py (`kernelpin help COMMAND`)",
    "kernelpin.builds": "which builds fit a machine, through the commands that list them: tested by "
    "tests/kernelpin/commands/test_variants_command.py and tests/kernelpin/commands/test_inspection.py",
    "kernelpin.errors": "exception classes only, no logic; every test that expects a refusal names them",
    "kernelpin.project": "tested by tests/kernelpin/toplevel/test_project_discovery.py (finding it) and "
    "tests/kernelpin/toplevel/test_project_files.py (editing it)",
    "kernelpin.resolve": "requirements to pinned files, through `lock`: tested by tests/kernelpin/commands/test_lock.py, "
    "tests/kernelpin/toplevel/test_lock_parallel_fetch.py, tests/kernelpin/toplevel/test_lock_reuse.py and "
    "tests/kernelpin/toplevel/test_moved_release.py",
    "kernelpin.terminal": "the escaping of server text: tested by tests/kernelpin/toplevel/test_server_text.py",
    "kernelpin.commands.cache": "tested by tests/kernelpin/files/test_cache_removal.py (prune and clean inside the "
    "cache only) and tests/kernelpin/cli/test_cli_conventions.py",
    "kernelpin.commands.info": "info, variants and describe-api: tested by tests/kernelpin/commands/test_inspection.py, "
    "tests/kernelpin/commands/test_info_dep_tree.py, tests/kernelpin/commands/test_variants_command.py and "
    "tests/kernelpin/commands/test_describe_api.py",
    "kernelpin.commands.outdated": "outdated and versions: tested by tests/kernelpin/commands/test_lock.py",
    "kernelpin.commands.verify": "tested by tests/kernelpin/commands/test_sync.py and "
    "tests/kernelpin/journeys/test_lock_signatures.py (verify --signatures)",
    "kernelpin.files.atomic": "tested by tests/kernelpin/files/test_integrity.py",
    "kernelpin.files.confined": "tested by tests/kernelpin/files/test_confined_writes.py and "
    "tests/kernelpin/files/test_cache_removal.py",
    "kernelpin.files.private_state": "tested by tests/kernelpin/trust/test_signature_checker.py and "
    "tests/kernelpin/store/test_receipts.py (the receipts it keeps)",
    "kernelpin.format.kernel_status": "tested by tests/kernelpin/front/test_kernel_status.py, where get_kernel follows it",
    "kernelpin.format.kernels_lock": "tested by tests/kernelpin/format/test_kernels_compat.py, judged by `kernels` itself",
    "kernelpin.format.layout": "file names and constants only, no logic",
    "kernelpin.format.lockfile": "tested by tests/kernelpin/format/test_lock_render.py and "
    "tests/kernelpin/files/test_integrity.py (the reader's refusals)",
    "kernelpin.format.python_api": "the reading behind describe-api: tested by "
    "tests/kernelpin/commands/test_describe_api.py",
    "kernelpin.format.signer": "tested by tests/kernelpin/trust/test_signature.py and "
    "tests/kernelpin/trust/test_signature_checker.py",
    "kernelpin.format.spec": "tested by tests/kernelpin/files/test_integrity.py and tests/kernelpin/commands/test_lock.py",
    "kernelpin.hub.client": "tested by tests/kernelpin/hub/test_hubclient.py",
    "kernelpin.hub.limits": "tested at each limit's edge by tests/kernelpin/hub/test_hubclient.py and "
    "tests/kernelpin/hub/test_listing.py",
    "kernelpin.hub.source": "tested by tests/kernelpin/hub/test_hub_answers.py, tests/kernelpin/hub/test_repo_types.py "
    "and tests/kernelpin/hub/test_hub_settings.py",
    "kernelpin.hub.throttle": "tested by tests/kernelpin/hub/test_throttling.py",
    "kernelpin.loading.archive": "tested by tests/kernelpin/loading/test_zip_builds.py",
    "kernelpin.loading.importing": "the one load tail every loader ends in: tested through them by "
    "tests/kernelpin/loading/test_loader.py and tests/kernelpin/front/test_get_kernel.py",
    "kernelpin.loading.front": "the one load front every load goes through (resolvers, then import_pinned): tested "
    "through every loader (tests/kernelpin/front/, tests/kernelpin/loading/test_loader.py, "
    "tests/kernelpin/loading/test_local_kernels.py) and measured by tests/kernelpin/journeys/test_load_front_places.py",
    "kernelpin.front.hub": "the Hub as a resolver: tested by tests/kernelpin/front/test_get_kernel.py, "
    "tests/kernelpin/front/test_kernel_status.py (moves) and tests/kernelpin/front/test_get_kernel_signatures.py",
    "kernelpin.front.lock": "load() from a kernelpin.lock: tested by tests/kernelpin/loading/test_loader.py and "
    "tests/kernelpin/loading/test_check_arch_locked.py",
    "kernelpin.lockless": "resolving without a lock: tested through get_kernel by "
    "tests/kernelpin/front/test_get_kernel.py and tests/kernelpin/front/test_get_kernel_signatures.py",
    "kernelpin.loading.local_override": "tested by tests/kernelpin/loading/test_local_kernels.py",
    "kernelpin.loading.provenance": "tested by tests/kernelpin/loading/test_dirty_provenance.py",
    "kernelpin.loading.runtime": "finding and reading the lock, the environment: tested by "
    "tests/kernelpin/loading/test_loader.py and tests/kernelpin/toplevel/test_project_discovery.py",
    "kernelpin.publisher.abi_gate": "tested with real built libraries by tests/release/test_abi_gate.py",
    "kernelpin.publisher.release": "tested by tests/kernelpin/publisher/test_signed_release.py and tests/release/",
    "kernelpin.store.content": "tested by tests/kernelpin/store/test_store_direct.py and tests/kernelpin/store/test_store.py",
    "kernelpin.store.install": "tested by tests/kernelpin/commands/test_sync.py and "
    "tests/kernelpin/commands/test_sync_faults.py",
    "kernelpin.store.resolutions": "tested by tests/kernelpin/front/test_get_kernel.py (version=N offline)",
    "kernelpin.trust.checker": "tested by tests/kernelpin/trust/test_signature_checker.py",
    "kernelpin.trust.gate": "tested by tests/kernelpin/trust/test_trust_gate.py",
    "kernelpin.trust.policy": "tested by tests/kernelpin/trust/test_trust_policy.py",
    "kernelpin.trust.receipts": "tested by tests/kernelpin/trust/test_signature_receipts.py",
    "kernelpin.trust.worker": "tested by tests/kernelpin/trust/test_signature_worker.py",
}


def _has_code(path: Path) -> bool:
    """False for a folder's marker: an __init__.py holding a docstring at most."""
    body = ast.parse(path.read_text()).body
    return any(not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) for node in body)


def _rooms() -> set[str]:
    return {path.parent.name for path in PACKAGE.glob("*/__init__.py")}


def own_test_file(module: Path) -> Path:
    """Where the test file of kernelpin's module MODULE (a path under kernelpin/) belongs."""
    parts = module.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts:
        return TESTS / "package" / "test_api.py"  # kernelpin/__init__.py is the API
    room = parts[0] if parts[0] in _rooms() else "toplevel"
    return TESTS / room / f"test_{parts[-1]}.py"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if _has_code(path):
            dotted = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
            modules[dotted.removesuffix(".__init__")] = path
    return modules


def test_the_test_folders_are_kernelpins_rooms() -> None:
    folders = {path.parent.name for path in TESTS.glob("*/__init__.py")}
    assert folders - NOT_ROOMS.keys() == _rooms(), "one test folder per room of kernelpin/, and only those"
    assert list(TESTS.glob("test_*.py")) == [], "tests/kernelpin/'s own files are shared fixtures; tests go in a room"


def test_every_module_has_its_own_test_file_or_a_reason() -> None:
    modules = _modules()
    without = {name for name, path in modules.items() if not own_test_file(path).is_file()}
    assert sorted(without - WITHOUT_OWN_TEST.keys()) == [], "a new module: give it its test file, or a reason here"
    assert sorted(WITHOUT_OWN_TEST.keys() - modules.keys()) == [], "gone from kernelpin/: take it off the list"
    assert sorted(WITHOUT_OWN_TEST.keys() - without) == [], "it has its own test file now: take it off the list"


def test_the_reasons_name_test_files_that_exist() -> None:
    named = {path for reason in WITHOUT_OWN_TEST.values() for path in re.findall(r"tests/[\w/]+(?:\.py|/)", reason)}
    assert named and sorted(path for path in named if not (REPO_ROOT / path).exists()) == []
