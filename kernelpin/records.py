"""Records: the classes `@dataclasses.dataclass` makes, defined without compiling code at import.

Why: for each class, `@dataclass(frozen=True)` writes the source of six methods and compiles it (`exec`), 0.5-1.7
ms a class on a 2-core Xeon under Python 3.11; a cold `kernelpin.load` imports 28 such classes, which cost more
than the rest of its work (issue 53). A record is a dataclass all the same: its fields are registered as
`dataclasses.dataclass` registers them (by the record itself, or by dataclass without generating methods where a
class needs dataclass's own decisions: see _register_fields), so `dataclasses.fields`, `replace`, `asdict`,
`astuple` and `is_dataclass` take it; its `__init__`, `__repr__`, `__eq__`, `__hash__` and (frozen)
`__setattr__`/`__delattr__` are the ones below, written once and driven by the class's fields, with the
dataclass's behaviour: the same arguments, defaults and default factories, `__post_init__`, the same equality,
hash, repr and FrozenInstanceError (tests/kernelpin/toplevel/test_records.py compares them with dataclass's).
Where a class defines one of these methods itself, its own is kept, as dataclass keeps it.
"""

from __future__ import annotations

import abc
import dataclasses
import reprlib
import sys
import types
import typing
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(
        **_: object,
    ) -> Callable[[Any], Any]:  # type checkers only: typing_extensions at run time costs an import
        return lambda function: function


Cls = TypeVar("Cls", bound=type)
_MISSING = dataclasses.MISSING


class _Argument:
    """One __init__ argument: a field's name, default (MISSING: none) and default factory."""

    __slots__ = ("default", "factory", "name")

    def __init__(self, name: str, default: object, factory: Callable[[], object] | None) -> None:
        self.name, self.default, self.factory = name, default, factory


class _Shape:
    """What the shared methods need of a class, computed once when it is decorated. (Plain classes, these two: a
    NamedTuple costs a record's import time twice over.)"""

    __slots__ = ("arguments", "compared", "frozen", "hashed", "names", "post_init", "shown")

    def __init__(
        self,
        arguments: tuple[_Argument, ...],
        shown: tuple[str, ...],
        compared: Callable[[object], tuple[object, ...]],
        hashed: Callable[[object], tuple[object, ...]],
        post_init: bool,
        frozen: bool,
    ) -> None:
        self.arguments = arguments
        self.frozen = frozen
        self.names = tuple(argument.name for argument in arguments)  # in order
        self.shown = shown  # the fields its repr shows
        self.compared = compared  # the values equality compares, as a tuple (as dataclass's)
        self.hashed = hashed  # the values its hash takes, likewise
        self.post_init = post_init


def _values_of(names: tuple[str, ...]) -> Callable[[object], tuple[object, ...]]:
    """The named attributes of a record as a tuple, read by operator.attrgetter (C) where it gives one."""
    if len(names) >= 2:
        return attrgetter(*names)
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda record: (one(record),)
    return lambda record: ()


def _shape(cls: type, frozen: bool) -> _Shape:
    fields = dataclasses.fields(cls)
    arguments = []
    for field in fields:
        if not field.init or field.kw_only is True:
            raise TypeError(f"{cls.__qualname__}.{field.name}: a record field is an __init__ argument by position")
        factory = None if field.default_factory is _MISSING else field.default_factory
        arguments.append(_Argument(field.name, field.default, factory))
    return _Shape(
        tuple(arguments),
        tuple(field.name for field in fields if field.repr),
        _values_of(tuple(field.name for field in fields if field.compare)),
        _values_of(tuple(field.name for field in fields if (field.compare if field.hash is None else field.hash))),
        hasattr(cls, "__post_init__"),
        frozen,
    )


def _shape_of(record: object) -> _Shape:
    return _shape_of_class(type(record))


def _shape_of_class(cls: type) -> _Shape:
    return cast(_Shape, cls.__record_shape__)  # type: ignore[attr-defined]  # set by _decorate


def _init(self: Any, *args: object, **kwargs: object) -> None:
    shape = _shape_of(self)
    if shape.frozen and not kwargs and len(args) == len(shape.names):  # the common call: every field set at once
        self.__dict__.update(zip(shape.names, args, strict=True))
        if shape.post_init:
            self.__post_init__()
        return
    cls = type(self)
    # A field is set as a dataclass's __init__ sets it: past a frozen class's __setattr__, else through the class's
    # own (a __setattr__ or a descriptor it defines sees the assignment).
    assign = object.__setattr__ if shape.frozen else setattr
    if len(args) > len(shape.arguments):
        raise TypeError(f"{cls.__qualname__}.__init__() {_takes(shape, len(args))}")
    missing = []
    for index, argument in enumerate(shape.arguments):
        if index < len(args):
            if argument.name in kwargs:
                raise TypeError(f"{cls.__qualname__}.__init__() got multiple values for argument '{argument.name}'")
            value = args[index]
        elif argument.name in kwargs:
            value = kwargs.pop(argument.name)
        elif argument.default is not _MISSING:
            value = argument.default
        elif argument.factory is not None:
            value = argument.factory()
        else:
            missing.append(argument.name)
            continue
        assign(self, argument.name, value)
    if kwargs:
        raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if missing:
        raise TypeError(f"{cls.__qualname__}.__init__() {_missing(missing)}")
    if shape.post_init:
        self.__post_init__()


