"""Request headers and query parameters as the routes read them, from the WSGI environ.

werkzeug's `request.headers` normalises a name at every read and lists a header's values
(`getlist`) by walking the whole environ; `request.args` parses the query string even when
there is none. Read per request a dozen times, that was a tenth of an echo send's own CPU.
A WSGI server puts each header under one environ key (`HTTP_<NAME>`, the body's two without
the prefix), its repeated lines joined with commas (PEP 3333, as CGI does), so one key read
gives what werkzeug would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import flask

_BODY = frozenset({"CONTENT_TYPE", "CONTENT_LENGTH"})  # the headers without the HTTP_ prefix


@functools.cache
def _key(name: str) -> str:
    key = name.upper().replace("-", "_")
    return key if key in _BODY else f"HTTP_{key}"


def header(request: flask.Request, name: str) -> str | None:
    """The request's header `name` (its lines joined with commas), None when absent."""
    value: str | None = request.environ.get(_key(name))
    return value


def reader(request: flask.Request) -> Callable[[str], str | None]:
    """`header` for this request, as the identity modes read headers."""
    environ: Mapping[str, Any] = request.environ
    return lambda name: environ.get(_key(name))


def values(request: flask.Request) -> Callable[[str], list[str]]:
    """A header's values (one: its lines joined with commas; none when absent), as
    `request.headers.getlist` gives them."""
    environ: Mapping[str, Any] = request.environ

    def listed(name: str) -> list[str]:
        key = _key(name)
        value = environ.get(key)
        # An empty body header is no value (as werkzeug lists it); any other empty one is.
        return [] if value is None or (not value and key in _BODY) else [value]

    return listed


def query(request: flask.Request, name: str) -> str | None:
    """The first query parameter `name`, None when absent (parsed only when there is a query
    string at all)."""
    if not request.environ.get("QUERY_STRING"):
        return None
    return request.args.get(name)
