"""kernelpin's module boundaries (docs/DESIGN.md, "kernelpin's rooms"): the run-time path and the publisher load
only what they use, the consumer core never imports the publisher, the format layer imports only itself, the CLI
parses and renders (no locking of its own), and no module reaches into another's private names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.kernelpin.helpers import fresh_interpreter

PACKAGE = Path(__file__).resolve().parents[2] / "kernelpin"
# The format the builder (tools/, kernelpin.publisher) and the consumer share: file names, variant names,
# metadata.json, versions and ranges, requirements. Pure: it imports nothing of kernelpin but itself and the checks.
FORMAT = {"layout", "format.variant", "format.metadata", "format.ranges", "format.spec"}
CHECKS = {"errors", "files.integrity"}
# The entry points that may name the publisher: the CLI (`kernelpin publish`) and the package's lazy exports.
ENTRY_POINTS = {"cli", "__init__", "__main__"}


def _runtime_imports(path: Path) -> set[str]:
    """The kernelpin modules `path` imports when it runs (`if TYPE_CHECKING:` blocks left out), dotted names below
    kernelpin (`format.variant`); `from kernelpin.room import module` names the module."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and getattr(block.test, "id", None) == "TYPE_CHECKING" for node in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernelpin"):
            module = node.module.removeprefix("kernelpin").lstrip(".")
            found |= {f"{module}.{alias.name}".lstrip(".") if _is_module(f"{module}.{alias.name}".lstrip(".")) else module
                      for alias in node.names} - {""}
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("kernelpin.") for a in node.names if a.name.startswith("kernelpin.")}
    return found


def _is_module(dotted: str) -> bool:
    path = PACKAGE.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _modules(folder: Path) -> dict[str, Path]:
    """Every module below `folder`, by its dotted name there (`format.variant`, `__init__`)."""
    return {".".join(path.relative_to(folder).with_suffix("").parts): path for path in sorted(folder.rglob("*.py"))}


def test_the_consumer_core_never_imports_the_publisher() -> None:
    reaching = {name: sorted(m for m in _runtime_imports(path) if m.split(".")[0] == "publisher")
                for name, path in _modules(PACKAGE).items() if name not in ENTRY_POINTS
                and not name.startswith("publisher.")}
    assert {name: found for name, found in reaching.items() if found} == {}


def test_the_format_layer_imports_only_itself_and_the_checks() -> None:
    outside = {name: sorted(_runtime_imports(PACKAGE.joinpath(*name.split(".")).with_suffix(".py")) - FORMAT - CHECKS)
               for name in FORMAT}
    assert {name: found for name, found in outside.items() if found} == {}


def test_the_publisher_imports_no_consumer_command() -> None:
    consumer = {"commands.lock", "commands.sync", "store.install", "store.content", "loading.runtime", "loading.loader",
                "commands.verify", "commands.outdated", "commands.cache", "resolve", "project", "cli"}
    reaching = {name: sorted(_runtime_imports(path) & consumer) for name, path in _modules(PACKAGE / "publisher").items()}
    assert {name: found for name, found in reaching.items() if found} == {}


def test_the_cli_holds_no_locking_logic() -> None:
    """cli.py parses and renders: resolving, writing locks, editing pyproject.toml and the edit lock belong to
    kernelpin.commands.lock (each command is a library function there or in its own module)."""
    cli = PACKAGE / "cli.py"
    assert _runtime_imports(cli) & {"resolve", "format.kernels_lock", "files.atomic", "store.content", "files.integrity"} == set()
    tree = ast.parse(cli.read_text())
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    locking_names = {"resolve", "write_atomic", "set_requirement", "remove_requirement", "read_requirements",
                     "edit_lock", "entry_to_add", "tag_versions", "unlisted_entries", "verify_file", "scan_cache_dir"}
    assert (names | attributes - {"resolve"}) & locking_names == set()  # Path.resolve is no resolver
    assert not any(isinstance(node, ast.Attribute) and node.attr in {"write", "read", "staleness", "changes"}
                   and getattr(node.value, "id", None) == "lockfile" for node in ast.walk(tree))


def _imported_names(path: Path) -> set[str]:
    """The names `path` imports from kernelpin modules (`from kernelpin.x import name`), anywhere in the file."""
    return {alias.name for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernelpin") for alias in node.names}


def test_the_load_tail_is_written_once() -> None:
    """`load` (a lock), `get_kernel` (no lock) and LOCAL_KERNELS (a build on disk) each choose a build and end in
    kernelpin.loading.importing.import_pinned, the one place that takes the kernel module's lock, verifies, checks
    the dependencies and calls the verified importer."""
    modules = _modules(PACKAGE)
    importer = sorted(name for name, path in modules.items() if "import_verified" in _imported_names(path))
    tail = sorted(name for name, path in modules.items() if "import_pinned" in _imported_names(path))
    assert importer == ["loading.importing"]
    assert tail == ["commands.get_kernel", "loading.local_override", "loading.runtime"]


def test_every_command_is_a_library_function_named_like_it() -> None:
    import kernelpin
    from kernelpin.cli import COMMANDS

    library = {name.replace("-", "_") for name in COMMANDS if name != "help"}  # describe-api: describe_api
    assert library <= set(kernelpin.__all__)
    assert all(callable(getattr(kernelpin, name)) and getattr(kernelpin, name).__doc__ for name in library)




@pytest.mark.parametrize(("statement", "absent"), [
    # load() reads a lock; it neither resolves nor edits pyproject.toml.
    ("import kernelpin.loading.runtime", {"kernelpin.resolve", "kernelpin.project", "kernelpin.cli", "kernelpin.store.install",
                                  "kernelpin.publisher"}),
    # Installing and publishing need the layout's names, not the resolver.
    ("import kernelpin.store.install", {"kernelpin.resolve", "kernelpin.project"}),
    ("import kernelpin.publisher.release", {"kernelpin.resolve", "kernelpin.project", "kernelpin.store.install"}),
])
def test_modules_load_only_what_they_use(statement: str, absent: set[str]) -> None:
    loaded = {name for name in fresh_interpreter(statement)[1] if name.startswith("kernelpin")}
    assert "kernelpin.layout" in loaded
    assert loaded & absent == set()


def test_no_module_imports_another_modules_private_names() -> None:
    reaching = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernelpin"):
                reaching += [f"{path.name}: {node.module}.{alias.name}" for alias in node.names
                             if alias.name.startswith("_")]
    assert reaching == []
