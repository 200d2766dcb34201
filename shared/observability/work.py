"""One unit of work (an `a2a` request, a worker turn, a push delivery): its record opened in
the context, its span when tracing is on, and its one log line written when it ends.

The line's fields: `kind`, `latencySeconds` (and `httpRequest.latency`, as Cloud Logging's
"0.123s"), and whatever the code inside noted (`context.note`, `context.answered`): method,
dialect, taskId, owner, outcome, attempt, queueLagSeconds, handlerSeconds, turnState,
openStreams, frames, errorCode, errorReason, reference. Its severity is ERROR when the work
raised, answered 5xx or an error standing for one (JSON-RPC's -32603, answered with HTTP
200), or names a reference (a failure of ours a client was told of); WARNING for a 4xx or an
error standing for one (a TaskNotFound), or a failed or busy outcome (a queue target's 503
asking for a retry); INFO otherwise.

A stream's unit outlives the request's block (`Unit.keep`): its line is written when the
stream ends, however it ends (`Kept.end`), with the stream's whole time.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TypeVar

from shared.observability import logs, tracing
from shared.observability.context import Record, Trace, enter, incoming, leave
from shared.pause import Waiting

# Outcomes (shared.jobs.Outcome values, a worker turn's end) a line reports as a warning.
_WARN_OUTCOMES = frozenset({"failed", "busy"})

T = TypeVar("T")


def unit(kind: str, *, traceparent: str | None = None, cloud_trace: str | None = None) -> Unit:
    """Open a unit of work of `kind` in the trace the headers name (a new one without)."""
    return Unit(kind, traceparent, cloud_trace)


class Unit:
    """`unit`'s context: a class rather than a generator, and the span's only when tracing
    is on (every request opens one: two generator contexts were a few microseconds each).
    Its line is written as the block ends, unless the block `keep`s the unit open."""

    __slots__ = (
        "_cloud_trace",
        "_kept",
        "_kind",
        "_record",
        "_span",
        "_started",
        "_token",
        "_traceparent",
    )

    def __init__(self, kind: str, traceparent: str | None, cloud_trace: str | None) -> None:
        self._kind = kind
        self._traceparent = traceparent
        self._cloud_trace = cloud_trace
        self._span: AbstractContextManager[Trace] | None = None
        self._kept: Kept | None = None

    def __enter__(self) -> Record:
        self._started = time.perf_counter()
        trace = incoming(self._traceparent, self._cloud_trace)
        if tracing.enabled():
            self._span = tracing.unit_span(self._kind, trace)
            trace = self._span.__enter__()
        self._record = Record(self._kind, trace)
        self._token = enter(self._record)
        return self._record

    def keep(self) -> Kept:
        """Keep the unit open past its block (a stream, which goes on after the request's
        answer is handed back): its line is written by `Kept.end`. (Its span, when tracing
        is on, still ends with the block: a span is closed in the context it was opened in.)"""
        self._kept = Kept(self._record, self._started)
        return self._kept

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            leave(self._token)
            if self._kept is None or kind is not None:
                _finish(self._record, time.perf_counter() - self._started, kind is not None)
        finally:
            if self._span is not None:
                self._span.__exit__(kind, error, tb)


class Kept:
    """A unit of work kept open past its block (`Unit.keep`): a stream's, whose chunks are
    made on another thread (`within`: each inside the unit, so what they note and log is
    its), and whose line is written once, when it ends (`end`), with its outcome: `ended`
    (its last chunk was made), `failed` (making one raised; or the stream noted it, having
    ended with an error event), or `disconnected` (closed before its end: the client went
    away)."""

    __slots__ = ("_done", "_raised", "_record", "_started")

    def __init__(self, record: Record, started: float) -> None:
        self._record = record
        self._started = started
        self._done = False  # the chunks ran to their end
        self._raised = False  # making a chunk raised

    def within(self, chunks: Iterator[T]) -> Iterator[T]:
        """`chunks`, each made with this unit current."""
        record = self._record
        while True:
            token = enter(record)
            try:
                chunk = next(chunks)
            except StopIteration:
                self._done = True
                return
            except Exception:
                self._raised = True
                raise
            finally:
                leave(token)
            yield chunk

    def stepped(self, work: Waiting[T]) -> Waiting[T]:
        """`work` (an answer that waits for a turn), each step made with this unit current;
        its value at the end. Its line is written by `end`, also when a step raised."""
        record = self._record
        while True:
            token = enter(record)
            try:
                pause = next(work)
            except StopIteration as done:
                self._done = True
                value: T = done.value
                return value
            except Exception:
                self._raised = True
                self.end(stream=False)
                raise
            finally:
                leave(token)
            yield pause

    @property
    def fields(self) -> dict[str, object]:
        """The fields its line will carry."""
        return self._record.fields

    def end(self, *, stream: bool = True) -> None:
        """Write the unit's line, its latency the stream's (or the wait's) whole life. A copy
        of its fields is written: a streamed turn that outlived the stream may still note
        some. A stream's line says how it ended (`outcome`)."""
        kept = self._record
        record = Record(kept.kind, kept.trace)
        record.fields = dict(kept.fields)
        if stream:
            outcome = "failed" if self._raised else "ended" if self._done else "disconnected"
            record.fields.setdefault("outcome", outcome)
        record.error_status = kept.error_status
        _finish(record, time.perf_counter() - self._started, self._raised)


def _finish(record: Record, seconds: float, raised: bool) -> None:
    fields = record.fields
    fields["kind"] = record.kind
    # round(seconds, 6), read from the text Cloud Logging's latency needs anyway: both are
    # the correctly rounded decimal of six places, and one float formatting costs less.
    latency = f"{seconds:.6f}"
    fields["latencySeconds"] = float(latency)
    http = fields.get("httpRequest")
    status = 0
    if isinstance(http, dict):
        http["latency"] = latency + "s"
        status = http.get("status", 0)
    outcome = fields.get("outcome")
    # A queue target's 503 for a failed or busy delivery is how it asks for a retry: a
    # warning; its 500 (the target raised) is an error. An error answered in a 200 (JSON-RPC)
    # counts as the status it stands for; a reference is a failure of ours a client was
    # told about (an internal error, a handler that raised).
    if (
        raised
        or (status >= 500 and outcome not in _WARN_OUTCOMES)
        or record.error_status >= 500
        or "reference" in fields
    ):
        level = logging.ERROR
    elif status >= 400 or record.error_status >= 400 or outcome in _WARN_OUTCOMES:
        level = logging.WARNING
    else:
        level = logging.INFO
    if logs.enabled(level):
        logs.write(record, level, _summary(record.kind, fields, status))


def _summary(kind: str, fields: dict[str, object], status: int) -> str:
    """The line's message: what a person scanning the log wants first."""
    parts = [kind]
    http = fields.get("httpRequest")
    if isinstance(http, dict):
        parts += [str(http.get("requestMethod")), str(http.get("requestUrl")), str(status)]
    for key in ("method", "outcome", "errorReason"):
        if key in fields:
            parts.append(str(fields[key]))
    return " ".join(parts)


MAX_URL_CHARS = 1024
MAX_AGENT_CHARS = 256


def http_request(
    method: str,
    path: str,
    status: int,
    *,
    user_agent: str | None,
    forwarded_for: str | None,
    remote_addr: str | None,
) -> dict[str, object]:
    """Cloud Logging's httpRequest of a request (its latency added when the unit ends): the
    path only (a query may hold what a caller would not log), cut to a bounded length."""
    return {
        "requestMethod": method,
        "requestUrl": path[:MAX_URL_CHARS],
        "status": status,
        "userAgent": (user_agent or "")[:MAX_AGENT_CHARS],
        "remoteIp": _client_address(forwarded_for, remote_addr),
    }


def _client_address(forwarded_for: str | None, remote_addr: str | None) -> str:
    """The caller's address: the first X-Forwarded-For entry (Google's front end puts the
    client there), if it is an address at all, else the connection's."""
    if forwarded_for:
        first = _address(forwarded_for.split(",", 1)[0].strip()[:64])
        if first is not None:
            return first
    return remote_addr or ""


@functools.lru_cache(maxsize=1024)
def _address(text: str) -> str | None:
    """`text` as an IP address in its normal form, or None: parsed once per address (a
    deployed function sees every request's, and callers come again; the cache is bounded)."""
    import ipaddress

    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None
