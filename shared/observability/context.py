"""The correlation of one unit of work (a request, a worker turn, a push delivery).

A `Record` holds the trace this unit of work belongs to, its own span id, and the fields its
one log line will carry (method, dialect, task id, owner tag, outcome, timings). It lives in
a ContextVar, so whatever runs inside (the service, the handler logging through plain
`logging`, the store) finds it without being passed it; `note()` adds fields, and does
nothing where no unit of work is open.

Trace context comes from the W3C `traceparent` header or Google's `X-Cloud-Trace-Context`;
a missing, over-long or malformed one starts a new trace. Nothing of a header is kept but
ids that passed the patterns below, so a hostile header never reaches a log line.

Owners are logged as a tag: a keyed hash (HMAC-SHA256) of the owner, never the owner itself.
The key is A2A_LOG_OWNER_KEY (set the same on every function to correlate one caller across
instances); unset, a random key of this process: tags then match within one instance only.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import random
import re
from contextvars import ContextVar
from typing import Any

from shared.frozen import frozen

# Longer headers are not parsed at all (a W3C traceparent of version 00 has 55 characters;
# later versions may append fields, which are ignored).
MAX_HEADER_CHARS = 512
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
# TRACE_ID/SPAN_ID;o=OPTIONS, the span id in decimal (an unsigned 64-bit number).
_CLOUD_TRACE = re.compile(r"([0-9a-fA-F]{32})(?:/([0-9]{1,20}))?(?:;o=([0-9]+))?")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16

TRACEPARENT = "traceparent"
CLOUD_TRACE = "X-Cloud-Trace-Context"


# Ids need to be unique, not secret: the process's random generator (seeded from the system's
# at start, and again in each forked child) is a fifth of the cost of the system's.
def new_trace_id() -> str:
    return f"{random.getrandbits(128) or 1:032x}"


def new_span_id() -> str:
    return f"{random.getrandbits(64) or 1:016x}"


@frozen
class Trace:
    """Where a unit of work sits in a trace: the trace, its own span and the caller's."""

    trace_id: str  # 32 lowercase hex digits, not all zero
    span_id: str  # this unit's span: 16 lowercase hex digits, not all zero
    parent_id: str | None = None  # the caller's span, when a header named one
    sampled: bool = False  # the caller asked for this trace to be recorded

    def traceparent(self) -> str:
        """The `traceparent` header of a call this unit of work makes (its span the parent)."""
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}"


def _from_traceparent(header: str) -> tuple[str, str, bool] | None:
    """(trace id, parent span id, sampled) of a W3C traceparent (Trace Context, level 1)."""
    found = _TRACEPARENT.match(header)
    if found is None:
        return None
    version, trace_id, parent_id, flags = found.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        return None
    # Version 00 is exactly these four fields; a later version may add fields after a dash.
    if len(header) != 55 and (version == "00" or header[55] != "-"):
        return None
    return trace_id, parent_id, bool(int(flags, 16) & 1)


def _from_cloud_trace(header: str) -> tuple[str, str | None, bool] | None:
    """(trace id, parent span id or None, sampled) of an X-Cloud-Trace-Context."""
    found = _CLOUD_TRACE.fullmatch(header)
    if found is None:
        return None
    trace_id, span, options = found.groups()
    trace_id = trace_id.lower()
    if trace_id == _ZERO_TRACE:
        return None
    parent_id = None
    if span is not None and 0 < int(span) < 2**64:
        parent_id = f"{int(span):016x}"
    return trace_id, parent_id, options == "1"


def incoming(traceparent: str | None, cloud_trace: str | None = None) -> Trace:
    """This unit of work's place in the caller's trace (traceparent first, as the W3C
    standard's, then Google's header), or a new trace when neither is usable."""
    found: tuple[str, str | None, bool] | None = None
    if traceparent and len(traceparent) <= MAX_HEADER_CHARS:
        found = _from_traceparent(traceparent.strip())
    if found is None and cloud_trace and len(cloud_trace) <= MAX_HEADER_CHARS:
        found = _from_cloud_trace(cloud_trace.strip())
    if found is None:
        return Trace(new_trace_id(), new_span_id())
    trace_id, parent_id, sampled = found
    return Trace(trace_id, new_span_id(), parent_id, sampled)


class Record:
    """One unit of work being done: its trace, its kind, the fields of its log line, and the
    HTTP status of the worst error it answered (`answered`: a JSON-RPC error is answered
    with HTTP 200, yet its line says whose fault it was)."""

    __slots__ = ("error_status", "fields", "kind", "trace")

    def __init__(self, kind: str, trace: Trace) -> None:
        self.kind = kind
        self.trace = trace
        self.fields: dict[str, Any] = {}
        self.error_status = 0


_CURRENT: ContextVar[Record | None] = ContextVar("a2a_record", default=None)


def current() -> Record | None:
    """The unit of work this code runs in, if any."""
    return _CURRENT.get()


def note(**fields: Any) -> None:
    """Add fields to the current unit of work's log line (nothing outside one)."""
    record = _CURRENT.get()
    if record is not None:
        record.fields.update(fields)


def answered(code: int, reason: str, status: int) -> None:
    """The current unit of work answered an error: its JSON-RPC `code` and A2A `reason`
    (`TASK_NOT_FOUND`) go on its line, and `status`, the HTTP status the error stands for
    (whatever the binding answered), sets the line's severity: WARNING for a client's
    error, ERROR for ours (5xx). Nothing outside one."""
    record = _CURRENT.get()
    if record is not None:
        record.fields["errorCode"] = code
        record.fields["errorReason"] = reason
        record.error_status = max(record.error_status, status)


def enter(record: Record | None) -> object:
    """Make `record` current; returns the token `leave` takes."""
    return _CURRENT.set(record)


def leave(token: object) -> None:
    _CURRENT.reset(token)  # type: ignore[arg-type]


_KEY: list[bytes] = [os.urandom(32)]


def set_owner_key(key: str | None) -> None:
    """The key of owner tags (A2A_LOG_OWNER_KEY); None: a random key of this process."""
    _KEY[0] = key.encode() if key else os.urandom(32)
    owner_tag.cache_clear()


@functools.lru_cache(maxsize=1024)
def owner_tag(owner: str) -> str:
    """The owner as logs name it: 16 hex digits of a keyed hash, from which neither the
    owner nor its credentials can be recovered without the key."""
    return hmac.new(_KEY[0], owner.encode(), hashlib.sha256).hexdigest()[:16]
