"""Log lines: JSON for Cloud Logging on Cloud Functions, human-readable on a local run.

Every record logged through `logging` (the library's, and a handler's) gets the correlation
of the unit of work it is logged in (shared.observability.context): Cloud Logging's
`logging.googleapis.com/trace` and `spanId`, and the task id and owner tag noted so far, so
Cloud Logging groups every line of one request, worker turn or delivery. A unit of work's
own line (`write`) carries all its fields (docs/observability.md).

One JSON encoding per line, by an encoder made once (json.dumps with options makes one per
call).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from shared import json_text
from shared.observability.context import Record, current
from shared.observability.lines import Lines

LINE_LOGGER = "a2a.line"
_SEVERITY = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "CRITICAL",
}
# Fields of a unit of work that every line logged inside it repeats (the rest are its own).
_CORRELATED = ("taskId", "owner", "method")
# What a text line leaves out: its message says it already (kind, method, path and status).
_UNSHOWN = frozenset({"kind", "httpRequest"})

_line = logging.getLogger(LINE_LOGGER)
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)
# A line's: its values are this code's own, never circular, so the encoder keeps no record of
# the containers it is in (a dict operation per container, for every line). A line whose
# values are all JSON's (nearly every one) is written by the encoder made once below
# (JSONEncoder.encode makes one per line: a tenth of a line's cost); this one writes a line
# holding a value a handler noted that JSON has no form for, as its str().
_LINE_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str, check_circular=False)
_line_text = json_text.encoder()


def enabled(level: int) -> bool:
    return _line.isEnabledFor(level)


def write(record: Record, level: int, message: str) -> None:
    """The unit of work's one line, with all its fields. Made without `logging`'s search of
    the stack for the caller (a third of the line's cost): the line's place is its kind.
    Where the line's only way out is the JSON handler `configure` installed (a deployed
    function), it is written there directly, without a LogRecord and the handlers' walk
    (half of the line's cost): the same text, to the same stream, whole (`Lines`)."""
    handler = _sole_json_handler(level)
    if handler is not None and handler.json is not None:
        handler.write_line(
            handler.json.unit_line(level, message, record), lambda: _entry(record, level, message)
        )
        return
    _line.handle(_entry(record, level, message))


def _entry(record: Record, level: int, message: str) -> logging.LogRecord:
    entry = _line.makeRecord(LINE_LOGGER, level, "", 0, message, (), None)
    entry.a2a_unit = record
    return entry


def _sole_json_handler(level: int) -> _Handler | None:
    """The handler `configure` installed in JSON, if a line of `level` goes to it and nowhere
    else (no other handler, no filter, on the way from the line's logger to the root)."""
    logger: logging.Logger | None = _line
    if _line.filters or logging.root.manager.disable >= level:
        return None
    while logger is not None and logger is not logging.root:
        if logger.handlers or not logger.propagate:
            return None
        logger = logger.parent
    handlers = logging.root.handlers
    if len(handlers) != 1:
        return None
    handler = handlers[0]
    if not isinstance(handler, _Handler) or handler.json is None or handler.filters:
        return None
    return handler if level >= handler.level else None


class CloudLoggingFormatter(logging.Formatter):
    """One JSON object per line, in the fields Cloud Logging reads from a function's output
    (severity, message, httpRequest, the trace of the request)."""

    def __init__(self, project: str | None) -> None:
        super().__init__()
        self._traces = f"projects/{project}/traces/" if project else ""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            # Error Reporting reads a traceback from the message.
            message = f"{message}\n{self.formatException(record.exc_info)}"
        unit: Record | None = getattr(record, "a2a_unit", None)
        if unit is not None:
            return self._line(record.levelno, message, record.name, unit, unit.fields)
        unit = current()
        correlated = {}
        if unit is not None:
            correlated = {key: unit.fields[key] for key in _CORRELATED if key in unit.fields}
        return self._line(record.levelno, message, record.name, unit, correlated)

    def unit_line(self, level: int, message: str, unit: Record) -> str:
        """The text `format` gives a unit of work's own line (`write`)."""
        return self._line(level, message, LINE_LOGGER, unit, unit.fields)

    def _line(
        self,
        level: int,
        message: str,
        logger: str,
        unit: Record | None,
        fields: Mapping[str, Any],
    ) -> str:
        entry: dict[str, Any] = {
            "severity": _SEVERITY.get(level) or logging.getLevelName(level),
            "message": message,
            "logger": logger,
        }
        entry.update(fields)
        if unit is not None:
            trace = unit.trace
            entry["logging.googleapis.com/trace"] = self._traces + trace.trace_id
            entry["logging.googleapis.com/spanId"] = trace.span_id
            entry["logging.googleapis.com/trace_sampled"] = trace.sampled
        try:
            return _line_text(entry)
        except TypeError:  # a value JSON has no form for: written as its str()
            return _LINE_ENCODER.encode(entry)


# What a text line writes escaped: C0 and C1 controls, DEL and Unicode's line and paragraph
# separators. A value a client chose (a webhook URL, a method name) may hold any of them; as
# they are, a newline would start a line the reader takes for another record, and an escape
# sequence would drive the terminal. JSON lines escape them already (json.dumps: \n, \u0085).
_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))} | {
    0x0A: "\\n",
    0x0D: "\\r",
    0x09: "\\t",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def escaped(text: str) -> str:
    """`text` on one line: every control character written as its escape (`\\n`, `\\x1b`)."""
    return text.translate(_ESCAPES)


class TextFormatter(logging.Formatter):
    """A line a person reads in a terminal, its correlation and fields at the end. The record
    is one line, control characters escaped; a traceback follows it indented, so nothing a
    client sent can start a line that reads as a record of its own."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        return escaped(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        return _indented(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _indented(super().formatStack(stack_info))

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        unit: Record | None = getattr(record, "a2a_unit", None)
        fields: Mapping[str, Any]
        if unit is not None:
            fields = {k: v for k, v in unit.fields.items() if k not in _UNSHOWN}
        else:
            unit = current()
            fields = {k: unit.fields[k] for k in _CORRELATED if k in unit.fields} if unit else {}
        if unit is None:
            return line
        shown = " ".join(f"{k}={_text(v)}" for k, v in fields.items())
        first, _, rest = line.partition("\n")  # a traceback stays below the line
        head = f"{first} [trace {unit.trace.trace_id[:8]}{' ' + shown if shown else ''}]"
        return f"{head}\n{rest}" if rest else head


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return _ENCODER.encode(value)
    return escaped(str(value))


def _indented(text: str) -> str:
    """A traceback's lines, each indented and on one line of its own (an exception's message
    may hold a client's newlines)."""
    return "\n".join("    " + escaped(line) for line in text.split("\n"))


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler `configure` installs (found and replaced when it is called again). Its
    lines go out through `Lines`, each whole, and a unit's line without its lock."""

    def __init__(self, formatter: logging.Formatter) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(formatter)
        self.lines = Lines(self.stream)
        # Its formatter, when the lines are JSON (`write` formats a unit's line itself).
        self.json = formatter if isinstance(formatter, CloudLoggingFormatter) else None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.write(self.format(record) + self.terminator)
        except RecursionError:  # as logging's own handlers: no report that would recurse
            raise
        except Exception:
            self.handleError(record)

    def write_line(self, text: str, entry: Callable[[], logging.LogRecord]) -> None:
        """Write one formatted line as `emit` does, without the handler's lock (a unit's
        line is written at every request: shared.observability.lines says why); a failure is
        reported as `emit` reports it, naming the `entry` made then."""
        try:
            self.lines.write(text + self.terminator)
        except Exception:
            self.handleError(entry())


def resolve(setting: str, environ: Mapping[str, str]) -> str:
    """`json` or `text` for A2A_LOG_FORMAT: auto is json on Cloud Functions (Cloud Run sets
    K_SERVICE), text elsewhere (make run, make dev)."""
    if setting != "auto":
        return setting
    return "json" if environ.get("K_SERVICE") else "text"


def configure(
    setting: str, *, project: str | None, environ: Mapping[str, str] | None = None
) -> str:
    """Send this process's logs (INFO and up) to stderr in the format A2A_LOG_FORMAT picks;
    returns the format chosen."""
    chosen = resolve(setting, os.environ if environ is None else environ)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    handler = _Handler(CloudLoggingFormatter(project) if chosen == "json" else TextFormatter())
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    return chosen
