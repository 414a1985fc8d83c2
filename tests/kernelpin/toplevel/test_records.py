"""kernelpin.records: a record behaves as the dataclass it replaces (issue 53: records cost no compile at import).
Each check runs the same class body through `@dataclass(frozen=True)` (or `@dataclass`) and `@record` (or
`@record(frozen=False)`) and compares what they do."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from kernelpin.records import record
from tests.kernelpin.helpers import fresh_interpreter


def _pair(frozen: bool = True) -> tuple[Any, Any]:
    """The same class made by dataclass and by record, under one name (reprs and messages name it)."""

    def body() -> type:
        class Point:
            """A point."""

            x: int
            y: int = 0
            tags: list[str] = field(default_factory=list)
            note: str = field(default="", compare=False, repr=False)

        return Point

    made = dataclass(frozen=frozen)(body()), record(frozen=frozen)(body())
    for cls in made:  # pickle finds them here
        cls.__qualname__ = f"{'Frozen' if frozen else 'Mutable'}{'Record' if cls is made[1] else 'Dataclass'}"
        setattr(sys.modules[__name__], cls.__qualname__, cls)
    return made


def _outcome(cls: Any, arguments: tuple[object, ...], keywords: dict[str, object]) -> tuple[str, object]:
    try:
        return "value", cls(*arguments, **keywords)
    except Exception as error:  # noqa: BLE001  (the comparison is the point: any exception, by type and words)
        return type(error).__name__, str(error).split("__init__() ", 1)[-1]


@pytest.mark.parametrize("frozen", [True, False])
def test_construction_equality_hash_and_repr_as_a_dataclass(frozen):
    made = _pair(frozen)
    for arguments, keywords in [
        ((1,), {}),
        ((1, 2), {}),
        ((1, 2, ["a"]), {}),
        ((), {"x": 1, "note": "n"}),
        ((1, 2, [], "n", 5), {}),  # too many
        ((), {}),  # missing
        ((), {"y": 1}),  # missing x
        ((1,), {"x": 2}),  # twice
        ((1,), {"z": 2}),  # unknown
    ]:
        outcomes = [_outcome(cls, arguments, keywords) for cls in made]
        assert outcomes[0][0] == outcomes[1][0], (arguments, keywords, outcomes)
        if outcomes[0][0] != "value":
            assert outcomes[0][1] == outcomes[1][1], outcomes
            continue
        ours, theirs = outcomes[1][1], outcomes[0][1]
        assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
        assert dataclasses.astuple(ours) == dataclasses.astuple(theirs)
        assert repr(ours).replace("Record", "Dataclass") == repr(theirs)
    plain, ours = made
    assert ours(1) == ours(1, note="other") and ours(1) != ours(2) and ours(1) != plain(1)
    assert ours(1).tags is not ours(1).tags  # a fresh list each time
    assert (
        [f.name for f in dataclasses.fields(ours)]
        == [f.name for f in dataclasses.fields(plain)]
        == [
            "x",
            "y",
            "tags",
            "note",
        ]
    )
    assert dataclasses.is_dataclass(ours) and ours.__match_args__ == plain.__match_args__
    assert str(inspect.signature(ours)) == str(inspect.signature(plain))  # what help() and notebooks show
    if frozen:
        assert hash(ours(1, 2, ("a",))) == hash(ours(1, 2, ("a",), "other"))  # type: ignore[arg-type]
        assert hash(ours(1, 2, ("a",))) == hash(plain(1, 2, ("a",)))  # type: ignore[arg-type]  # dataclass's hash
    else:
        with pytest.raises(TypeError, match="unhashable"):
            hash(ours(1))
        with pytest.raises(TypeError, match="unhashable"):
            hash(plain(1))


def test_frozen_refuses_assignment_and_deletion_and_replace_copy_and_pickle_work():
    plain, ours = _pair()
    point = ours(1, 2)
    for change in (lambda: setattr(point, "x", 3), lambda: delattr(point, "x"), lambda: setattr(point, "new", 1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            change()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain(1).x = 3  # type: ignore[misc]
    moved = dataclasses.replace(point, y=5)
    assert (moved.x, moved.y, type(moved)) == (1, 5, ours) and point.y == 2
    assert copy.copy(point) == point == copy.deepcopy(point)
    assert pickle.loads(pickle.dumps(point)) == point
    mutable = _pair(frozen=False)[1](1)
    mutable.x = 4
    assert mutable.x == 4


def test_post_init_runs_and_an_own_method_is_kept():
    @record
    class Checked:
        value: int
        double: int = 0

        def __post_init__(self) -> None:
            if self.value < 0:
                raise ValueError("negative")
            object.__setattr__(self, "double", 2 * self.value)

        def __repr__(self) -> str:
            return "mine"

    assert Checked(3).double == 6 and repr(Checked(3)) == "mine"
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)


def test_a_mutable_records_init_assigns_through_the_classs_own_setattr_as_a_dataclasss_does():
    # A dataclass's generated __init__ writes `self.name = value`; a record's fast path must not go around it.
    made = []
    for decorate in (dataclass, record(frozen=False)):

        @decorate
        class Logged:
            a: int
            b: str = "x"

            def __setattr__(self, name: str, value: object) -> None:
                made.append((name, value))
                object.__setattr__(self, name, value)

        made.clear()
        Logged(1, "y")
        Logged(2)
        assert made == [("a", 1), ("b", "y"), ("a", 2), ("b", "x")], decorate


def test_a_record_subclass_adds_fields_as_a_dataclass_subclass_does():
    @record
    class Base:
        a: int

    @record
    class Child(Base):
        b: str = "x"

    assert Child(1) == Child(1, "x") and Child(1) != Base(1) and repr(Child(1, "y")).endswith("Child(a=1, b='y')")
    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b"]


def test_a_field_outside_init_is_refused_when_the_class_is_made():
    with pytest.raises(TypeError, match="by position"):

        @record
        class Hidden:
            shown: int
            hidden: int = field(default=0, init=False)


def test_defining_records_compiles_no_code():
    # The point of records (issue 53): a module of records compiles nothing when it is imported. Failed with
    # @dataclass: each class compiled its generated methods.
    code = """
