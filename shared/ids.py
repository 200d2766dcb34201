"""The one rule for every id a client may choose: task, context, message and push config ids.

An id is 1 to 128 characters from `A-Z a-z 0-9` and `- _ . : ~ @ +`, and not `.` or `..`:
UUIDs, the seeds' and the SDKs' ids pass; nothing that could be a path segment of its own
(`/`, `.`, `..`), a control character, a lone surrogate or a space does, so an id is safe in
URL paths, headers and logs as it stands. The wire readers (shared.dialects.decode) check
each id with `check`, naming the field the caller sent; the stores check again with
`require` (ValueError) as the last line of defence, so both backends accept the same ids.
"""

from __future__ import annotations

import re

MAX_LENGTH = 128
RULE = f"at most {MAX_LENGTH} characters from A-Z a-z 0-9 and - _ . : ~ @ +, not . or .."

_ALLOWED = re.compile(rf"[A-Za-z0-9\-_.:~@+]{{1,{MAX_LENGTH}}}")


def is_valid(value: object) -> bool:
    """Whether `value` is an id by the rule."""
    return (
        isinstance(value, str)
        and _ALLOWED.fullmatch(value) is not None
        and value not in (".", "..")
    )


def problem(value: str) -> str | None:
    """What is wrong with `value` as an id (None: nothing), without echoing it: a refused
    id may be huge or hold characters a log or a terminal should not see."""
    if is_valid(value):
        return None
    if not value:
        return "must not be empty"
    if len(value) > MAX_LENGTH:
        return f"has {len(value)} characters; {RULE}"
    return f"must be {RULE}"


def require(value: str, what: str) -> str:
    """`value` when it is an id by the rule, else ValueError naming `what` (a store's check)."""
    found = problem(value)
    if found is not None:
        raise ValueError(f"{what} {found}")
    return value
