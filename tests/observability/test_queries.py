"""The log lines an operator searches: real requests through the front (a GetTask of no
task, a stream that ends failed, one the client leaves, a canceled and a failed background
turn, a 0.1 client, a webhook that is down), their JSON lines captured, and every Logs
Explorer query the docs list run over them (tests/observability/logging_query.py): each
finds exactly the lines of the cases it says it finds."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from shared.app import build
from shared.model import TaskState
from shared.settings import Settings
from shared.store.memory import MemoryTaskStore
from tests.conftest import Client, wait_for_state
from tests.handlers.logs import later_seconds
from tests.observability.conftest import Lines
from tests.observability.logging_query import UnsupportedQuery, compile_query, documented
from tests.test_streaming import frames, open_stream
from tests.webhook import Webhook

Line = dict[str, Any]
HANDLER_LOGGER = "tests.handlers.logs"


def message(text: str, message_id: str) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}


class Cases:
    """The lines each case wrote (its own, the background work's, the handler's)."""

    def __init__(self, lines: Lines) -> None:
        self._lines = lines
        self.by_case: dict[str, list[Line]] = {}
        self.placeholders: dict[str, str] = {}
        self._start = 0

    def ended(self, case: str, done: Any) -> list[Line]:
        """Close `case` once its lines satisfy `done` (background lines come later)."""
        self._lines.wait(lambda got: done(got[self._start :]))
        got = self._lines.all()[self._start :]
        self._start += len(got)
        self.by_case[case] = got
        return got


def _kind(lines: list[Line], kind: str, **fields: Any) -> list[Line]:
    return [x for x in lines if x.get("kind") == kind and fields.items() <= x.items()]


def _client(handler: str, **settings: Any) -> Client:
    return Client(build(Settings(handler=handler, **settings), store=MemoryTaskStore()))


@pytest.fixture(scope="module")
def cases() -> Iterator[Cases]:
    root = logging.getLogger()
    lines, level = Lines(), root.level
    root.addHandler(lines)
    root.setLevel(logging.INFO)
    hook = Webhook()
    clients = [
        _client("tests.handlers.logs"),
        _client("tests.handlers.slow"),
        _client("tests.handlers.logs", push_allowed_hosts=("localhost",)),
    ]
    agent, slow, pushing = clients
    try:
        yield _run(Cases(lines), agent, slow, pushing, hook)
    finally:
        for client in clients:
            client.http.close()
            client.app.close()
        hook.close()
        root.removeHandler(lines)
        root.setLevel(level)


def _run(cases: Cases, agent: Client, slow: Client, pushing: Client, hook: Webhook) -> Cases:
    agent.result("SendMessage", {"message": message("hi", "m-blocking")}, version="1.0")
    cases.ended("blocking send", lambda got: _kind(got, "request"))

    agent.error("GetTask", {"id": "no-such-task"}, version="1.0")
    assert agent.http.get("/tasks/no-such-task", headers={"A2A-Version": "1.0"}).status_code == 404
    cases.ended("task not found", lambda got: len(_kind(got, "request")) == 2)

    streamed = open_stream(agent, "SendStreamingMessage", {"message": message("fail later", "m-s")})
    events = list(frames(streamed))
    cases.placeholders["reference"] = re.findall(r"reference (\w+)", str(events[-1].data))[0]
    cases.ended("stream that fails", lambda got: _kind(got, "request"))

    streamed = open_stream(slow, "SendStreamingMessage", {"message": message("steps=8", "m-l")})
    next(frames(streamed))
    streamed.close()  # the client goes away after the first frame
    cases.ended("stream the client leaves", lambda got: _kind(got, "request"))

    background = {"returnImmediately": True}
    params = {"message": message("steps=400", "m-cancel"), "configuration": background}
    task = slow.result("SendMessage", params, version="1.0")["task"]
    store = slow.app.service.ports.store
    wait_for_state(store, "anonymous", task["id"], TaskState.WORKING)
    slow.result("CancelTask", {"id": task["id"]}, version="1.0")
    cases.ended("canceled background turn", lambda got: _kind(got, "worker"))

    params = {"message": message("fail", "m-bg-fail"), "configuration": background}
    agent.result("SendMessage", params, version="1.0")
    cases.ended("failed background turn", lambda got: _kind(got, "worker"))

    v01 = {"role": "user", "parts": [{"type": "text", "text": "hi"}]}
    agent.result("tasks/send", {"id": "task-of-0.1", "message": v01})
    agent.result("tasks/get", {"id": "task-of-0.1"})
    cases.ended("0.1 client", lambda got: len(_kind(got, "request")) == 2)

    hook.down()
    config = {"taskPushNotificationConfig": {"url": hook.url()}}
    params = {"message": message("hi", "m-push"), "configuration": config}
    pushing.result("SendMessage", params, version="1.0")
    cases.ended("webhook down", lambda got: _kind(got, "deliver", outcome="failed"))
    return cases


# What each documented query finds: the cases whose lines it matches, exactly.
FINDS = {
    'jsonPayload.kind="worker" AND jsonPayload.turnState="failed"': {"failed background turn"},
    'jsonPayload.kind="worker" AND jsonPayload.outcome="canceled"': {"canceled background turn"},
    'jsonPayload.kind="request" AND jsonPayload.method="SendMessage"': {
        "blocking send",
        "canceled background turn",
        "failed background turn",
        "0.1 client",  # tasks/send is logged by its 1.0 name
        "webhook down",
    },
    'jsonPayload.kind="request" AND jsonPayload.method="SendStreamingMessage"': {
        "stream that fails",
        "stream the client leaves",
    },
    'jsonPayload.outcome="disconnected"': {"stream the client leaves"},
    'jsonPayload.kind="worker"': {"canceled background turn", "failed background turn"},
    'jsonPayload.kind="deliver" AND jsonPayload.outcome="failed"': {"webhook down"},
    "jsonPayload.openStreams>0": {"stream that fails", "stream the client leaves"},
    'jsonPayload.reference="<reference>"': {"stream that fails"},
    'jsonPayload.errorReason="TASK_NOT_FOUND"': {"task not found"},
    'jsonPayload.kind="request" AND severity>=WARNING': {"task not found", "stream that fails"},
    "severity>=ERROR": {"stream that fails", "failed background turn"},
    'jsonPayload.dialect="0.1"': {"0.1 client"},
}


def _filled(query: str, placeholders: dict[str, str]) -> str:
    def fill(found: re.Match[str]) -> str:
        assert found[1] in placeholders, f"no value for the placeholder {found[0]} of {query}"
        return placeholders[found[1]]

    return re.sub(r"<(\w+)>", fill, query)


def test_every_documented_query_finds_the_lines_it_says_and_no_others(cases: Cases) -> None:
    listed = list(documented())
    queries = {query for _, query, _ in listed}
    assert queries == set(FINDS), "the docs' queries and this test's differ"
    for path, query, what in listed:
        matches = compile_query(_filled(query, cases.placeholders))
        found = {case for case, got in cases.by_case.items() if any(map(matches, got))}
        assert found == FINDS[query], f"{path.name}: {query}  # {what}"


def test_a_client_s_error_is_a_warning_naming_its_code_and_reason_in_either_binding(
    cases: Cases,
) -> None:
    rpc, rest = _kind(cases.by_case["task not found"], "request")
    assert (rpc["httpRequest"]["status"], rest["httpRequest"]["status"]) == (200, 404)
    for line in (rpc, rest):
        assert (line["severity"], line["errorCode"], line["errorReason"]) == (
            "WARNING",
            -32001,
            "TASK_NOT_FOUND",
        )
    assert rpc["message"] == "request POST / 200 GetTask TASK_NOT_FOUND"


def test_a_stream_s_line_is_written_at_its_end_with_its_frames_state_and_reference(
    cases: Cases,
) -> None:
    [line] = _kind(cases.by_case["stream that fails"], "request")
    # The whole stream, not its start: the handler worked for a while before it failed.
    assert line["latencySeconds"] >= later_seconds
    assert (line["outcome"], line["turnState"]) == ("ended", "failed")
    assert line["reference"] == cases.placeholders["reference"]
    assert line["frames"] >= 3 and line["severity"] == "ERROR"  # the handler's failure: ours
    # The stream's own lines (the handler's) carry its trace, though made on other threads.
    trace = "logging.googleapis.com/trace"
    handled = [x for x in cases.by_case["stream that fails"] if x["logger"] == HANDLER_LOGGER]
    assert handled and handled[0][trace] == line[trace]


def test_a_stream_the_client_leaves_logs_that_it_left(cases: Cases) -> None:
    [line] = _kind(cases.by_case["stream the client leaves"], "request")
    assert line["outcome"] == "disconnected" and line["severity"] == "INFO"
    assert line["frames"] >= 1


def test_a_worker_turn_s_outcome_says_how_it_ended(cases: Cases) -> None:
    [canceled] = _kind(cases.by_case["canceled background turn"], "worker")
    assert (canceled["turnState"], canceled["outcome"]) == ("canceled", "canceled")
    [failed] = _kind(cases.by_case["failed background turn"], "worker")
    assert (failed["turnState"], failed["outcome"], failed["severity"]) == (
        "failed",
        "failed",
        "ERROR",
    )
    assert re.fullmatch(r"\w{8}", failed["reference"])


def test_a_line_names_the_version_the_client_spoke(cases: Cases) -> None:
    send, get = _kind(cases.by_case["0.1 client"], "request")
    assert (send["method"], send["dialect"]) == ("SendMessage", "0.1")
    assert (get["method"], get["dialect"]) == ("GetTask", "0.1")


LINE = {
    "severity": "WARNING",
    "kind": "request",
    "frames": 3,
    "flag": True,
    "httpRequest": {"status": 404},
}


@pytest.mark.parametrize(
    ("query", "matches"),
    [
        ('jsonPayload.kind="REQUEST"', True),  # Cloud Logging compares strings in any case
        ('jsonPayload.kind="worker"', False),
        ("jsonPayload.frames>2 AND jsonPayload.frames>=3", True),
        ("jsonPayload.frames>3", False),
        ("jsonPayload.missing>0", False),
        ("httpRequest.status>=400", True),
        ("severity>=WARNING", True),
        ("severity>=ERROR", False),
        ('severity="WARNING"', True),
    ],
)
def test_the_evaluator_reads_the_subset_as_cloud_logging_does(query: str, matches: bool) -> None:
    assert compile_query(query)(LINE) is matches


@pytest.mark.parametrize(
    "query",
    [
        'jsonPayload.kind="request" OR jsonPayload.kind="worker"',
        'NOT jsonPayload.kind="request"',
        'jsonPayload.kind:"req"',
        'jsonPayload.kind!="request"',
        "jsonPayload.frames<3",
        '(jsonPayload.kind="request")',
        'jsonPayload.kind>"a"',
        'jsonPayload.frames="3"',
        "jsonPayload.kind>0",
        "jsonPayload.flag=1",
        "jsonPayload.severity>=WARNING",
        'resource.type="cloud_run_revision"',
        "severity>=LOUD",
    ],
)
def test_the_evaluator_refuses_what_it_does_not_know(query: str) -> None:
    with pytest.raises(UnsupportedQuery):
        compile_query(query)(LINE)
