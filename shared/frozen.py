"""Frozen values: how the model's, the requests' and the ports' types are declared.

`@frozen` makes a frozen dataclass: fields, `dataclasses.replace`, `FrozenInstanceError`,
equality, hash and repr as `@dataclass(frozen=True)` makes them, and type checkers read it
as one (`dataclass_transform`). What differs is how: on Python 3.11 the dataclass decorator
compiles every method it makes from source (~0.1 ms each), at every cold start: six per
frozen class with equality, and a function declares about fifty such classes. Here the
dataclass decorator only collects the fields (it compiles nothing then), each class's
`__init__` is compiled from the source the dataclass would write for it, and the methods that
are the same for every class (`__setattr__` and `__delattr__`, which refuse; `__eq__`,
`__hash__`, `__repr__`) are written once below. One compile per class instead of six.

An `__init__` assigns through `object.__setattr__`, as a frozen dataclass's does, so building
a value costs what it did. Equality, hash and repr are on no request's path (they are for
tests, logs and debugging): their few extra calls cost nothing there.
"""

from __future__ import annotations

import inspect
import reprlib
from collections.abc import Callable
from dataclasses import MISSING, Field, FrozenInstanceError, dataclass, field, fields
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")


@overload
def frozen(cls: type[T], /) -> type[T]: ...


@overload
def frozen(*, slots: bool = False, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def frozen(
    cls: type[T] | None = None, /, *, slots: bool = False, kw_only: bool = False
) -> type[T] | Callable[[type[T]], type[T]]:
    """A frozen dataclass (`slots` and `kw_only` as the dataclass decorator takes them)."""

    def make(cls: type[T]) -> type[T]:
        # A class without a docstring gets its signature as one, as the dataclass decorator
        # writes it, but from the __init__ made here: the decorator would read object's (its
        # text signature: ~10 ms of compiling tokenize's patterns, the first time).
        documented = bool(cls.__doc__)
        if not documented:
            cls.__doc__ = cls.__name__
        # Fields only: __init__ and the rest are set below (frozen=False: the dataclass would
        # compile its own __setattr__ and __delattr__).
        made = dataclass(
            cls, init=False, repr=False, eq=False, frozen=False, slots=slots, kw_only=kw_only
        )
        # A class's own method is kept, as the dataclass decorator keeps it.
        methods = {n: m for n, m in _SHARED.items() if n not in made.__dict__}
        if slots:  # copy and pickle set a slotted value's fields through these
            methods |= {"__getstate__": _Methods.getstate, "__setstate__": _Methods.setstate}
        for name, method in {"__init__": _init(made), **methods}.items():
            setattr(made, name, method)
        if not documented:
            made.__doc__ = made.__name__ + str(inspect.signature(made))
        return made

    return make if cls is None else make(cls)


class _Factory:
    """The default of a parameter whose field has a default_factory: not given."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _init(cls: type) -> Callable[..., None]:
    """The class's __init__, as the dataclass decorator writes a frozen class's: its fields
    as parameters in order (those after kw_only keyword-only), each default or factory, each
    value set with object.__setattr__ (a field not in __init__ from its default or factory),
    then __post_init__ if the class has one."""
    names: dict[str, Any] = {"_set": object.__setattr__, "_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in fields(cls):
        if not f.init:  # set from its default alone (a memo, say), as the dataclass sets it
            if f.default is not MISSING:
                names[f"_default_{f.name}"] = f.default
                body.append(f"    _set(self, {f.name!r}, _default_{f.name})")
            elif f.default_factory is not MISSING:
                names[f"_factory_{f.name}"] = f.default_factory
                body.append(f"    _set(self, {f.name!r}, _factory_{f.name}())")
            continue
        parameter, value = f.name, f.name
        if f.default is not MISSING:
            names[f"_default_{f.name}"] = f.default
            parameter = f"{f.name}=_default_{f.name}"
        elif f.default_factory is not MISSING:
            names[f"_factory_{f.name}"] = f.default_factory
            parameter = f"{f.name}=_FACTORY"
            value = f"_factory_{f.name}() if {f.name} is _FACTORY else {f.name}"
        (keyword if f.kw_only else positional).append(parameter)
        body.append(f"    _set(self, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    parameters = ["self", *positional, *(["*", *keyword] if keyword else [])]
    source = f"def __init__({', '.join(parameters)}):\n" + "\n".join(body or ["    pass"])
    exec(source, names)  # the one compile of the class (the dataclass decorator's way too)
    init: Callable[..., None] = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init


def _fields(value: Any) -> tuple[Field[Any], ...]:
    return fields(value)


def _compared(value: Any) -> tuple[Any, ...]:
    return tuple(getattr(value, f.name) for f in _fields(value) if f.compare)


class _Methods:
    """The methods every frozen class gets, copied onto it (a base class would add itself to
    every class's bases and, slotted, need empty slots of its own)."""

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _compared(self) == _compared(other)

    def __hash__(self) -> int:
        # The dataclass's rule: a field's `hash`, or when it has none, whether it is compared.
        return hash(
            tuple(
                getattr(self, f.name)
                for f in _fields(self)
                if (f.compare if f.hash is None else f.hash)
            )
        )

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in _fields(self) if f.repr)
        return f"{self.__class__.__qualname__}({shown})"

    def getstate(self) -> list[Any]:
        return [getattr(self, f.name) for f in _fields(self)]

    def setstate(self, state: list[Any]) -> None:
        for f, value in zip(_fields(self), state, strict=True):
            object.__setattr__(self, f.name, value)


_SHARED: dict[str, Callable[..., Any]] = {
    name: vars(_Methods)[name]
    for name in ("__setattr__", "__delattr__", "__eq__", "__hash__", "__repr__")
}
