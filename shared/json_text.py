"""Compact JSON text encoders, each built once: json.dumps (and JSONEncoder.encode) build a
C encoder at every call, a good part of the cost of encoding a small value.

No circular check (a bookkeeping dict per container): a cycle overflows the recursion, and
the callers' values come from JSON or are checked where they enter. A value JSON has no form
for raises TypeError naming its type.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import (  # type: ignore[attr-defined]
    c_make_encoder,
    encode_basestring,
    encode_basestring_ascii,
)
from typing import Any


def _not_json(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def encoder(
    *, sort_keys: bool = False, ensure_ascii: bool = True, allow_nan: bool = True
) -> Callable[[Any], str]:
    """A function writing a value as json.dumps does with these options, compact
    (`separators=(",", ":")`) and without the circular check."""
    if c_make_encoder is None:  # pragma: no cover - a Python without json's C part

        def dumps(value: Any) -> str:
            return json.dumps(
                value,
                separators=(",", ":"),
                check_circular=False,
                default=_not_json,
                sort_keys=sort_keys,
                ensure_ascii=ensure_ascii,
                allow_nan=allow_nan,
            )

        return dumps
    strings = encode_basestring_ascii if ensure_ascii else encode_basestring
    made = c_make_encoder(None, _not_json, strings, None, ":", ",", sort_keys, False, allow_nan)

    def text(value: Any) -> str:
        return "".join(made(value, 0))

    return text
