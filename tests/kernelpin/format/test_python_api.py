"""kernelpin.format.python_api on sources in memory (no Hub, no CLI): exactly what describe-api reports, each rule
of its reading checked directly (the mutation score of docs/verification.md rests on these)."""

from __future__ import annotations

import pytest

from kernelpin.format.python_api import MAX_DEPTH, Function, KernelApi, Layer, Unreadable, describe
from tests.kernelpin.commands.test_describe_api import SOURCES


def api(files: dict[str, str | bytes]) -> KernelApi:
    encoded = {path: text.encode() if isinstance(text, str) else text for path, text in files.items()}
    return describe(encoded.get)


def test_the_describe_api_kernel_reads_as_written() -> None:
    described = describe(SOURCES.get)
    assert described.functions == [
        Function("gray", "gray(x: torch.Tensor, *, dim: int=-3) -> torch.Tensor", "functional", "RGB to grayscale."),
        Function("rescale", "async rescale(x, factor=2.0)", "functional", None),
    ]
    assert described.layers == [
        Layer("Fused", {"has_backward": True, "can_torch_compile": None}, "_layers_impl", None),
        Layer("Gray", {"has_backward": False, "can_torch_compile": True}, "layers", "Mid-gray."),
    ]
    assert described.others == ["ops", "VERSION"] and described.problems == []


def test_without_all_the_public_top_level_names_are_the_api() -> None:
    described = api(
        {
            "__init__.py": "from typing import Any\nfrom .f import g as h, _k\nfrom .f import *\nimport os\n"
            "def a(x):\n    '''  \n'''\nclass B:\n    pass\nC = 1\nD: int = 2\n_e = 3\nx.y = 4\nC = 5\n",
            "f.py": "def g(y, /, z=None, *rest, **more):\n    '''First line.\n\n    More.'''\n",
        }
    )
    assert [(f.name, f.signature, f.module, f.summary) for f in described.functions] == [
        ("h", "h(y, /, z=None, *rest, **more)", "f", "First line."),
        ("a", "a(x)", "", None),
    ]
    assert described.others == ["B", "C", "D"]


@pytest.mark.parametrize("all_", ["__all__ = ('a',)", "__all__ = ['a']", "__all__, b = ['a'], 1\n__all__ = ['a']"])
def test_a_literal_all_is_the_list(all_: str) -> None:
    described = api({"__init__.py": f"{all_}\ndef a():\n    pass\ndef b():\n    pass\n"})
    assert [f.name for f in described.functions] == ["a"]


@pytest.mark.parametrize("all_", ["__all__ = names()", "__all__ = ['a', 1]", "__all__: list = ['a']"])
def test_an_all_that_is_not_a_literal_list_of_strings_is_not_read(all_: str) -> None:
    described = api({"__init__.py": f"{all_}\ndef a():\n    pass\ndef b():\n    pass\n"})
    assert [f.name for f in described.functions] == ["a", "b"]


def test_the_last_binding_wins_and_relative_imports_are_followed() -> None:
    described = api(
        {
            "__init__.py": "__all__ = ['f', 'g', 'm', 'n', 'gone', 'sub']\ndef f():\n    pass\nf = 1\n"
            "from .pkg.inner import g\nfrom .pkg import m\nfrom . import sub\nfrom .. import n\nfrom .missing import gone\n",
            "pkg/__init__.py": "from .inner import m\n",
            "pkg/inner.py": "from . import g2 as g\nimport m\n",
            "pkg/g2.py": "x = 1\n",
            "sub.py": "def s():\n    pass\n",
        }
    )
    assert described.functions == [] and described.others == ["f", "g", "m", "n", "gone", "sub"]


def test_definitions_are_found_through_packages_and_submodule_files() -> None:
    described = api(
        {
            "__init__.py": "from .pkg import f\nfrom .mod import g\nfrom .pkg.deep import h\n",
            "pkg/__init__.py": "from .deep import f\n",
            "pkg/deep.py": "from ..mod import g as f\ndef h(a: 'pkg'):\n    pass\n",
            "mod.py": "def g(b):\n    '''G.'''\n",
        }
    )
    assert [(f.name, f.signature, f.module, f.summary) for f in described.functions] == [
        ("f", "f(b)", "mod", "G."),
        ("g", "g(b)", "mod", "G."),
        ("h", "h(a: 'pkg')", "pkg.deep", None),
    ]


def test_a_cycle_of_imports_ends() -> None:
    files = {"__init__.py": "from .a import f\n", "a.py": "from .b import f\n", "b.py": "from .a import f\n"}
    assert api(files).others == ["f"]
    chain = {"__init__.py": "from .m0 import f\n"}
    chain.update({f"m{i}.py": f"from .m{i + 1} import f\n" for i in range(MAX_DEPTH - 1)})
    chain[f"m{MAX_DEPTH - 1}.py"] = "def f():\n    pass\n"
    assert api(chain).others == ["f"]  # MAX_DEPTH modules read: the definition is one further
    chain[f"m{MAX_DEPTH - 2}.py"] = "def f():\n    pass\n"
    assert [f.module for f in api(chain).functions] == [f"m{MAX_DEPTH - 2}"]


