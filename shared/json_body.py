"""The front door for request bytes: a JSON body parsed once, with limits, for every binding.

JSON-RPC and the HTTP+JSON binding both read their body here, so that whatever a client
sends becomes either a plain JSON value the rest of the code can store and serve back, or an
A2A error the binding answers in its dialect (a JSON-RPC code, or a REST google.rpc.Status
with HTTP 400) — never a 5xx. A body is refused when it:

- is not UTF-8, or not JSON at all (a parse error);
- contains `NaN`, `Infinity` or `-Infinity`, which Python accepts and no JSON reader does
  (a parse error: echoed back, an id of NaN would make the answer itself invalid JSON);
- contains a lone UTF-16 surrogate (`"\\ud800"`, legal escaping of no character): stored, it
  could never be encoded again, and every later answer about its task would fail (a parse
  error);
- nests deeper than MAX_DEPTH (a recursive reader or writer anywhere after us would overflow
  the stack), or holds more than MAX_ITEMS values (each costs a Python object, ~50-100 bytes
  for a 2-byte `{}`, so the count, not the byte size, bounds the memory a body takes);
- repeats a key in an object (readers disagree on which value wins: the request is ambiguous).

Both checks that need the body's structure (depth and item count) run on a skeleton of it —
strings removed, then only the brackets — with the regular-expression engine, before the
parser, so a hostile body costs linear time and no recursion.
"""

from __future__ import annotations

import json
import re
from typing import Any

from shared.errors import InvalidRequestError, JSONParseError

# Nesting any real A2A request needs is under 10 (params.message.parts[0].data...); 64 leaves
# handlers' own data room, and stays far below Python's recursion limit (1000).
MAX_DEPTH = 64
# Values (objects, arrays, keys, strings, numbers, literals) in one body, counted from its
# commas, colons and opening brackets (a container in an array counts twice). Small values
# cost ~80 bytes each (the object and its slot): the worst case, 25,000 `{}` in an array,
# grows a process by ~2 MB (tests/test_limits.py). Large content belongs in strings.
MAX_ITEMS = 50_000

# A string runs to its closing quote, or to the end of an unterminated body; possessive, so a
# hostile body (`"\"\"\"...`) costs one pass, never a retry from every quote.
_STRING = re.compile(r'"(?:[^"\\]++|\\.?)*+(?:"|\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")
# A surrogate can only come from a \uD800-\uDFFF escape (raw surrogate bytes are not UTF-8).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _constant(name: str) -> Any:
    raise JSONParseError(f"{name} is not JSON: send numbers as finite decimals")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return obj


# Made once: json.loads with any option builds a new decoder for every body.
_DECODER = json.JSONDecoder(parse_constant=_constant, object_pairs_hook=_unique)


def _check_shape(text: str) -> None:
    """Refuse a body nested deeper than MAX_DEPTH or holding more than MAX_ITEMS values."""
    if len(text) < MAX_ITEMS and text.count("[") + text.count("{") <= MAX_DEPTH:
        # Counted over the whole text, strings too, these bound what the skeleton would
        # count: a body this small holds too few values and brackets to break either limit
        # (most requests; the skeleton costs ~20 us of one).
        return
    _check_skeleton(text)


def _check_skeleton(text: str) -> None:
    """_check_shape on the body's skeleton: its brackets, once strings are taken out."""
    without_strings = _STRING.sub('""', text)
    items = (
        without_strings.count(",")
        + without_strings.count(":")
        + without_strings.count("[")
        + without_strings.count("{")
        + 1
    )
    if items > MAX_ITEMS:
        raise InvalidRequestError(
            f"the body holds about {items} JSON values; the limit is {MAX_ITEMS}: "
            "send fewer parts or smaller data (large content belongs in a file part)"
        )
    brackets = _NOT_BRACKET.sub("", without_strings)
    del without_strings
    for _ in range(MAX_DEPTH):
        if not brackets:
            return
        inner = _INNERMOST.sub("", brackets)
        if inner == brackets:
            return  # unbalanced: not JSON, and the parser says where
        brackets = inner
    if brackets and _INNERMOST.search(brackets):
        raise InvalidRequestError(
            f"the body nests deeper than {MAX_DEPTH} levels of objects and arrays; flatten the data"
        )


def _has_lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse(data: bytes) -> Any:
    """The JSON value of a body, as plain dicts, lists, strings, finite numbers, booleans and
    None. Raises JSONParseError (not UTF-8, not JSON, NaN/Infinity, a lone surrogate) or
    InvalidRequestError (too deep, too many values, a repeated key)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONParseError(f"the body is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    _check_shape(text)
    try:
        value = _DECODER.decode(text)
    except _Duplicate as dup:
        raise InvalidRequestError(
            f"the key {dup.key[:64]!a} appears twice in one object; send it once"
        ) from None
    except RecursionError:  # a guard: _check_shape already bounds the depth
        raise InvalidRequestError(f"the body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise JSONParseError(f"the body is not JSON ({exc})") from None
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
        raise JSONParseError(
            "the body contains a lone UTF-16 surrogate escape (\\uD800-\\uDFFF without its "
            "pair), which is no character; send text as valid Unicode"
        )
    return value
