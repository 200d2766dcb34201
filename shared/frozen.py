"""Frozen values: how the model's, the requests' and the ports' types are declared.

`@frozen` is `@dataclass(frozen=True)` (fields, `dataclasses.replace`, `FrozenInstanceError`
and type checking as usual), except that `__eq__`, `__hash__` and `__repr__` are the three
functions below, written once for every class, instead of methods the dataclass decorator
compiles for each class at import. On Python 3.11 it compiles every method it makes from
source (~0.1 ms each), at every cold start: six per frozen class with equality, and the
kit declares about fifty of them. What differs from class to class (`__init__`, and the
frozen `__setattr__` and `__delattr__`) it still makes.

They behave as the dataclass's own: an instance is equal only to one of its own class whose
compared fields are equal, hashes those fields, and shows its `repr` fields. None of them is
on a request's path (they are for tests, logs and debugging), so their few extra calls cost
nothing there.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from dataclasses import Field, dataclass, field, fields
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
        made = dataclass(cls, frozen=True, eq=False, repr=False, slots=slots, kw_only=kw_only)
        for name, method in _SHARED.items():
            if name not in made.__dict__:  # a class's own method is kept, as dataclass does
                setattr(made, name, method)
        return made

    return make if cls is None else make(cls)


def _fields(value: Any) -> tuple[Field[Any], ...]:
    return fields(value)


def _compared(value: Any) -> tuple[Any, ...]:
    return tuple(getattr(value, f.name) for f in _fields(value) if f.compare)


class _Methods:
    """The methods every frozen class gets, copied onto it (a base class would add itself to
    every class's bases and, slotted, need empty slots of its own)."""

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


_SHARED: dict[str, Callable[..., Any]] = {
    name: vars(_Methods)[name] for name in ("__eq__", "__hash__", "__repr__")
}
