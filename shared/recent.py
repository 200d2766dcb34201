"""What was computed lately of objects, kept by the objects' identity, bounded: a send asks
for the same model's JSON (shared.model_json) and a stored task's size (shared.limits) more
than once, and each is computed once.

An entry holds its object, so the object's id cannot be another's while the entry lives, and
a look-up checks that it is that very object (equal objects are not: their nested data may be
another's). Only immutable objects fit: frozen models, whose data nobody changes (a turn owns
its copy of a handler's, `model_json.owned`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


def _nothing(value: Any) -> int:
    return 0


class Recent(Generic[V]):
    """Values by their objects' identity: two generations of at most `entries` entries, or of
    values weighing `weight` in all (by `weigh`); when the young one is full it becomes the
    old one, and the old one is dropped. No lock: threads interleave only between dict
    operations, each atomic, and a race costs a miss, never a wrong value (the identity
    check)."""

    def __init__(self, entries: int, weight: int = 0, weigh: Callable[[V], int] = _nothing) -> None:
        self.entries = entries
        self._weight = weight or entries
        self._weigh = weigh
        self._young: dict[int, tuple[Any, V]] = {}
        self._old: dict[int, tuple[Any, V]] = {}
        self._weighed = 0

    def get(self, of: object) -> V | None:
        key = id(of)
        entry = self._young.get(key) or self._old.get(key)
        return entry[1] if entry is not None and entry[0] is of else None

    def add(self, computed: Iterable[tuple[object, V]]) -> None:
        young, weighed, weigh = self._young, self._weighed, self._weigh
        for of, value in computed:
            young[id(of)] = (of, value)
            weighed += weigh(value)
            if len(young) >= self.entries or weighed >= self._weight:
                self._old, self._young = young, {}
                young, weighed = self._young, 0
        self._weighed = weighed

    def __len__(self) -> int:
        return len(self._young) + len(self._old)