import builtins, dataclasses
from kernelpin.records import record
compiled = []
real_exec = builtins.exec
builtins.exec = lambda *args, **kwargs: (compiled.append(1), real_exec(*args, **kwargs))[1]
@record
class A:
    x: int
    y: tuple[int, ...] = ()
@record(frozen=False)
class B:
    z: list[int] = dataclasses.field(default_factory=list)
builtins.exec = real_exec
print(len(compiled), A(1) == A(1), B().z)
"""
    printed, _ = fresh_interpreter(code)
    assert printed.split() == ["0", "True", "[]"]


def test_a_record_without_a_docstring_gets_a_dataclasss():
    def bare() -> type:
        class Bare:
            x: int
            tags: list[str] = field(default_factory=list)
            note: str = "n"

        return Bare

    expected = "Bare(x: 'int', tags: 'list[str]' = <factory>, note: 'str' = 'n')"
    assert record(bare()).__doc__ == dataclass(frozen=True)(bare()).__doc__ == expected


def _module_of(source: str, name: str) -> Any:
    """`source` run as a module of its own (with postponed annotations, as kernelpin's modules), for classes whose
    module's names matter to dataclass (an alias of ClassVar)."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile("from __future__ import annotations\n" + source, name, "exec"), module.__dict__)  # noqa: S102
    return module


def _registered(cls: Any) -> tuple[object, ...]:
    """Everything dataclass records on a class that records share: the fields (their reprs name every attribute,
    the kind of field among them), the match arguments, what the class attributes became, the parameters."""
    return (
        [repr(f) for f in cls.__dataclass_fields__.values()],
        cls.__match_args__,
        {name: value for name, value in vars(cls).items() if name in cls.__dataclass_fields__},
        dataclasses.is_dataclass(cls),
        repr(cls.__dataclass_params__),
    )


def test_a_records_fields_are_registered_as_dataclass_registers_them():
    """Records register their fields themselves (a third of dataclass's time); what they register is dataclass's,
    for ordinary classes and for the ones dataclass decides itself (ClassVar, InitVar and aliases of them)."""
    source = """
import dataclasses
from dataclasses import InitVar, field
from typing import ClassVar
import typing as t
Limit = ClassVar

def plain():
    class Plain:
        x: int
        y: int = 0
        tags: list[str] = field(default_factory=list)
        note: str = field(default="", compare=False, repr=False, metadata={"m": 1})
    return Plain

def special():
    class Special:
        x: int
        limit: ClassVar[int] = 3
        other: t.ClassVar[str] = "c"
        aliased: Limit[int] = 4
        start: InitVar[int] = 0
    return Special
"""
    module = _module_of(source, "records_special")
    plain_source = (
        source.split("def special")[0].replace("from typing import ClassVar\n", "").replace("Limit = ClassVar", "")
    )
    plain_module = _module_of(plain_source.replace("import typing as t\n", ""), "records_plain")
    # Names whose annotations dataclass reads as ClassVar or InitVar although the annotation names neither.
    aliases = _module_of(
        "import dataclasses\nimport typing\nSetting = typing.ClassVar[int]\nStart = dataclasses.InitVar[int]\n"
        "def aliased():\n    class Aliased:\n        x: int\n        setting: Setting = 1\n        start: Start = 0\n"
        "    return Aliased\n",
        "records_aliases",
    )
    for made in (plain_module.plain, module.plain, module.special, aliases.aliased):
        plain = made()
        expected = dataclass(init=False, repr=False, eq=False)(made())
        registered = record(made())
        assert _registered(registered) == _registered(expected), made
        # whatever else dataclass sets on a class (Python 3.13's __replace__) the record has too
        assert set(vars(expected)) - set(vars(plain)) <= set(vars(registered)), made


def test_records_refuse_what_dataclass_refuses_with_its_words():
    for body, error in [
        ("class Mutable:\n    items: list[int] = []", ValueError),
        ("class Loose:\n    x: int\n    y = field(default=1)", TypeError),
    ]:
        source = f"from dataclasses import field\n{body}\n"
        with pytest.raises(error) as from_dataclass:
            dataclass(frozen=True)(_module_of(source, "refused_a").__dict__[body.split()[1].rstrip(":")])
        with pytest.raises(error) as from_record:
            record(_module_of(source, "refused_b").__dict__[body.split()[1].rstrip(":")])
        assert str(from_record.value) == str(from_dataclass.value)


def test_every_kernelpin_record_is_registered_without_dataclass_processing_it():
    # Failed before: each of kernelpin's ~90 records went through dataclass's processing (20-25 us a field, matching
    # every annotation against ClassVar, InitVar and KW_ONLY): 3.6 ms of a cold load's 42 records on this machine.
    code = """
import dataclasses, importlib, pkgutil
processed = []
real = dataclasses._process_class
def process(cls, *args):
    if cls.__module__.split(".")[0] == "kernelpin":  # the libraries it imports have dataclasses of their own
        processed.append(cls.__qualname__)
    return real(cls, *args)
dataclasses._process_class = process
import kernelpin
from kernelpin import records
for module in pkgutil.walk_packages(kernelpin.__path__, "kernelpin."):
    if not module.name.endswith("__main__"):
        importlib.import_module(module.name)
print(*processed)
"""
    printed, _ = fresh_interpreter(code)
    assert printed.split() == ["_Registered"]
