"""Trace headers in, trace ids out: what a caller's headers may and may not do to a log line,
and the owner tags logs carry instead of owners."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from shared.observability import context
from shared.observability.context import Record, incoming, note, owner_tag

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
HEX32, HEX16 = re.compile(r"[0-9a-f]{32}"), re.compile(r"[0-9a-f]{16}")


def test_a_w3c_traceparent_is_continued_with_a_span_of_our_own() -> None:
    trace = incoming(f"00-{TRACE}-{SPAN}-01")
    assert (trace.trace_id, trace.parent_id, trace.sampled) == (TRACE, SPAN, True)
    assert HEX16.fullmatch(trace.span_id) and trace.span_id != SPAN
    assert trace.traceparent() == f"00-{TRACE}-{trace.span_id}-01"
    assert incoming(f"00-{TRACE}-{SPAN}-00").sampled is False


def test_a_later_traceparent_version_keeps_its_known_fields() -> None:
    assert incoming(f"01-{TRACE}-{SPAN}-01-future").trace_id == TRACE
    # Version 00 has exactly four fields; ff is forbidden.
    assert incoming(f"00-{TRACE}-{SPAN}-01-extra").trace_id != TRACE
    assert incoming(f"ff-{TRACE}-{SPAN}-01").trace_id != TRACE


def test_google_s_header_is_read_when_there_is_no_traceparent() -> None:
    trace = incoming(None, f"{TRACE.upper()}/1234;o=1")
    assert (trace.trace_id, trace.parent_id, trace.sampled) == (TRACE, f"{1234:016x}", True)
    assert incoming(None, TRACE).parent_id is None
    # traceparent wins when both are there.
    other = "a" * 32
    assert incoming(f"00-{TRACE}-{SPAN}-01", f"{other}/1").trace_id == TRACE


def test_unusable_headers_start_a_new_trace() -> None:
    for traceparent, cloud in [
        (f"00-{'0' * 32}-{SPAN}-01", None),  # all-zero ids are invalid
        (f"00-{TRACE}-{'0' * 16}-01", None),
        (f"00-{TRACE.upper()}-{SPAN}-01", None),  # uppercase hex is not W3C's
        (None, f"{'0' * 32}/1"),
        (None, f"{TRACE}/99999999999999999999999"),  # more digits than a span id has
        (f"00-{TRACE}-{SPAN}-01" + " " * 600, None),  # over the length limit
    ]:
        assert incoming(traceparent, cloud).trace_id != TRACE, (traceparent, cloud)
    # A span id out of range keeps the trace, without a parent.
    assert incoming(None, f"{TRACE}/{2**64};o=1").parent_id is None


@given(st.one_of(st.none(), st.text(max_size=700)), st.one_of(st.none(), st.text(max_size=700)))
def test_any_header_gives_well_formed_ids_and_nothing_else_of_it(
    traceparent: str | None, cloud: str | None
) -> None:
    trace = incoming(traceparent, cloud)
    assert HEX32.fullmatch(trace.trace_id) and trace.trace_id != "0" * 32
    assert HEX16.fullmatch(trace.span_id)
    assert trace.parent_id is None or HEX16.fullmatch(trace.parent_id)
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]", trace.traceparent())


@given(st.integers(1, 2**128 - 1), st.integers(1, 2**64 - 1), st.integers(0, 255))
def test_every_valid_traceparent_is_continued(trace: int, parent: int, flags: int) -> None:
    continued = incoming(f"00-{trace:032x}-{parent:016x}-{flags:02x}")
    assert (continued.trace_id, continued.parent_id) == (f"{trace:032x}", f"{parent:016x}")
    assert continued.sampled is bool(flags & 1)


def test_owner_tags_are_keyed_hashes_that_hide_the_owner() -> None:
    try:
        context.set_owner_key("k1")
        tag = owner_tag("alice@example.com")
        assert HEX16.fullmatch(tag) and "alice" not in tag
        assert owner_tag("alice@example.com") == tag != owner_tag("bob@example.com")
        context.set_owner_key("k2")
        assert owner_tag("alice@example.com") != tag  # without the key, no tag to guess
    finally:
        context.set_owner_key(None)


def test_note_outside_a_unit_of_work_does_nothing_and_inside_adds_fields() -> None:
    note(taskId="t")  # no unit open: nothing to add to, nothing raised
    record = Record("request", incoming(None))
    token = context.enter(record)
    try:
        note(taskId="t", method="GetTask")
        assert context.current() is record
    finally:
        context.leave(token)
    assert record.fields == {"taskId": "t", "method": "GetTask"}
    assert context.current() is None
