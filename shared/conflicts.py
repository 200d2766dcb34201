"""Retrying a decision that lost an optimistic write: the one loop every writer uses.

A writer reads a task, decides, and commits with the version it read; a concurrent writer
makes that commit raise VersionConflict. The writer then reads again and decides again,
because what it should do may have changed (the task was canceled, or resumed by another
message). Losing many times in a row means a bug, not bad luck, so the loop is bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from shared.ports import VersionConflict

T = TypeVar("T")

ATTEMPTS = 20  # lost races in a row before we call it a bug, not bad luck


class TooManyConflicts(RuntimeError):
    """A writer lost ATTEMPTS races in a row on one task."""


def retry_on_conflict(decide: Callable[[], T], *, subject: str, attempts: int = ATTEMPTS) -> T:
    """The value of `decide()`, called again (it re-reads) each time it raises VersionConflict.

    `subject` names what was written (`task <id>`) in the error that ends a hopeless loop."""
    for _ in range(attempts):
        try:
            return decide()
        except VersionConflict:
            continue
    raise TooManyConflicts(f"{subject}: gave up after {attempts} lost races with other writers")
