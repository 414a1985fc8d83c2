"""kernelpin's module boundaries (docs/DESIGN.md, "kernelpin's rooms"): the rooms import downwards only and no
module imports itself back (counting imports inside functions and under TYPE_CHECKING), a command imports no other
command (nor a command of the command line another, or its dispatch any), the run-time path and the publisher load
only what they use, the consumer core never imports the publisher, the format layer imports only itself, the CLI
parses and renders (no locking of its own), no module
reaches into another's private names, and the code beside the package (tools/, testkit/, benchmarks/) uses only
its API, format, file checks and publisher."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.kernelpin.helpers import fresh_interpreter

PACKAGE = Path(__file__).resolve().parents[3] / "kernelpin"
# The format the builder (tools/, kernelpin.publisher) and the consumer share, every module of kernelpin/format/
# (FORMAT, from the folder: a new module is held to it too): file names, variant names, metadata.json, versions and
# ranges, requirements, the lock files' text. Pure, as its docstring says: it imports nothing of kernelpin but
# itself and the checks, nothing of the standard library that reaches files, processes or the network, and never
# calls open(); kernelpin.store.lockfiles reads and writes the lock files.
FORMAT = {
    ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    for path in (PACKAGE / "format").glob("*.py")
    if path.name != "__init__.py"
}
CHECKS = {"errors", "files.integrity", "records"}  # the checks, and the classes kernelpin's records are
# urllib.parse splits strings; urllib.request fetches.
IO_MODULES = {
    "os",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "subprocess",
    "socket",
    "urllib.request",
    "http",
    "glob",
    "fcntl",
}
# The entry points that may name the publisher: `kernelpin publish` and the package's lazy exports.
ENTRY_POINTS = {"cli.publish", "__init__", "__main__"}
# What the command line's commands (kernelpin/cli/<command>.py) share besides the library.
CLI_SHARED = {"cli.context", "cli.relocking"}
# The rooms from the bottom up: a module imports from its own room and the rooms below it only.
LAYERS = [
    {"errors", "terminal", "records"},
    {"files"},
    {"format"},
    {"hub"},
    {"trust"},
    {"store"},
    {"environment", "project", "resolve"},
    {"builds", "relock"},
    {"lockless"},
    {"loading"},
    {"front"},
    {"commands", "publisher"},
    {"cli"},
    {"__init__", "__main__"},
]
# What tools/, testkit/ and benchmarks/ may import besides the API (`kernelpin.NAME`, `import kernelpin`).
SHARED_ROOMS = {"format", "files", "publisher"}
# Benchmarks that time one step inside kernelpin, which no API function exposes alone: the module they reach into,
# and why.
TIMED_INSIDE = {
    "benchmarks/kernelpin_bench.py": {
        "cli": "times the command line in-process (kernelpin.cli.main), without an interpreter's start-up",
        "project": "reads the requirements once, outside the timing (read_requirements)",
        "resolve": "times resolving alone, with 1 and with 8 workers (resolve(workers=)), which `lock` fixes",
        "store": "waits out the receipts' settle time (store.receipts.SETTLE_NS) before timing a warm load",
        "loading": "names the modules `load` imports (loading.runtime.module_name) to time a plain import of them",
    },
    "benchmarks/cold_paths.py": {
        "cli": "builds the start-up floor, an argparse script with the same options and commands (kernelpin.cli)",
    },
    "benchmarks/signature_bench.py": {
        "cli": "times the command line in-process (kernelpin.cli.main), without an interpreter's start-up",
        "project": "reads the policy and the requirements once, outside the timing",
        "resolve": "times resolving alone, with a checker without receipts or worker",
        "trust": "makes that checker (trust.checker.ReleaseChecker)",
    },
}


def _runtime_imports(path: Path, typing_too: bool = False) -> set[str]:
    """The kernelpin modules `path` imports when it runs (`if TYPE_CHECKING:` blocks left out unless `typing_too`),
    dotted names below kernelpin (`format.variant`); `from kernelpin.room import module` names the module."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = (
        set()
        if typing_too
        else {
            id(node)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and getattr(block.test, "id", None) == "TYPE_CHECKING"
            for node in ast.walk(block)
        }
    )
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernelpin"):
            module = node.module.removeprefix("kernelpin").lstrip(".")
            found |= {
                f"{module}.{alias.name}".lstrip(".") if _is_module(f"{module}.{alias.name}".lstrip(".")) else module
                for alias in node.names
            } - {""}
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("kernelpin.") for a in node.names if a.name.startswith("kernelpin.")}
    return found


def _is_module(dotted: str) -> bool:
    path = PACKAGE.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _arrows() -> dict[str, set[str]]:
    """Every kernelpin module -> the kernelpin modules it imports, anywhere in it: at the top, inside functions
    (deferred) and under TYPE_CHECKING. A package is named by its `__init__` (`format.__init__`)."""
    modules = _modules(PACKAGE)

    def named(target: str) -> str:
        return target if target in modules else f"{target}.__init__"

    return {
        name: {named(target) for target in _runtime_imports(path, typing_too=True)} - {name}
        for name, path in modules.items()
    }


