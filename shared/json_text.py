"""Compact JSON text encoders, each configured once: `json.JSONEncoder` with the options a
caller needs, where json.dumps would check its keyword arguments at every call.

No circular check (a bookkeeping dict per container): a cycle overflows the recursion, and
the callers' values come from JSON or are checked where they enter. A value JSON has no form
for raises TypeError naming its type.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def _not_json(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def encoder(
    *, sort_keys: bool = False, ensure_ascii: bool = True, allow_nan: bool = True
) -> Callable[[Any], str]:
    """A function writing a value as json.dumps does with these options, compact
    (`separators=(",", ":")`) and without the circular check."""
    return json.JSONEncoder(
        separators=(",", ":"),
        check_circular=False,
        default=_not_json,
        sort_keys=sort_keys,
        ensure_ascii=ensure_ascii,
        allow_nan=allow_nan,
    ).encode
