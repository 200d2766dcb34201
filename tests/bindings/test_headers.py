"""shared.bindings.headers: the environ read straight gives what werkzeug's headers give."""

from __future__ import annotations

import string

import flask
from hypothesis import given
from hypothesis import strategies as st
from werkzeug.test import EnvironBuilder

from shared.bindings import headers

NAMES = ["Content-Type", "Content-Length", "A2A-Extensions", "X-A2A-Extensions", "traceparent"]
names = st.sampled_from(NAMES) | st.text(string.ascii_letters + "-", min_size=1, max_size=12)
header_lists = st.lists(st.tuples(names, st.text(string.printable.strip(), max_size=20)))


@given(sent=header_lists, asked=names, query=st.sampled_from(["", "a=1", "A2A-Version=1.0&a=2"]))
def test_every_read_agrees_with_werkzeug(
    sent: list[tuple[str, str]], asked: str, query: str
) -> None:
    request = flask.Request(EnvironBuilder(headers=sent, query_string=query).get_environ())
    expected = request.headers.get(asked)
    assert headers.header(request, asked) == expected
    assert headers.reader(request)(asked) == expected
    assert headers.values(request)(asked) == request.headers.getlist(asked)
    for name in ("a", "A2A-Version", "missing"):
        assert headers.query(request, name) == request.args.get(name)


def test_repeated_lines_are_one_value_joined_by_the_server() -> None:
    # As gunicorn and werkzeug's server put two A2A-Extensions lines in the environ.
    environ = EnvironBuilder().get_environ()
    environ["HTTP_A2A_EXTENSIONS"] = "urn:a,urn:b"
    request = flask.Request(environ)
    assert headers.values(request)("a2a-extensions") == ["urn:a,urn:b"]
    assert headers.values(request)("X-A2A-Extensions") == []