def _takes(shape: _Shape, given: int) -> str:
    """Python's words for too many positional arguments (self counted, as in the message a dataclass gives)."""
    required = sum(argument.default is _MISSING and argument.factory is None for argument in shape.arguments)
    most = len(shape.arguments)
    takes = f"{most + 1}" if required == most else f"from {required + 1} to {most + 1}"
    return f"takes {takes} positional argument{'s' if most else ''} but {given + 1} were given"


def _missing(names: list[str]) -> str:
    quoted = [f"'{name}'" for name in names]
    listed = (
        quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])}{',' if len(quoted) > 2 else ''} and {quoted[-1]}"
    )
    return f"missing {len(names)} required positional argument{'s' if len(names) > 1 else ''}: {listed}"


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _shape_of(self).shown)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: object, other: object) -> object:  # a bool, or NotImplemented
    if other.__class__ is not self.__class__:
        return NotImplemented
    compared = _shape_of(self).compared
    return compared(self) == compared(other)


def _hash(self: Any) -> int:
    return hash(_shape_of(self).hashed(self))


def _frozen(self: object, name: str) -> bool:
    """Whether a frozen record refuses to change `name`, as a frozen dataclass's __setattr__ decides: any name on
    the decorated class itself, its fields on a subclass."""
    cls = type(self)
    return bool(cls.__dict__.get("__record_frozen__")) or name in cls.__dataclass_fields__  # type: ignore[attr-defined]


def _setattr(self: Any, name: str, value: object) -> None:
    if _frozen(self, name):
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _delattr(self: Any, name: str) -> None:
    if _frozen(self, name):
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"  # what a dataclass's signature shows for a default factory


class _Signature:
    """A record class's signature for inspect (help(), notebooks' tooltips), as a dataclass's __init__ gives it:
    made when asked, since inspect is no import of a load."""

    def __get__(self, instance: object, owner: type) -> Any:
        import inspect

        return inspect.Signature(
            [
                inspect.Parameter(
                    argument.name,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=_Factory()
                    if argument.factory is not None
                    else (inspect.Parameter.empty if argument.default is _MISSING else argument.default),
                    annotation=owner.__dataclass_fields__[argument.name].type,  # type: ignore[attr-defined]
                )
                for argument in _shape_of_class(owner).arguments
            ],
            return_annotation=None,
        )


class _Doc:
    """The docstring a dataclass without one gets, `Name(field: 'type' = default, ...)`: its signature's text, made
    when asked (type.__doc__ calls a descriptor it finds in the class)."""

    def __get__(self, instance: object, owner: type) -> str:
        import inspect

        return owner.__name__ + str(inspect.signature(owner)).replace(" -> None", "")  # dataclass's own words


@dataclasses.dataclass(init=False, repr=False, eq=False)
class _Registered:
    """What `dataclasses.dataclass(init=False, repr=False, eq=False)` records on a class: every record shares it."""


class _Undecorated:
    """_Registered without dataclass."""


_PARAMS = _Registered.__dataclass_params__  # type: ignore[attr-defined]
# What else dataclass sets on every class alike (Python 3.13's __replace__, for copy.replace; nothing on 3.11).
_ADDED_ALIKE = {
    name: value
    for name, value in vars(_Registered).items()
    if name not in vars(_Undecorated) and name not in ("__dataclass_params__", "__dataclass_fields__", "__match_args__")
}
# Where an annotation (a string: every record module has `from __future__ import annotations`) may name one of
# these, dataclass decides what it is: the records that do are registered by dataclass itself.
_SPECIAL_NAMES = ("ClassVar", "InitVar", "KW_ONLY")
_MARKER_IDS = frozenset(map(id, (typing.ClassVar, dataclasses.InitVar, dataclasses.KW_ONLY)))
_ALIAS_TYPES = frozenset((typing._GenericAlias, dataclasses.InitVar))  # type: ignore[attr-defined]  # ClassVar[...], InitVar[...]


