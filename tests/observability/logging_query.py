"""The documented Logs Explorer queries, and the little of Cloud Logging's query language
they use, evaluated over the JSON lines a function writes.

The queries are the ```logging fenced blocks of README.md and docs/*.md: one a line, a filter
and, after `  # `, what it finds; `<name>` in a value is a placeholder the reader fills in
(`<reference>`: the reference a client saw).

The subset: comparisons joined by `AND`; a comparison is a field, `=`, `>` or `>=`, and a
quoted string, a number, or (for `severity`) a severity name. Fields: `severity`, ordered as
Cloud Logging orders it; `httpRequest.*`, which Cloud Logging moves out of the payload into
the entry; `jsonPayload.*`, the rest of the line. String equality is case-insensitive, as
Cloud Logging's is. Anything else (OR, NOT, parentheses, `:`, `!=`, a string compared by
order, a string against a number) raises UnsupportedQuery: a query the docs gain beyond this
subset must grow the evaluator, not pass unevaluated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.conftest import ROOT

# Cloud Logging's severities, lowest first.
SEVERITIES = (
    "DEFAULT",
    "DEBUG",
    "INFO",
    "NOTICE",
    "WARNING",
    "ERROR",
    "CRITICAL",
    "ALERT",
    "EMERGENCY",
)
# What Cloud Logging takes out of a structured line's payload into the entry itself.
_ENTRY_FIELDS = frozenset({"severity", "httpRequest", "time", "timestamp"})
_COMPARISON = re.compile(
    r'(?P<field>[A-Za-z][A-Za-z0-9_.]*)(?P<op>>=|=|>)(?P<value>"[^"\\]*"|-?[0-9]+(?:\.[0-9]+)?|[A-Z]+)'
)
_FENCE = re.compile(r"^```logging\n(.*?)^```", re.MULTILINE | re.DOTALL)


class UnsupportedQuery(ValueError):
    """A query outside the subset this evaluator knows."""


def documented() -> Iterator[tuple[Path, str, str]]:
    """(file, filter, what it finds) of every documented query."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if not path.exists():
            continue
        for block in _FENCE.findall(path.read_text()):
            for line in block.splitlines():
                if line.strip():
                    query, _, what = line.partition("  # ")
                    yield path, query.strip(), what.strip()


Line = dict[str, Any]


def compile_query(query: str) -> Callable[[Line], bool]:
    """The filter as a predicate over parsed JSON lines; raises UnsupportedQuery."""
    tests = [_comparison(term) for term in query.split(" AND ")]
    return lambda line: all(test(line) for test in tests)


def _comparison(term: str) -> Callable[[Line], bool]:
    found = _COMPARISON.fullmatch(term.strip())
    if found is None:
        raise UnsupportedQuery(f"not a comparison of the subset: {term!r}")
    field, op, text = found["field"], found["op"], found["value"]
    value: Any
    if field == "severity":
        if text.strip('"').upper() not in SEVERITIES:
            raise UnsupportedQuery(f"no severity {text}")
        rank = SEVERITIES.index(text.strip('"').upper())
        compare = _ordered(op)
        return lambda line: compare(SEVERITIES.index(line.get("severity", "DEFAULT")), rank)
    read = _reader(field)
    if text.startswith('"'):
        if op != "=":
            raise UnsupportedQuery(f"a string compared by order: {term!r}")
        value = text[1:-1].lower()
        return lambda line: _text(read(line), term) == value
    value = float(text)
    compare = _ordered(op)
    return lambda line: (got := _number(read(line), term)) is not None and compare(got, value)


def _reader(field: str) -> Callable[[Line], Any]:
    """The value of `field` in a line (None when it has none)."""
    root, _, rest = field.partition(".")
    if not rest:
        raise UnsupportedQuery(f"no such field in the subset: {field}")
    keys = rest.split(".")
    if root == "jsonPayload":
        if keys[0] in _ENTRY_FIELDS:
            raise UnsupportedQuery(f"{field}: Cloud Logging moves {keys[0]} out of the payload")
    elif root == "httpRequest":
        keys = ["httpRequest", *keys]
    else:
        raise UnsupportedQuery(f"no such field in the subset: {field}")

    def read(line: Line) -> Any:
        value: Any = line
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return value

    return read


def _ordered(op: str) -> Callable[[float, float], bool]:
    if op == "=":
        return lambda a, b: a == b
    if op == ">":
        return lambda a, b: a > b
    return lambda a, b: a >= b


def _text(value: Any, term: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise UnsupportedQuery(f"{term!r}: a string compared with {value!r}")
    return value.lower()


def _number(value: Any, term: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnsupportedQuery(f"{term!r}: a number compared with {value!r}")
    return float(value)
