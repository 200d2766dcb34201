"""OpenTelemetry spans on the embedded backend, exported to the in-memory exporter: the span
tree of a background task with a push, from the client's traceparent to the webhook's."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from shared.observability import tracing
from shared.observability.store import TracedTaskStore, traced
from shared.ports import TaskStore
from shared.store.memory import MemoryTaskStore
from shared.store.notifying import NotifyingTaskStore
from tests.conftest import Client, wait_until
from tests.test_push_delivery import drained
from tests.webhook import Webhook

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.start("off", exporter=exporter)
    try:
        yield exporter
    finally:
        tracing.stop()


def by_id(finished: tuple[ReadableSpan, ...]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in finished if s.context is not None}


def ancestors(span: ReadableSpan, spans: dict[int, ReadableSpan]) -> list[str]:
    """The names of the span's ancestors, nearest first, up to the first one from outside."""
    names: list[str] = []
    parent = span.parent
    while parent is not None and parent.span_id in spans:
        up = spans[parent.span_id]
        names.append(up.name)
        parent = up.parent
    return names


def test_a_background_task_with_a_push_is_one_trace_from_client_to_webhook(
    spans: InMemorySpanExporter, make_client: Callable[..., Client]
) -> None:
    hook = Webhook()
    try:
        client = make_client(handler="tests.handlers.long", push_allowed_hosts=("localhost",))
        params: dict[str, Any] = {
            "message": {
                "messageId": "m-trace",
                "role": "ROLE_USER",
                "parts": [{"text": "artifacts=1 delay=0"}],
            },
            "configuration": {
                "returnImmediately": True,
                "taskPushNotificationConfig": {"url": hook.url()},
            },
        }
        headers = {"traceparent": f"00-{TRACE}-{PARENT}-01"}
        client.rpc("SendMessage", params, version="1.0", headers=headers)

        def worker_done() -> bool:  # its span ends after its turn's, which is inside it
            return any(s.name == "worker" for s in spans.get_finished_spans())

        wait_until(worker_done, 20, lambda: "the worker's turn did not end")
        hook.wait_accepted(1)
        drained(client)
        finished = spans.get_finished_spans()
    finally:
        hook.close()
    assert {f"{s.context.trace_id:032x}" for s in finished if s.context} == {TRACE}
    tree = by_id(finished)
    [request] = [s for s in finished if s.name == "request"]
    assert request.kind is SpanKind.SERVER
    assert request.parent is not None and f"{request.parent.span_id:016x}" == PARENT
    assert request.parent.is_remote
    # The request stored the task and queued its turn; the worker's span is a child of that
    # enqueue (the traceparent went with the queued entry).
    [queued] = [
        s for s in finished if s.name == "enqueue" and (s.attributes or {})["queue"] == "worker"
    ]
    assert ancestors(queued, tree)[-1] == "request"
    [worker] = [s for s in finished if s.name == "worker"]
    assert worker.kind is SpanKind.CONSUMER
    assert worker.parent is not None and worker.parent.span_id == queued.context.span_id
    [turn] = [s for s in finished if s.name == "handler turn" and "worker" in ancestors(s, tree)]
    assert ancestors(turn, tree)[:2] == ["worker turn", "worker"]
    commits = [
        s for s in finished if s.name == "store commit" and "handler turn" in ancestors(s, tree)
    ]
    assert commits, "the turn's commits are spans of the turn"
    assert any(s.name == "store get" for s in finished)
    # Each delivery: queued after a commit, in the trace, down to the webhook's POST.
    posts = [s for s in finished if s.name == "webhook POST"]
    assert posts
    for post in posts:
        path = ancestors(post, tree)
        assert path[:3] == ["push delivery", "deliver", "enqueue"], path
        assert path[-1] == "request"
    # The webhook heard the trace, its parent the POST's span.
    post_ids = {f"{s.context.span_id:016x}" for s in posts}
    for received in hook.accepted():
        version, trace_id, parent, flags = received.headers["traceparent"].split("-")
        assert (version, trace_id, flags) == ("00", TRACE, "01")
        assert parent in post_ids


def test_off_nothing_is_wrapped_and_no_span_is_made() -> None:
    store = MemoryTaskStore()
    assert traced(store) is store
    assert tracing.traceparent() is None  # no unit of work, no tracing: no header to send
    with tracing.span("anything") as opened:
        assert opened is None


def test_on_the_store_is_wrapped(spans: InMemorySpanExporter) -> None:
    assert isinstance(traced(MemoryTaskStore()), TracedTaskStore)


def test_an_exporter_the_extra_does_not_provide_is_a_start_up_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins

    real_import = builtins.__import__

    def without_otel(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_otel)
    with pytest.raises(tracing.TracingUnavailable, match=r"a2a-functions\[otel\]"):
        tracing.start("gcp")
    assert not tracing.enabled()


def test_the_otlp_exporter_starts_from_the_sdk_s_own_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A2A_TRACING=otlp, as a process starts it (its provider becomes the global one, so a
    library's own spans, ADK's, join the same traces); nothing is sent before a span ends."""
    from opentelemetry import trace as api

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    tracing.start("otlp")
    try:
        assert tracing.enabled()
        assert api.get_tracer_provider() is tracing._State.provider
    finally:
        tracing.stop()
    assert not tracing.enabled()


@pytest.mark.parametrize("wrapper", [TracedTaskStore, NotifyingTaskStore])
def test_a_task_store_decorator_takes_every_port_method_as_the_port_says(wrapper: type) -> None:
    # A port method the decorator lacks, or takes with other parameters, fails only when that
    # call is made through it (the sweep's paging did, with tracing on).
    for name, method in vars(TaskStore).items():
        if callable(method) and not name.startswith("_"):
            assert inspect.signature(getattr(wrapper, name)) == inspect.signature(method), name
