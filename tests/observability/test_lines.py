"""One log line per request, worker turn and push delivery, on the embedded backend: the
fields Cloud Logging reads, the trace every line of the flow shares, and what never appears
(owners, credentials, raw headers)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.bindings.queue_target import QueueTargetApp
from shared.dialects.v1_0 import V1
from shared.jobs import Outcome
from shared.observability.context import note, owner_tag
from shared.observability.work import http_request
from shared.ports import Delivery
from tests.conftest import Client, served
from tests.observability.conftest import PROJECT, Lines
from tests.test_push_delivery import drained
from tests.test_streaming import frames, open_stream
from tests.webhook import Webhook

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TRACE_FIELD = "logging.googleapis.com/trace"
SPAN_FIELD = "logging.googleapis.com/spanId"


def message(text: str, message_id: str) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}


def test_a_request_s_line_carries_http_fields_method_task_owner_and_the_caller_s_trace(
    make_client: Callable[..., Client], lines: Lines
) -> None:
    client = make_client(handler="tests.handlers.logs")
    headers = {
        "traceparent": f"00-{TRACE}-{PARENT}-01",
        "User-Agent": "probe/1.0",
        "X-Forwarded-For": "203.0.113.9, 10.0.0.1",
    }
    answer = client.rpc(
        "SendMessage", {"message": message("hi", "m-line")}, version="1.0", headers=headers
    )
    task_id = answer["result"]["task"]["id"]
    [line] = lines.of("request")
    assert line["severity"] == "INFO"
    assert line["message"] == "request POST / 200 SendMessage"
    assert (line["method"], line["dialect"], line["taskId"]) == ("SendMessage", "1.0", task_id)
    assert line["owner"] == owner_tag("anonymous")
    assert line["turnState"] == "completed" and line["handlerSeconds"] >= 0
    http = line["httpRequest"]
    assert re.fullmatch(r"\d+\.\d{6}s", http.pop("latency"))
    assert http == {
        "requestMethod": "POST",
        "requestUrl": "/",
        "status": 200,
        "userAgent": "probe/1.0",
        "remoteIp": "203.0.113.9",
    }
    assert line[TRACE_FIELD] == f"projects/{PROJECT}/traces/{TRACE}"
    assert re.fullmatch(r"[0-9a-f]{16}", line[SPAN_FIELD]) and line[SPAN_FIELD] != PARENT
    assert line["logging.googleapis.com/trace_sampled"] is True
    # The handler's own line, through plain logging: the same trace and span, and the task.
    [handled] = [x for x in lines.all() if x["logger"] == "tests.handlers.logs"]
    assert handled["message"] == f"handling task {task_id}"
    assert (handled[TRACE_FIELD], handled[SPAN_FIELD]) == (line[TRACE_FIELD], line[SPAN_FIELD])
    assert handled["taskId"] == task_id


def test_google_s_trace_header_is_used_and_no_header_starts_a_trace_per_request(
    make_client: Callable[..., Client], lines: Lines
) -> None:
    client = make_client()
    google = {"X-Cloud-Trace-Context": f"{TRACE}/7;o=1"}
    client.rpc("GetTask", {"id": "nope"}, version="1.0", headers=google)
    client.rpc("GetTask", {"id": "nope"}, version="1.0")
    client.rpc("GetTask", {"id": "nope"}, version="1.0")
    first, second, third = lines.of("request")
    assert first[TRACE_FIELD].endswith(TRACE)
    assert len({first[TRACE_FIELD], second[TRACE_FIELD], third[TRACE_FIELD]}) == 3


def test_a_handler_failure_s_reference_is_on_the_lines_the_operator_searches(
    make_client: Callable[..., Client], lines: Lines
) -> None:
    client = make_client(handler="tests.handlers.logs")
    task = client.rpc("SendMessage", {"message": message("fail", "m-fail")}, version="1.0")
    status = task["result"]["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    reference = re.search(r"reference (\w+)", status["message"]["parts"][0]["text"])
    assert reference is not None
    [line] = lines.of("request")
    assert line["reference"] == reference.group(1)
    assert line["turnState"] == "failed"
    assert line["severity"] == "ERROR"  # a failure of ours, though answered with a task
    [failure] = [x for x in lines.all() if x["severity"] == "ERROR" and "kind" not in x]
    assert reference.group(1) in failure["message"] and "Traceback" in failure["message"]
    assert failure[TRACE_FIELD] == line[TRACE_FIELD]


def test_refused_requests_are_warnings_and_hostile_headers_never_reach_a_line(
    make_client: Callable[..., Client], lines: Lines
) -> None:
    owner_key = "secret-key-1"
    digest = "sha256:" + hashlib.sha256(owner_key.encode()).hexdigest()
    client = make_client(auth="api-key", api_keys={digest: "alice@example.com"})
    hostile = '00-"},"severity":"EMERGENCY","x":{"' + "a" * 40
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}
    assert client.post(body, {"traceparent": hostile}).status_code == 401
    client.rpc(
        "GetTask",
        {"id": "t"},
        version="1.0",
        headers={"X-API-Key": owner_key, "X-Cloud-Trace-Context": "\t" + "9" * 600},
    )
    refused, served = lines.of("request")
    assert refused["severity"] == "WARNING" and refused["httpRequest"]["status"] == 401
    assert "owner" not in refused
    assert served["owner"] == owner_tag("alice@example.com")
    every = "\n".join(lines.raw)
    for secret in ("alice", owner_key, digest, "EMERGENCY", "9" * 40):
        assert secret not in every


def test_a_background_turn_and_its_push_deliveries_log_in_the_request_s_trace(
    make_client: Callable[..., Client], lines: Lines
) -> None:
    hook = Webhook()
    try:
        client = make_client(handler="tests.handlers.long", push_allowed_hosts=("localhost",))
        params = {
            "message": message("artifacts=1 delay=0", "m-bg"),
            "configuration": {
                "returnImmediately": True,
                "taskPushNotificationConfig": {"url": hook.url()},
            },
        }
        headers = {"traceparent": f"00-{TRACE}-{PARENT}-01"}
        task = client.rpc("SendMessage", params, version="1.0", headers=headers)["result"]["task"]
        lines.wait(lambda got: any(x.get("kind") == "worker" for x in got))
        drained(client)
        [turn] = lines.of("worker")
        assert turn["outcome"] == "completed"  # how the turn ended, not only that it ran
        assert turn["taskId"] == task["id"] and turn["attempt"] == 0
        assert turn["queueLagSeconds"] >= 0 and turn["turnState"] == "completed"
        assert turn["owner"] == owner_tag("anonymous")
        deliveries = lines.of("deliver")
        assert deliveries and all(x["taskId"] == task["id"] for x in deliveries)
        assert {x["outcome"] for x in deliveries} <= {"delivered", "nothing to do", "rescheduled"}
        flow = [*lines.of("request"), turn, *deliveries]
        assert {x[TRACE_FIELD] for x in flow} == {f"projects/{PROJECT}/traces/{TRACE}"}
        # Each hop has a span of its own; the webhook is told the trace too.
        assert len({x[SPAN_FIELD] for x in flow}) == len(flow)
        posted = hook.accepted()
        assert posted and all(r.headers["traceparent"].split("-")[1] == TRACE for r in posted)
    finally:
        hook.close()


class _AnyToken:
    def verify(self, token: str, audience: str | Collection[str]) -> Mapping[str, Any]:
        return {}


def test_a_queue_target_s_line_has_the_attempt_the_lag_and_the_queued_request_s_trace(
    lines: Lines,
) -> None:
    def target(payload: dict[str, Any], delivery: Delivery) -> Outcome:
        outcome = Outcome.FAILED if payload["taskId"] == "failing" else Outcome.RAN
        note(taskId=payload["taskId"], outcome=outcome.value)  # as the worker notes them
        return outcome

    app = QueueTargetApp("worker", target, _AnyToken(), url="http://w/", max_attempts=5)
    client = served(app)
    eta = f"{time.time() - 2.5:.6f}"
    for task_id, retry, eta_header in (("t-1", "3", eta), ("failing", "x", "nan")):
        headers = {
            "Authorization": "Bearer t",
            "traceparent": f"00-{TRACE}-{PARENT}-01",
            "X-CloudTasks-TaskRetryCount": retry,
            "X-CloudTasks-TaskETA": eta_header,
        }
        client.post("/", json={"taskId": task_id}, headers=headers)
    client.get("/")
    ran, failed, refused = lines.of("worker")
    assert (ran["severity"], ran["outcome"], ran["attempt"]) == ("INFO", "ran", 3)
    assert 2.5 <= ran["queueLagSeconds"] < 60
    assert ran["httpRequest"]["status"] == 200 and ran["message"] == "worker POST / 200 ran"
    assert ran[TRACE_FIELD] == f"projects/{PROJECT}/traces/{TRACE}"
    # An unreadable retry count or ETA is no number: attempt 0, no lag.
    assert (failed["severity"], failed["outcome"], failed["attempt"]) == ("WARNING", "failed", 0)
    assert failed["queueLagSeconds"] is None and failed["httpRequest"]["status"] == 503
    assert refused["httpRequest"]["status"] == 405 and refused["severity"] == "WARNING"


HOSTILE_HEADERS = ("traceparent", "X-Cloud-Trace-Context", "User-Agent", "X-Forwarded-For")
HEADER_TEXT = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from("\t-0af"), max_size=600
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.fixed_dictionaries(dict.fromkeys(HOSTILE_HEADERS, HEADER_TEXT)))
def test_hostile_headers_give_a_served_answer_and_a_well_formed_line(
    make_client: Callable[..., Client], lines: Lines, headers: dict[str, str]
) -> None:
    client = hostile_client(make_client)
    traceparent, cloud = headers["traceparent"], headers["X-Cloud-Trace-Context"]
    headers = {**headers, "A2A-Version": "1.0"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}
    before = len(lines.raw)
    assert client.post(body, headers).status_code == 200
    [line] = [json.loads(raw) for raw in lines.raw[before:]]
    trace = line[TRACE_FIELD].rsplit("/", 1)[1]
    assert re.fullmatch(r"[0-9a-f]{32}", trace) and re.fullmatch(r"[0-9a-f]{16}", line[SPAN_FIELD])
    http = line["httpRequest"]
    assert isinstance(http["userAgent"], str) and len(http["userAgent"]) <= 256
    assert len(http["remoteIp"]) <= 64 and "," not in http["remoteIp"]
    # The trace is the caller's only when one of its headers named it.
    if trace not in traceparent and trace not in cloud.lower():
        assert "parent" not in line


_HOSTILE: list[Client] = []


def hostile_client(make_client: Callable[..., Client]) -> Client:
    """One app for every example (the fixture is the test's, not the example's)."""
    if not _HOSTILE:
        _HOSTILE.append(make_client())
    return _HOSTILE[0]


@pytest.mark.parametrize(
    ("forwarded", "remote", "logged"),
    [
        ("203.0.113.9, 10.0.0.1", "10.0.0.1", "203.0.113.9"),
        ("2001:DB8:0:0::1", "10.0.0.1", "2001:db8::1"),  # its normal form
        ("not an address, 203.0.113.9", "10.0.0.1", "10.0.0.1"),
        (None, "10.0.0.1", "10.0.0.1"),
    ],
)
def test_the_caller_address_is_the_first_forwarded_one_if_an_address(
    forwarded: str | None, remote: str, logged: str
) -> None:
    for _ in range(2):  # parsed once, then remembered: the same answer
        got = http_request(
            "POST", "/", 200, user_agent=None, forwarded_for=forwarded, remote_addr=remote
        )
        assert got["remoteIp"] == logged


def test_only_an_event_stream_s_line_counts_the_open_streams(
    make_client: Callable[..., Client], lines: Lines
) -> None:
    client = make_client()
    client.rpc("SendMessage", {"message": message("hi", "m-plain")}, version="1.0")
    streamed = open_stream(client, "SendStreamingMessage", {"message": message("hi", "m-sse")})
    list(frames(streamed))
    streamed.close()
    plain, stream = lines.of("request")
    assert "openStreams" not in plain
    assert stream["method"] == "SendStreamingMessage" and stream["openStreams"] == 1


def test_a_stream_that_breaks_off_logs_its_failure_its_reference_and_its_frames(
    make_client: Callable[..., Client], lines: Lines, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(event: object, task: object) -> None:
        raise RuntimeError("no form for this event")

    client = make_client()
    monkeypatch.setattr(V1, "stream_update", broken)  # a failure of ours after the first frame
    streamed = open_stream(client, "SendStreamingMessage", {"message": message("hi", "m-break")})
    first, error = list(frames(streamed))
    assert "task" in first.data["result"] and error.event == "error"
    reference = re.findall(r"reference (\w+)", error.data["error"]["message"])[0]
    [line] = lines.of("request")
    assert (line["outcome"], line["frames"], line["reference"]) == ("failed", 1, reference)
    assert (line["severity"], line["errorCode"], line["errorReason"]) == (
        "ERROR",
        -32603,
        "INTERNAL",
    )
    # The traceback's line is the request's too (made on the stream's thread).
    [failure] = [x for x in lines.all() if x["logger"] == "a2a.sse"]
    assert reference in failure["message"] and failure[TRACE_FIELD] == line[TRACE_FIELD]