def _register_fields(cls: type) -> bool:
    """Register `cls`'s fields as `dataclasses.dataclass(init=False, repr=False, eq=False)` does, a third of its
    time (it matches each annotation against ClassVar, InitVar and KW_ONLY with regexes, 20-25 us a field); False,
    registering nothing, for a class that needs dataclass's own decisions: an annotation that is not a string or
    may name ClassVar, InitVar or KW_ONLY (an alias in its module included), __slots__, a frozen dataclass base."""
    # The class's own annotations, read as dataclass reads them (inspect.get_annotations costs importing inspect).
    annotations: dict[str, object] | None = cls.__dict__.get("__annotations__")  # noqa: RUF063
    if annotations is None or "__slots__" in cls.__dict__:  # None: no fields, or annotations made when asked (3.14)
        return False
    for annotation in annotations.values():
        if not isinstance(annotation, str) or any(name in annotation for name in _SPECIAL_NAMES):
            return False
    module = sys.modules.get(cls.__module__)
    if module is not None and _binds_special(vars(module)):
        return False
    fields: dict[str, dataclasses.Field[Any]] = {}
    for base in cls.__mro__[-1:0:-1]:
        base_fields = base.__dict__.get("__dataclass_fields__")
        if base_fields is not None:
            if base.__dict__["__dataclass_params__"].frozen:
                return False  # dataclass raises its error
            fields.update((entry.name, entry) for entry in base_fields.values())
    own: list[dataclasses.Field[Any]] = []
    for name, annotation in annotations.items():
        default: Any = getattr(cls, name, _MISSING)
        if isinstance(default, types.MemberDescriptorType):  # a base's slot
            return False
        entry: dataclasses.Field[Any] = (
            default if isinstance(default, dataclasses.Field) else dataclasses.field(default=default)
        )
        entry.name, entry.type = name, annotation
        entry._field_type = dataclasses._FIELD  # type: ignore[attr-defined]  # what dataclasses.fields() lists
        if entry.kw_only is _MISSING:
            entry.kw_only = False
        if entry.default.__class__.__hash__ is None:
            raise ValueError(
                f"mutable default {type(entry.default)} for field {name} is not allowed: use default_factory"
            )
        own.append(entry)
    for entry in own:
        fields[entry.name] = entry
        if isinstance(getattr(cls, entry.name, None), dataclasses.Field):
            if entry.default is _MISSING:
                delattr(cls, entry.name)
            else:
                setattr(cls, entry.name, entry.default)
    for name, value in cls.__dict__.items():
        if isinstance(value, dataclasses.Field) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    cls.__dataclass_params__ = _PARAMS  # type: ignore[attr-defined]
    cls.__dataclass_fields__ = fields  # type: ignore[attr-defined]
    if "__match_args__" not in cls.__dict__:
        positional = tuple(entry.name for entry in fields.values() if entry.init and not entry.kw_only)
        setattr(cls, "__match_args__", positional)  # noqa: B010  (mypy: a class attribute it does not declare)
    for name, value in _ADDED_ALIKE.items():
        if name not in cls.__dict__:
            setattr(cls, name, value)
    abc.update_abstractmethods(cls)
    return True


def _binds_special(namespace: dict[str, object]) -> bool:
    """Whether a module binds a name that makes dataclass read an annotation naming it as ClassVar, InitVar or
    KW_ONLY (dataclass looks an annotation's leading name up in the class's module): the markers themselves, or
    `ClassVar[...]` / `InitVar[...]`. Asked for every record, so the common answer (none) is found by C-level
    scans of the module's values, without a Python call per value."""
    values = namespace.values()
    if any(map(_MARKER_IDS.__contains__, map(id, values))):
        return True
    if not any(map(_ALIAS_TYPES.__contains__, map(type, values))):
        return False
    return any(
        type(value) is dataclasses.InitVar
        or (type(value) is typing._GenericAlias and value.__origin__ is typing.ClassVar)  # type: ignore[attr-defined]  # dataclass's own test
        for value in values
    )


def _decorate(cls: Cls, frozen: bool) -> Cls:
    own = dict(cls.__dict__)  # what the class defines itself (cls.__dict__ is a live view)
    # dataclass's rule: a __hash__ the class wrote counts, the None that defining __eq__ leaves does not.
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if frozen and ("__setattr__" in own or "__delattr__" in own):
        raise TypeError(f"{cls.__qualname__}: a frozen record cannot define __setattr__ or __delattr__")
    undocumented = not own.get("__doc__")
    if undocumented:  # else dataclass would write one from inspect.signature, which costs what records save
        cls.__doc__ = cls.__qualname__
    if not _register_fields(cls):
        dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    if undocumented:
        cls.__doc__ = _Doc()  # type: ignore[assignment]
    cls.__record_shape__ = _shape(cls, frozen)  # type: ignore[attr-defined]
    methods: dict[str, object] = {"__init__": _init, "__repr__": _repr, "__eq__": _eq}
    if frozen:
        methods.update(__setattr__=_setattr, __delattr__=_delattr)
        cls.__record_frozen__ = True  # type: ignore[attr-defined]
    for name, method in methods.items():
        if name not in own:
            setattr(cls, name, method)
    if "__init__" not in own:
        cls.__signature__ = _Signature()  # type: ignore[attr-defined]
    if not explicit_hash:  # eq and frozen: hashable by its fields; eq alone: unhashable, as dataclass makes them
        setattr(cls, "__hash__", _hash if frozen else None)  # noqa: B010  (mypy: assigning to a method)
    return cls


@overload
def record(cls: Cls, /) -> Cls: ...
@overload
def record(*, frozen: bool = True) -> Callable[[Cls], Cls]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: Cls | None = None, /, *, frozen: bool = True) -> Cls | Callable[[Cls], Cls]:
    """`@record` is `@dataclass(frozen=True)`; `@record(frozen=False)` is `@dataclass`."""
    if cls is None:
        return lambda undecorated: _decorate(undecorated, frozen)
    return _decorate(cls, frozen)
