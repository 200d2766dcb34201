"""An agent's JSON read defensively: a member that should be an object or a list and is not
reads as an empty one, so no answer can make the client fail on its shape."""

from __future__ import annotations

from typing import Any


def mapping(value: object) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def items(value: object) -> list[Any]:
    """`value` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def objects(value: object) -> list[dict[str, Any]]:
    """The objects of `value`, a JSON array (anything else in it is passed over)."""
    return [item for item in items(value) if isinstance(item, dict)]