def _room(module: str) -> str:
    return module.split(".")[0]


def _reachable(arrows: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(arrows[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += arrows.get(name, ())
    return seen


def _modules(folder: Path) -> dict[str, Path]:
    """Every module below `folder`, by its dotted name there (`format.variant`, `__init__`)."""
    return {".".join(path.relative_to(folder).with_suffix("").parts): path for path in sorted(folder.rglob("*.py"))}


def test_the_consumer_core_never_imports_the_publisher() -> None:
    reaching = {
        name: sorted(m for m in _runtime_imports(path) if m.split(".")[0] == "publisher")
        for name, path in _modules(PACKAGE).items()
        if name not in ENTRY_POINTS and not name.startswith("publisher.")
    }
    assert {name: found for name, found in reaching.items() if found} == {}


def test_no_module_imports_itself_back_counting_deferred_and_typing_imports() -> None:
    """An import inside a function or under TYPE_CHECKING hides a cycle from Python at import time, not from a
    reader (nor from a refactoring that moves the import up): none is allowed."""
    arrows = _arrows()
    assert sorted(name for name in arrows if name in _reachable(arrows, name)) == []


def test_every_arrow_between_rooms_points_down() -> None:
    layer = {room: number for number, rooms in enumerate(LAYERS) for room in rooms}
    assert {_room(name) for name in _modules(PACKAGE)} <= set(layer)  # a new room gets its place in LAYERS
    up = sorted(
        f"{name} -> {target}"
        for name, targets in _arrows().items()
        for target in targets
        if _room(name) != _room(target) and layer[_room(name)] <= layer[_room(target)]
    )
    assert up == []


def test_a_command_imports_no_other_command() -> None:
    """Each CLI command is one module of kernelpin.commands; what two commands share lives below them
    (kernelpin.relock, kernelpin.builds, ...)."""
    reaching = {
        name: sorted(target for target in targets if _room(target) == "commands" and target != "commands.__init__")
        for name, targets in _arrows().items()
        if _room(name) == "commands"
    }
    assert {name: found for name, found in reaching.items() if found} == {}


def test_a_command_of_the_command_line_imports_no_other_and_the_dispatch_none() -> None:
    """kernelpin/cli/: each command's module holds its options and rendering, sharing only CLI_SHARED; the dispatch
    (cli/__init__.py) imports a command's module when that command runs, never at the top."""
    from kernelpin.cli import COMMANDS

    commands = {command.module.removeprefix("kernelpin.") for command in COMMANDS.values()}
    cli = {name: targets for name, targets in _arrows().items() if _room(name) == "cli"}
    assert commands | CLI_SHARED | {"cli.__init__"} == set(cli)  # one module per command, and only those
    reaching = {
        name: sorted(t for t in targets if _room(t) == "cli" and t not in CLI_SHARED) for name, targets in cli.items()
    }
    assert {name: found for name, found in reaching.items() if found} == {}


def test_at_most_a_dozen_modules_directly_in_kernelpin() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top


def test_tools_testkit_and_benchmarks_use_only_the_api_the_format_the_file_checks_and_the_publisher() -> None:
    """Besides `kernelpin.NAME` (the package's API), only kernelpin.format, .files and .publisher: what the
    builder and the publisher share with the consumer. A benchmark timing one step inside is named in TIMED_INSIDE."""
    root = PACKAGE.parent
    reaching = {}
    for path in sorted(p for folder in ("tools", "testkit", "benchmarks") for p in (root / folder).rglob("*.py")):
        named = path.relative_to(root).as_posix()
        allowed = SHARED_ROOMS | set(TIMED_INSIDE.get(named, ()))
        rooms = {_room(module) for module in _runtime_imports(path, typing_too=True)}
        api = {
            alias.name
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module == "kernelpin"
            for alias in node.names
        }
        import kernelpin

        found = sorted(rooms - allowed - (api & set(kernelpin.__all__)))
        if found:
            reaching[named] = found
    assert reaching == {}


def test_the_format_layer_imports_only_itself_and_the_checks() -> None:
    assert len(FORMAT) >= 10 and "format.lockfile" in FORMAT  # the folder is read, not a list kept here
    outside = {
        name: sorted(_runtime_imports(PACKAGE.joinpath(*name.split(".")).with_suffix(".py")) - FORMAT - CHECKS)
        for name in FORMAT
    }
    assert {name: found for name, found in outside.items() if found} == {}


def test_the_format_layer_does_no_io() -> None:
    """Issue 52: format/__init__.py calls the folder pure, but lockfile and kernels_lock read and wrote files."""
    found = {}
    for name in sorted(FORMAT):
        tree = ast.parse(PACKAGE.joinpath(*name.split(".")).with_suffix(".py").read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names} | {
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level
        }
        io = {module for module in imported for io_module in IO_MODULES if f"{module}.".startswith(f"{io_module}.")}
        opens = any(isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open" for node in ast.walk(tree))
        problems = sorted(io) + (["open()"] if opens else [])
        if problems:
            found[name] = problems
    assert found == {}


def test_the_publisher_imports_no_consumer_command() -> None:
    consumer = {
        "commands.lock",
        "commands.sync",
        "store.install",
        "store.content",
        "loading.runtime",
        "front.lock",
        "loading.loader",
        "commands.verify",
        "commands.outdated",
        "commands.cache",
        "resolve",
        "project",
    }
    reaching = {
        name: sorted(m for m in _runtime_imports(path) if m in consumer or _room(m) == "cli")
        for name, path in _modules(PACKAGE / "publisher").items()
    }
    assert {name: found for name, found in reaching.items() if found} == {}


def test_the_cli_holds_no_locking_logic() -> None:
    """kernelpin/cli/ parses and renders: resolving, writing locks, editing pyproject.toml and the edit lock belong
    to kernelpin.commands.lock (each command is a library function there or in its own module)."""
    files = sorted((PACKAGE / "cli").glob("*.py"))
    imported = set().union(*(_runtime_imports(path) for path in files))
    assert imported & {"resolve", "format.kernels_lock", "files.atomic", "store.content", "files.integrity"} == set()
    tree = ast.Module(body=[node for path in files for node in ast.parse(path.read_text()).body], type_ignores=[])
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    locking_names = {
        "resolve",
        "write_atomic",
        "set_requirement",
        "remove_requirement",
        "read_requirements",
        "edit_lock",
        "entry_to_add",
        "tag_versions",
        "unlisted_entries",
        "verify_file",
        "scan_cache_dir",
    }
    assert (names | attributes - {"resolve"}) & locking_names == set()  # Path.resolve is no resolver
    assert not any(
        isinstance(node, ast.Attribute)
        and node.attr in {"write", "read", "staleness", "changes"}
        and getattr(node.value, "id", None) == "lockfile"
        for node in ast.walk(tree)
    )


def _imported_names(path: Path) -> set[str]:
    """The names `path` imports from kernelpin modules (`from kernelpin.x import name`), anywhere in the file."""
    return {
        alias.name
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernelpin")
        for alias in node.names
    }


def test_the_load_tail_is_written_once() -> None:
    """Every load (a lock, the Hub without one, LOCAL_KERNELS, ...) goes through the one load front,
    kernelpin.loading.front, which asks resolvers for a build and hands it to
    kernelpin.loading.importing.import_pinned, the one place that takes the kernel module's lock, verifies, checks
    the dependencies and calls the verified importer."""
    modules = _modules(PACKAGE)
    importer = sorted(name for name, path in modules.items() if "import_verified" in _imported_names(path))
    tail = sorted(name for name, path in modules.items() if "import_pinned" in _imported_names(path))
    assert importer == ["loading.importing"]
    assert tail == ["loading.front"]


def test_loading_imports_neither_the_resolver_nor_the_hub() -> None:
    """The resolvers that need the resolver or the Hub (kernelpin.front) are handed to loading's front, which
    knows only their interface (kernelpin.loading.front.Resolver): loading reads locks and builds on disk, verifies
    and imports."""
    forbidden = {"resolve", "project", "builds", "relock", "lockless"}
    reaching = {
        name: sorted(target for target in targets if target.split(".")[0] in forbidden or target.split(".")[0] == "hub")
        for name, targets in _arrows().items()
        if _room(name) == "loading"
    }
    assert {name: found for name, found in reaching.items() if found} == {}


def test_every_command_is_a_library_function_named_like_it() -> None:
    import kernelpin
    from kernelpin.cli import COMMANDS

    library = {name.replace("-", "_") for name in COMMANDS if name != "help"}  # describe-api: describe_api
    assert library <= set(kernelpin.__all__)
    assert all(callable(getattr(kernelpin, name)) and getattr(kernelpin, name).__doc__ for name in library)


@pytest.mark.parametrize(
    ("statement", "absent"),
    [
        # load() reads a lock; it neither resolves nor edits pyproject.toml.
        (
            "import kernelpin.front.lock",
            {
                "kernelpin.resolve",
                "kernelpin.project",
                "kernelpin.cli",
                "kernelpin.store.install",
                "kernelpin.publisher",
            },
        ),
        # Installing and publishing need the layout's names, not the resolver.
        ("import kernelpin.store.install", {"kernelpin.resolve", "kernelpin.project"}),
        ("import kernelpin.publisher.release", {"kernelpin.resolve", "kernelpin.project", "kernelpin.store.install"}),
    ],
)
def test_modules_load_only_what_they_use(statement: str, absent: set[str]) -> None:
    loaded = {name for name in fresh_interpreter(statement)[1] if name.startswith("kernelpin")}
    assert "kernelpin.format.layout" in loaded
    assert loaded & absent == set()


def test_no_module_imports_another_modules_private_names() -> None:
    reaching = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernelpin"):
                reaching += [
                    f"{path.name}: {node.module}.{alias.name}" for alias in node.names if alias.name.startswith("_")
                ]
    assert reaching == []
