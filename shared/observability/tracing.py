"""OpenTelemetry spans, when A2A_TRACING asks for them (the `otel` extra).

Spans: each unit of work (`work.py`: the a2a request, the worker's turn, the push delivery),
the handler turn (shared.runtime), store calls (`store.py`), enqueues (shared.queue) and each
webhook POST (shared.push_delivery). Their context crosses every hop as a W3C `traceparent`
header (on the queued Cloud Tasks request, and on the webhook POST), so one trace shows a
message from the client through the queue and the worker to the webhook.

Off (the default) nothing here imports OpenTelemetry: `span()` hands back one shared null
context manager, and `traceparent()` the unit of work's own ids (logs still correlate).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

from shared.observability.context import Record, Trace, current

_NULL: AbstractContextManager[None] = contextlib.nullcontext()


class TracingUnavailable(RuntimeError):
    """Tracing was asked for, and the `otel` extra is not installed."""


class _State:
    tracer: Any = None  # an opentelemetry Tracer while tracing is on
    provider: Any = None


def start(mode: str, *, project: str | None = None, exporter: Any = None) -> None:
    """Turn tracing on: `mode` gcp (Cloud Trace) or otlp (OTEL_EXPORTER_OTLP_ENDPOINT, as
    the OpenTelemetry SDK reads it); `exporter`, a SpanExporter of the caller's own (tests:
    the in-memory one, exported at once). Raises TracingUnavailable without the extra."""
    if mode == "off" and exporter is None:
        return
    try:
        from opentelemetry import trace as api
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError:
        raise TracingUnavailable(
            f"A2A_TRACING={mode} needs the otel extra: pip install 'a2a-functions[otel]' "
            '(deployed: extras = ["otel"] in infra/deploy.toml\'s [functions]), or set '
            "A2A_TRACING=off"
        ) from None
    processor: Any
    if exporter is not None:
        processor = SimpleSpanProcessor(exporter)
    elif mode == "gcp":
        from opentelemetry.exporter.cloud_trace import CloudTraceSpanExporter

        cloud_trace = CloudTraceSpanExporter(project_id=project)  # type: ignore[no-untyped-call]
        processor = BatchSpanProcessor(cloud_trace)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processor = BatchSpanProcessor(OTLPSpanExporter())
    name = os.environ.get("K_SERVICE") or os.environ.get("FUNCTION_TARGET") or "a2a-functions"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(processor)
    if exporter is None:  # the process's own: libraries that trace (ADK) join its traces
        api.set_tracer_provider(provider)
    _State.provider = provider
    _State.tracer = provider.get_tracer("a2a-functions")


def stop() -> None:
    """Export what is pending and turn tracing off (tests; a process exits without it)."""
    provider, _State.provider, _State.tracer = _State.provider, None, None
    if provider is not None:
        provider.shutdown()


def enabled() -> bool:
    return _State.tracer is not None


def span(name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """A span around a step of the current unit of work (nothing when tracing is off)."""
    if _State.tracer is None:
        return _NULL
    return _State.tracer.start_as_current_span(name, attributes=attributes)  # type: ignore[no-any-return]


@contextlib.contextmanager
def unit_span(kind: str, trace: Trace) -> Iterator[Trace]:
    """The span of a unit of work (named by its kind), a child of the caller's span `trace`
    names; yields the unit's Trace with the span's ids (a new trace of OpenTelemetry's when
    none came in)."""
    if _State.tracer is None:
        yield trace
        return
    from opentelemetry import trace as api

    context = None
    if trace.parent_id is not None:
        remote = api.SpanContext(
            int(trace.trace_id, 16),
            int(trace.parent_id, 16),
            is_remote=True,
            trace_flags=api.TraceFlags(1 if trace.sampled else 0),
        )
        context = api.set_span_in_context(api.NonRecordingSpan(remote))
    span_kind = api.SpanKind.SERVER if kind == "request" else api.SpanKind.CONSUMER
    with _State.tracer.start_as_current_span(kind, context=context, kind=span_kind) as opened:
        ids = opened.get_span_context()
        yield Trace(
            f"{ids.trace_id:032x}",
            f"{ids.span_id:016x}",
            trace.parent_id,
            bool(ids.trace_flags & 1),
        )


def traceparent() -> str | None:
    """The `traceparent` header of a call made here: the innermost span's when tracing is
    on, else the unit of work's own; None outside one."""
    if _State.tracer is not None:
        from opentelemetry import trace as api

        ids = api.get_current_span().get_span_context()
        if ids.is_valid:
            return f"00-{ids.trace_id:032x}-{ids.span_id:016x}-{int(ids.trace_flags):02x}"
    record = current()
    return record.trace.traceparent() if record is not None else None


def snapshot() -> tuple[Record | None, Any]:
    """What `resumed` needs to go on with this unit of work on another thread."""
    if _State.tracer is None:
        return current(), None
    from opentelemetry import context as otel_context

    return current(), otel_context.get_current()


def resumed(taken: tuple[Record | None, Any]) -> AbstractContextManager[None]:
    """Run the block in the unit of work `taken` (by `snapshot`) on another thread: its log
    lines and spans then belong to it. Nothing to do on the thread that took it, still in
    that unit (a blocking send's turn), when no span context came with it."""
    record, otel = taken
    if otel is None and current() is record:
        return _NULL
    return _resumed(record, otel)


@contextlib.contextmanager
def _resumed(record: Record | None, otel: Any) -> Iterator[None]:
    from shared.observability.context import enter, leave

    token = enter(record)
    attached = None
    if otel is not None:
        from opentelemetry import context as otel_context

        attached = otel_context.attach(otel)
    try:
        yield
    finally:
        if attached is not None:
            from opentelemetry import context as otel_context

            otel_context.detach(attached)
        leave(token)
