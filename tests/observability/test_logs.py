"""The two formats and their choice: JSON for Cloud Logging where Cloud Run runs the function,
text for a person elsewhere, either forced by A2A_LOG_FORMAT; set-up errors name the fix."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared import observability
from shared.observability import logs, tracing
from shared.observability.context import Record, enter, incoming, leave, note
from shared.observability.work import unit
from shared.settings import Settings, SettingsError

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_auto_is_json_on_cloud_run_and_text_elsewhere() -> None:
    assert logs.resolve("auto", {"K_SERVICE": "a2a"}) == "json"
    assert logs.resolve("auto", {}) == "text"
    assert logs.resolve("text", {"K_SERVICE": "a2a"}) == "text"
    assert logs.resolve("json", {}) == "json"


def test_the_setting_is_checked() -> None:
    with pytest.raises(SettingsError, match="A2A_LOG_FORMAT"):
        Settings.from_env({"A2A_LOG_FORMAT": "xml"})
    with pytest.raises(SettingsError, match="A2A_TRACING"):
        Settings.from_env({"A2A_TRACING": "jaeger"})


def record(message: str, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord("a2a.test", level, __file__, 1, message, (), None)


def test_json_lines_carry_the_unit_s_correlation_and_nothing_of_it_outside_one() -> None:
    formatter = logs.CloudLoggingFormatter(None)
    outside = json.loads(formatter.format(record("plain")))
    assert outside == {"severity": "INFO", "message": "plain", "logger": "a2a.test"}
    unit_record = Record("request", incoming(f"00-{TRACE}-00f067aa0ba902b7-00"))
    token = enter(unit_record)
    try:
        note(taskId="t-1", owner="0123456789abcdef", outcome="ran")
        inside = json.loads(formatter.format(record("inside", logging.WARNING)))
    finally:
        leave(token)
    # Without a project, the trace is the bare id; only correlating fields are repeated.
    assert inside["logging.googleapis.com/trace"] == TRACE
    assert inside["logging.googleapis.com/trace_sampled"] is False
    assert (inside["severity"], inside["taskId"], inside["owner"]) == (
        "WARNING",
        "t-1",
        "0123456789abcdef",
    )
    assert "outcome" not in inside


def test_text_lines_name_the_trace_and_the_unit_s_fields(caplog: pytest.LogCaptureFixture) -> None:
    formatter = logs.TextFormatter()
    with caplog.at_level(logging.INFO, logs.LINE_LOGGER), unit("worker") as opened:
        note(taskId="t-2", outcome="ran")
        inside = formatter.format(record("handling"))
    assert inside.endswith(f"[trace {opened.trace.trace_id[:8]} taskId=t-2]")
    [line] = [r for r in caplog.records if r.name == logs.LINE_LOGGER]
    shown = formatter.format(line)
    assert "worker ran" in shown and "taskId=t-2" in shown and "latencySeconds=" in shown


def test_configure_installs_one_handler_however_often_it_is_called() -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        assert logs.configure("json", project="p", environ={}) == "json"
        assert logs.configure("auto", project="p", environ={}) == "text"
        ours = [h for h in root.handlers if h not in before]
        assert len(ours) == 1 and isinstance(ours[0].formatter, logs.TextFormatter)
    finally:
        for handler in [h for h in root.handlers if h not in before]:
            root.removeHandler(handler)


def test_tracing_without_the_extra_stops_start_up_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unavailable(*args: Any, **kwargs: Any) -> None:
        raise tracing.TracingUnavailable("A2A_TRACING=gcp needs the otel extra")

    monkeypatch.setattr(tracing, "start", unavailable)
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        with pytest.raises(SettingsError, match="otel extra"):
            observability.setup(Settings(tracing="gcp"))
    finally:
        for handler in [h for h in root.handlers if h not in before]:
            root.removeHandler(handler)


@contextlib.contextmanager
def json_only() -> Iterator[io.StringIO]:
    """The process's logging as a deployed function has it: `configure`'s JSON handler
    alone on the root (its stream a StringIO), nothing on the way from the line's logger.
    Entered in the test itself: pytest puts its own handlers on the root for the call."""
    stream = io.StringIO()
    root = logging.getLogger()
    before = list(root.handlers)
    for handler in before:
        root.removeHandler(handler)
    stderr, sys.stderr = sys.stderr, stream
    try:
        logs.configure("json", project="p", environ={})
        yield stream
    finally:
        sys.stderr = stderr
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in before:
            root.addHandler(handler)


def test_a_unit_s_line_written_directly_is_the_line_logging_would_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_record(record: logging.LogRecord) -> None:
        raise AssertionError("the line went through logging")

    with json_only() as stream:
        monkeypatch.setattr(logging.getLogger(logs.LINE_LOGGER), "handle", no_record)
        with unit("request", traceparent=f"00-{TRACE}-00f067aa0ba902b7-01") as opened:
            note(taskId="t-3", method="SendMessage", weird=object())
        [handler] = logging.getLogger().handlers
        # The same text as the formatter gives the LogRecord logging would have made of it.
        summary = "request SendMessage"
        entry = logging.LogRecord(logs.LINE_LOGGER, logging.INFO, "", 0, summary, (), None)
        entry.a2a_unit = opened
        expected = handler.format(entry)
    [written] = stream.getvalue().splitlines()
    assert written == expected
    line = json.loads(written)
    assert (line["severity"], line["taskId"]) == ("INFO", "t-3")
    assert line["weird"].startswith("<object object at ")  # no JSON form: its str()
    assert line["message"] == "request SendMessage"
    assert line["logging.googleapis.com/trace"] == f"projects/p/traces/{TRACE}"


def test_with_another_handler_the_line_goes_through_logging() -> None:
    caught: list[logging.LogRecord] = []

    class Extra(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            caught.append(record)

    extra = Extra()
    with json_only() as stream:
        logging.getLogger(logs.LINE_LOGGER).addHandler(extra)
        try:
            with unit("worker"):
                note(outcome="ran")
        finally:
            logging.getLogger(logs.LINE_LOGGER).removeHandler(extra)
    assert [r.getMessage() for r in caught] == ["worker ran"]
    assert len(stream.getvalue().splitlines()) == 1  # and once to the stream, as before


def test_a_failed_write_is_reported_as_logging_reports_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reported: list[logging.LogRecord] = []
    with json_only() as stream:
        [handler] = logging.getLogger().handlers
        monkeypatch.setattr(handler, "handleError", reported.append)
        stream.close()  # writing to it raises
        with unit("request"):
            pass
    [entry] = reported
    assert entry.getMessage() == "request" and entry.name == logs.LINE_LOGGER


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(fields=st.dictionaries(st.text(), _JSON | st.builds(object), max_size=6))
def test_a_unit_s_line_is_its_fields_as_json_dumps_writes_them(fields: dict[str, Any]) -> None:
    unit = Record("request", incoming(None))
    unit.fields.update(fields)
    line = logs.CloudLoggingFormatter("p").unit_line(logging.INFO, "request", unit)
    entry = {"severity": "INFO", "message": "request", "logger": logs.LINE_LOGGER, **fields}
    entry["logging.googleapis.com/trace"] = f"projects/p/traces/{unit.trace.trace_id}"
    entry["logging.googleapis.com/spanId"] = unit.trace.span_id
    entry["logging.googleapis.com/trace_sampled"] = False
    assert line == json.dumps(entry, separators=(",", ":"), default=str)


FORGED = "\n2026-01-01 00:00:00,000 ERROR a2a.push: forged\r\x1b[2J\u2028\x85"


def _formatted(formatter: logging.Formatter, forged: str) -> str:
    entry = logging.LogRecord(
        "a2a.push", logging.WARNING, __file__, 1, "push to %s failed", (forged,), None
    )
    try:
        raise ValueError(f"no answer from {forged}")
    except ValueError:
        entry.exc_info = sys.exc_info()
    unit_record = Record("delivery", incoming(f"00-{TRACE}-00f067aa0ba902b7-00"))
    token = enter(unit_record)
    try:
        note(taskId="t-1" + FORGED)
        return formatter.format(entry)
    finally:
        leave(token)


def test_a_url_with_a_newline_forges_no_text_line() -> None:
    text = _formatted(logs.TextFormatter(), "http://h.example.com/" + FORGED)
    head, *traceback = text.split("\n")
    assert "push to http://h.example.com/\\n2026-01-01 00:00:00,000 ERROR" in head
    assert "\\r\\x1b[2J\\u2028\\x85" in head and "taskId=t-1\\n2026" in head
    # The traceback follows, every line of it indented (the exception's message too, where
    # the client's newline splits it): none starts like a record.
    assert traceback and all(line.startswith("    ") for line in traceback)
    assert "    ValueError: no answer from http://h.example.com/" in traceback
    assert "    2026-01-01 00:00:00,000 ERROR a2a.push: forged\\r\\x1b[2J\\u2028\\x85" in traceback
    assert not any(c in text for c in "\r\x1b\u2028\x85")


def test_a_url_with_a_newline_forges_no_json_line() -> None:
    text = _formatted(logs.CloudLoggingFormatter(None), "http://h.example.com/" + FORGED)
    assert "\n" not in text and "\r" not in text and "\x1b" not in text and "\u2028" not in text
    line = json.loads(text)
    assert line["message"].startswith("push to http://h.example.com/" + FORGED + " failed")
    assert line["taskId"] == "t-1" + FORGED


@given(st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30))
def test_any_text_logged_is_one_text_line(text: str) -> None:
    entry = logging.LogRecord("a2a.test", logging.INFO, __file__, 1, "got %s", (text,), None)
    line = logs.TextFormatter().format(entry)
    assert len(line.splitlines()) == 1 and not any(ord(c) < 0x20 for c in line)
