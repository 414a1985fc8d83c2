"""A kernel's public API read from its Python sources with `ast`: nothing imported, nothing run, no binary read.

`kernels describe-api` (0.18+) reads a `symbols.json` that a recent kernel-builder writes beside the build (and
fails without one); this reads the sources every build has. Public functions are the package's public names
(`__all__` when it is a literal list, else the names not starting with `_`, modules imported aside) that are
`def`s, in `__init__.py` or followed through relative imports (`from .functional import img2gray`); layers are the
public classes of the `layers` submodule, which `kernels` takes layers from, with the two attributes `kernels`
reads (`has_backward`, `can_torch_compile`) where the class sets them to a literal, else unknown (None).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import field

from kernelpin.records import record

__untrusted_input__ = ("describe",)  # parsers of input kernelpin does not control (kernelpin.errors)


MAX_DEPTH = 16  # relative imports followed from one name: deeper chains (or cycles) end there
# A signature's syntax tree deeper than this is not rendered: ast.unparse recurses once per level (and more), so
# 2 KB of valid Python (`not not ... x` 400 deep, a 2000-long attribute chain) would end in RecursionError.
MAX_NESTING = 100
LAYER_ATTRIBUTES = ("has_backward", "can_torch_compile")

ReadSource = Callable[[str], bytes | None]  # a path in the variant ("functional.py") -> its bytes, None: absent


class Unreadable(Exception):
    """Raised by a ReadSource for a file it will not serve (too big): a problem of the description, not its end."""


@record
class Function:
    name: str
    signature: str  # as written: `img2gray(x: torch.Tensor, dim: int = -3) -> torch.Tensor`
    module: str  # where it is defined, relative to the package ("functional")
    summary: str | None  # its docstring's first line


@record
class Layer:
    name: str
    attributes: dict[str, bool | None]  # has_backward, can_torch_compile: a literal, or None (unknown)
    module: str
    summary: str | None


@record
class KernelApi:
    functions: list[Function]
    layers: list[Layer]
    others: list[str]  # public names that are neither (constants, objects, classes outside `layers`)
    problems: list[str] = field(default_factory=list)  # sources that could not be read, names not found


class _Package:
    """The variant's modules, parsed on first use."""

    def __init__(self, read: ReadSource) -> None:
        self.read = read
        self.parsed: dict[str, ast.Module | None] = {}
        self.problems: list[str] = []

    def module(self, dotted: str) -> tuple[str, ast.Module] | None:
        """The module `dotted` ("" is the package, "a.b" is a/b.py or a/b/__init__.py) and its tree."""
        base = dotted.replace(".", "/")
        for path in (f"{base}/__init__.py", f"{base}.py") if base else ("__init__.py",):
            if path not in self.parsed:
                self.parsed[path] = self._parse(path)
            if self.parsed[path] is not None:
                return path, self.parsed[path]  # type: ignore[return-value]
        return None

    def _parse(self, path: str) -> ast.Module | None:
        try:
            data = self.read(path)
        except Unreadable as error:
            self.problems.append(f"{path}: {error}")
            return None
        if data is None:
            return None
        try:
            return ast.parse(data, filename=path)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            self.problems.append(f"{path}: not readable Python ({type(error).__name__}: {str(error)[:100]})")
            return None