def test_layers_come_from_the_layers_submodule_only() -> None:
    described = api(
        {
            "__init__.py": "from . import layers\nclass NotALayer:\n    has_backward = True\n",
            "layers/__init__.py": "from .impl import A\nfrom .impl import helper\nclass B:\n"
            "    has_backward = 1\n    can_torch_compile = None\n    has_backward: bool = False\n    other = True\n"
            "    x.y = True\n",
            "layers/impl.py": "class A:\n    '''The A.'''\n    can_torch_compile = not True\ndef helper():\n    pass\n",
        }
    )
    assert described.layers == [
        Layer("A", {"has_backward": None, "can_torch_compile": None}, "layers.impl", "The A."),
        Layer("B", {"has_backward": False, "can_torch_compile": None}, "layers", None),
    ]
    assert described.others == ["NotALayer"] and described.functions == []


def test_no_package_and_unreadable_sources_are_problems() -> None:
    assert describe(lambda path: None) == KernelApi([], [], [], ["__init__.py: not in the build"])

    def refusing(path: str) -> bytes | None:
        if path == "__init__.py":
            raise Unreadable("2000000 bytes, over 1048576: not read")
        return None

    assert describe(refusing) == KernelApi([], [], [], ["__init__.py: 2000000 bytes, over 1048576: not read"])
    broken = api({"__init__.py": "from .bad import f\n", "bad.py": "def f(:\n", "bad/__init__.py": b"\x00"})
    assert broken.others == ["f"]
    assert [problem.split(" (")[0] for problem in broken.problems] == [
        "bad/__init__.py: not readable Python",
        "bad.py: not readable Python",
    ]
    assert broken.problems[1].startswith("bad.py: not readable Python (SyntaxError: ")


def test_a_long_docstring_line_is_cut() -> None:
    (function,) = api({"__init__.py": f"def f():\n    '''{'x' * 300}\n    '''\n"}).functions
    assert function.summary == "x" * 200


def test_a_syntax_error_is_named_with_its_file_and_cut_at_100_characters() -> None:
    long = "m" * 120
    described = api({"__init__.py": f"from .{long} import f\n", f"{long}.py": "def f(:\n"})
    (problem,) = described.problems
    detail = f"invalid syntax ({long}.py, line 1)"
    assert problem == f"{long}.py: not readable Python (SyntaxError: {detail[:100]})"
    (short,) = api({"__init__.py": "from .b import f\n", "b.py": "def f(:\n"}).problems
    assert short == "b.py: not readable Python (SyntaxError: invalid syntax (b.py, line 1))"


def test_an_import_of_a_dotted_module_binds_its_first_part() -> None:
    described = api({"__init__.py": "__all__ = ['helper']\ndef helper():\n    pass\nimport helper.sub\n"})
    assert described.functions == [] and described.others == ["helper"]


def test_a_relative_import_that_leaves_the_package_is_not_followed() -> None:
    files = {"__init__.py": "from ..n import f\n", "n.py": "def f():\n    pass\n"}
    assert api(files).others == ["f"] and api(files).functions == []
    inner = {
        "__init__.py": "from .pkg import f\n",
        "pkg/__init__.py": "from ..n import f\n",
        "n.py": "def f():\n    pass\n",
    }
    assert [function.module for function in api(inner).functions] == ["n"]


def test_a_name_that_is_both_a_submodule_and_a_function_of_a_package_is_the_function() -> None:
    described = api(
        {
            "__init__.py": "from .pkg import deep\nfrom .pkg import g\n",
            "pkg/__init__.py": "def deep(x):\n    pass\nfrom .. import h as g\n",
            "pkg/deep.py": "X = 1\n",
            "h.py": "Y = 2\n",
        }
    )
    assert [(function.name, function.module) for function in described.functions] == [("deep", "pkg")]
    through = api(
        {"__init__.py": "from .pkg import g\ndef h(a):\n    pass\n", "pkg/__init__.py": "from .. import h as g\n"}
    )
    assert [(function.name, function.signature, function.module) for function in through.functions] == [
        ("g", "g(a)", ""),
        ("h", "h(a)", ""),
    ]


def test_only_the_function_name_is_renamed_in_its_signature() -> None:
    described = api(
        {"__init__.py": "from .m import f as g\n", "m.py": "def f(f=1, *, ff: 'f' = 2) -> 'f':\n    pass\n"}
    )
    assert described.functions[0].signature == "g(f=1, *, ff: 'f'=2) -> 'f'"


def test_the_nesting_bound_is_exact_for_arguments_and_for_the_return_annotation() -> None:
    import ast

    from kernelpin.format.python_api import MAX_NESTING, _nesting

    def depth_of(count: int) -> int:
        return _nesting(ast.parse(f"def f(x={'not ' * count}x): pass").body[0].args)  # type: ignore[attr-defined]

    count = next(count for count in range(MAX_NESTING) if depth_of(count) == MAX_NESTING)
    assert _nesting(ast.parse("x").body[0]) == 3  # Expr > Name > Load: each level counts once
    for source, shown in (
        (f"def f(x={'not ' * count}x):\n    pass\n", True),
        (f"def f(x={'not ' * (count + 1)}x):\n    pass\n", False),
    ):
        assert (api({"__init__.py": source}).functions[0].signature != "f(...)") is shown
    returns = next(
        n for n in range(MAX_NESTING) if _nesting(ast.parse(f"{'not ' * n}x", mode="eval").body) == MAX_NESTING
    )
    for extra, shown in ((0, True), (1, False)):
        source = f"def f() -> {'not ' * (returns + extra)}x:\n    pass\n"
        assert (api({"__init__.py": source}).functions[0].signature != "f(...)") is shown
