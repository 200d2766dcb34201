"""Whatever an agent answers, the CLI reports it or fails with one of its own errors: never a
traceback, never an exit status outside its list, and with `-o json` never anything on
stdout that is not one JSON object a line (the agent stands behind an httpx MockTransport)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from shared.client import cli
from shared.client.transport import Transport

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=12,
)
KEYS = st.sampled_from(["task", "message", "statusUpdate", "artifactUpdate", "id", "status"])
STATES = st.sampled_from(["TASK_STATE_COMPLETED", "TASK_STATE_WORKING", "TASK_STATE_FAILED"])
TASKISH = st.fixed_dictionaries(
    {"id": JSON, "contextId": JSON, "status": JSON | st.fixed_dictionaries({"state": STATES})},
    optional={"artifacts": JSON, "history": JSON},
)
RESULTS = JSON | st.dictionaries(KEYS, JSON | TASKISH, max_size=3) | TASKISH


@pytest.fixture
def card(tmp_path: Path) -> Path:
    path = tmp_path / "card.json"
    interface = {
        "url": "http://agent.test/",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    path.write_text(json.dumps({"name": "a", "supportedInterfaces": [interface]}))
    return path


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    result=RESULTS,
    command=st.sampled_from(
        [("send", "hi"), ("task", "get", "t"), ("task", "cancel", "t"), ("task", "list")]
    ),
    output=st.sampled_from(["text", "json"]),
    version=st.sampled_from(["1.0", "0.3"]),
)
def test_whatever_the_agent_answers_the_cli_exits_with_one_of_its_statuses(
    result: Any,
    command: tuple[str, ...],
    output: str,
    version: str,
    *,
    card: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body["method"] in ("GetTask", "tasks/get") and command[0] == "send":
            # A send that is not over polls: end it, or the wait would be endless.
            done = {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": done})
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result})

    def transport(**options: Any) -> Transport:
        return Transport(http=httpx.Client(transport=httpx.MockTransport(answer)), **options)

    monkeypatch.setattr(cli, "Transport", transport)
    monkeypatch.setattr(cli, "FIRST_POLL", 0.0)
    capsys.readouterr()
    options = ["-a", str(card), "-o", output, "--a2a-version", version, "--poll-interval", "0"]
    code = cli.main([*options, *command])
    out, err = capsys.readouterr()
    assert code in (0, 1), (code, out, err)
    assert "Traceback" not in err
    if code == 1:
        assert err.startswith("a2a: error: "), err
    if output == "json":
        for line in out.splitlines():
            assert isinstance(json.loads(line), dict)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(  # a task id that is no text: it was followed, and crashed the resubscription
    events=[{"task": {"id": [None], "contextId": None, "status": None}}],
    command=("send", "--stream", "hi"),
    output="text",
)
@given(
    events=st.lists(RESULTS, max_size=4),
    command=st.sampled_from([("send", "--stream", "hi"), ("task", "subscribe", "t")]),
    output=st.sampled_from(["text", "json"]),
)
def test_whatever_a_stream_carries_the_cli_exits_with_one_of_its_statuses(
    events: list[Any],
    command: tuple[str, ...],
    output: str,
    *,
    card: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    document = json.loads(card.read_text()) | {"capabilities": {"streaming": True}}
    card.write_text(json.dumps(document))

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body["method"] == "GetTask":  # the end, read whole, when the stream did not say
            done = {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": done})
        frames = "".join(
            f"id: {n}\ndata: {json.dumps({'jsonrpc': '2.0', 'id': 1, 'result': e})}\n\n"
            for n, e in enumerate(events)
        )
        return httpx.Response(200, text=frames, headers={"Content-Type": "text/event-stream"})

    def transport(**options: Any) -> Transport:
        return Transport(http=httpx.Client(transport=httpx.MockTransport(answer)), **options)

    monkeypatch.setattr(cli, "Transport", transport)
    monkeypatch.setattr(cli, "FIRST_POLL", 0.0)
    monkeypatch.setattr(cli, "MAX_RECONNECTS", 0)  # a stream that brings nothing: poll
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    capsys.readouterr()
    # A stream that keeps bringing a task not over is followed until --timeout.
    options = ["-a", str(card), "-o", output, "--poll-interval", "0", "--timeout", "0.3"]
    code = cli.main([*options, *command])
    out, err = capsys.readouterr()
    assert code in (0, 1, 5), (code, out, err)
    assert "Traceback" not in err
    if output == "json":
        for line in out.splitlines():
            assert isinstance(json.loads(line), dict)


CARDS = st.fixed_dictionaries(
    {"name": st.text(max_size=10)},
    optional={
        key: JSON
        for key in (
            "capabilities",
            "skills",
            "securitySchemes",
            "provider",
            "signatures",
            "supportedInterfaces",
            "protocolVersion",
            "url",
            "additionalInterfaces",
        )
    },
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(document=CARDS, output=st.sampled_from(["text", "json"]), key=st.booleans())
def test_whatever_card_an_agent_serves_card_get_shows_it_or_says_why_not(
    document: dict[str, Any],
    output: str,
    key: bool,
    *,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(document))
    capsys.readouterr()
    credentials = ["--api-key", "k"] if key else []
    code = cli.main(["-a", str(path), "-o", output, *credentials, "card", "get", "--verify"])
    out, err = capsys.readouterr()
    assert code in (0, 1), (code, out, err)
    assert "Traceback" not in err
    if code == 0 and output == "json":
        assert json.loads(out) == document