def _exported(tree: ast.Module) -> list[str]:
    """`__all__` when it is a literal list or tuple of strings, else the public names bound at the top level."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, (ast.List, ast.Tuple))
        ):
            listed = [
                item.value for item in node.value.elts if isinstance(item, ast.Constant) and isinstance(item.value, str)
            ]
            if len(listed) == len(node.value.elts):  # strings only
                return listed
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.ImportFrom) and node.level:  # the package's own; `from typing import Any` is no API
            names += [alias.asname or alias.name for alias in node.names if alias.name != "*"]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [target.id for target in targets if isinstance(target, ast.Name)]
    return list(dict.fromkeys(name for name in names if not name.startswith("_")))


def _binding(tree: ast.Module, name: str) -> ast.AST | None:
    """The last top-level statement that binds `name` (as Python leaves it after running the module)."""
    found = None
    for node in tree.body:
        if (
            (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name)
            or (
                isinstance(node, (ast.Import, ast.ImportFrom))
                and any((alias.asname or alias.name.split(".")[0]) == name for alias in node.names)
            )
            or (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets))
            or (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name)
        ):
            found = node
    return found


def _relative(module: str, path: str, level: int, target: str | None) -> str | None:
    """The dotted module a relative import names, from the module at `path`; None when it leaves the package."""
    parts = module.split(".") if module else []
    package = parts if path.endswith("__init__.py") else parts[:-1]
    if level - 1 > len(package):
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, *(target.split(".") if target else [])])


def _definition(package: _Package, module: str, name: str) -> tuple[str, ast.AST] | None:
    """Where `name`, as the module `module` binds it, is defined: follows relative `from . import` chains."""
    for _ in range(MAX_DEPTH):
        found = package.module(module)
        if found is None:
            return None
        path, tree = found
        node = _binding(tree, name)
        if not isinstance(node, ast.ImportFrom) or not node.level:
            return (module, node) if node is not None else None
        alias = next(alias for alias in node.names if (alias.asname or alias.name) == name)
        source = _relative(module, path, node.level, node.module)
        if source is None:
            return None
        if package.module(".".join(filter(None, (source, alias.name)))) is not None and node.module is None:
            return None  # `from . import layers`: a submodule, not a function
        module, name = source, alias.name
    return None


def _nesting(node: ast.AST) -> int:
    """How deep the syntax tree below `node` goes, counted without recursion."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(current))
    return deepest


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The signature as written; None when it is nested too deep to render (MAX_NESTING)."""
    if _nesting(node.args) > MAX_NESTING or (node.returns is not None and _nesting(node.returns) > MAX_NESTING):
        return None
    text = f"{node.name}({ast.unparse(node.args)})" + (f" -> {ast.unparse(node.returns)}" if node.returns else "")
    return ("async " if isinstance(node, ast.AsyncFunctionDef) else "") + text


def _summary(node: ast.AST) -> str | None:
    try:
        doc = ast.get_docstring(node)  # type: ignore[arg-type]
    except TypeError:
        return None
    return doc.strip().splitlines()[0][:200] if doc and doc.strip() else None


def _literal_attributes(node: ast.ClassDef) -> dict[str, bool | None]:
    attributes: dict[str, bool | None] = dict.fromkeys(LAYER_ATTRIBUTES)
    for statement in node.body:
        targets = (
            statement.targets
            if isinstance(statement, ast.Assign)
            else [statement.target]
            if isinstance(statement, ast.AnnAssign)
            else []
        )
        value = getattr(statement, "value", None)
        for target in targets:
            if isinstance(target, ast.Name) and target.id in attributes:
                attributes[target.id] = (
                    value.value if isinstance(value, ast.Constant) and isinstance(value.value, bool) else None
                )
    return attributes


def describe(read: ReadSource) -> KernelApi:
    """The public functions and layers of the package whose files `read` serves (paths relative to the variant)."""
    package = _Package(read)
    root = package.module("")
    if root is None:
        return KernelApi([], [], [], package.problems or ["__init__.py: not in the build"])
    functions, others = [], []
    for name in _exported(root[1]):
        found = _definition(package, "", name)
        if found is not None and isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
            signature = _signature(found[1])
            if signature is None:
                where = package.module(found[0])[0]  # type: ignore[index]  # parsed: its definition was found
                package.problems.append(
                    f"{where}: {name}'s signature is nested more than {MAX_NESTING} deep; not shown"
                )
            shown = f"{name}(...)" if signature is None else signature.replace(found[1].name, name, 1)
            functions.append(Function(name, shown, found[0], _summary(found[1])))
        elif name != "layers":
            others.append(name)
    layers = []
    found_layers = package.module("layers")
    if found_layers is not None:
        for name in _exported(found_layers[1]):
            definition = _definition(package, "layers", name)
            if definition is not None and isinstance(definition[1], ast.ClassDef):
                layers.append(Layer(name, _literal_attributes(definition[1]), definition[0], _summary(definition[1])))
    return KernelApi(functions, layers, others, package.problems)
