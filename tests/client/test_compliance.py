"""The evidence of docs/cli-compliance.md: each Tier 1 requirement of the A2A CLI
specification v0.2 the report marks passed is exercised here, by the installed `a2a` script
in its own process against a real served agent (functions-framework, as `make run` serves it,
with the suite's CLI agent: the sample's phone order, plus tasks that fail, are rejected,
wait, or answer with a message), or a scripted agent where the kit's cannot be made to do
it (a tenant, an UNSPECIFIED state, a failing stream). `test_the_report_claims_what_is_tested`
holds the report to this module: a row marked passed with no test here fails the suite, and
so does a test claiming a row the report does not mark passed."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from shared.identity.api_key import hashed
from tests.client.scripted import Failure, ScriptedAgent, Stream, card, task
from tests.conftest import ROOT, Server, free_port

A2A = Path(sys.executable).with_name("a2a")
REPORT = ROOT / "docs" / "cli-compliance.md"
CLAIMED: dict[str, list[str]] = {}
Test = TypeVar("Test", bound=Callable[..., None])
FIELD = re.compile(r"^[A-Z][A-Za-z ]*: \S")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def claims(*requirements: str) -> Callable[[Test], Test]:
    """Mark a test as evidence for these requirement identifiers."""

    def mark(test: Test) -> Test:
        for requirement in requirements:
            CLAIMED.setdefault(requirement, []).append(test.__name__)
        return test

    return mark


@dataclass
class Done:
    code: int
    out: str
    err: str

    def field(self, label: str) -> list[str]:
        return re.findall(rf"^{re.escape(label)}: (.*)$", self.out, re.MULTILINE)

    def json(self) -> Any:
        assert self.out.count("\n") == 1, self
        return json.loads(self.out)


@pytest.fixture(scope="module")
def served() -> Iterator[Server]:
    """The suite's CLI agent, long-running: a blocking send answers after half a second, with
    the task as it stands, so a send that waits longer polls."""
    server = Server(
        {
            "A2A_HANDLER": "tests.client.long_agent",
            "A2A_BLOCKING_BUDGET_SECONDS": "0.5",
            "A2A_STREAM_SECONDS": "2",
        }
    )
    yield server
    server.stop()


@pytest.fixture
def scripted() -> Iterator[ScriptedAgent]:
    served = ScriptedAgent()
    yield served
    served.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The HOME of the CLI's processes: a test sees whatever it writes there."""
    path = tmp_path / "home"
    path.mkdir()
    return path


class Runner:
    """`a2a ARGS...` as its own process, the agent's card from A2ACLI_AGENT_CARD."""

    def __init__(self, card_ref: str, home: Path) -> None:
        self.card_ref = card_ref
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("A2ACLI_")}
        self.env |= {"HOME": str(home), "A2ACLI_AGENT_CARD": card_ref}

    def __call__(
        self, *args: str, stdin: str = "", env: dict[str, str] | None = None, timeout: float = 60
    ) -> Done:
        done = subprocess.run(
            [str(A2A), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env | (env or {}),
            check=False,
        )
        return Done(done.returncode, done.stdout, done.stderr)

    def ok(self, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> Done:
        done = self(*args, stdin=stdin, env=env)
        assert done.code == 0, done
        return done


@pytest.fixture
def a2a(served: Server, home: Path) -> Runner:
    return Runner(served.url, home)


@pytest.fixture
def quick(agent: Server, home: Path) -> Runner:
    """The same agent, its turns in the request (tests/client/conftest.py): one that answers
    with a message and no task does so."""
    return Runner(agent.url, home)


def task_of(done: Done) -> str:
    ids = done.field("Task ID")
    assert ids, done
    return ids[0]


# -- card get, transport, version ----------------------------------------------------------


@claims("A2ACLI_CARD_GET_001")
def test_card_get_resolves_a_host_a_url_and_a_file(
    a2a: Runner, served: Server, tmp_path: Path
) -> None:
    selected = f"JSONRPC 1.0 {served.url}/"
    # A2ACLI_AGENT_CARD=http://localhost:PORT, as issue 37 shows it.
    assert a2a.ok("card", "get").field("Selected Interface") == [selected]
    bare = a2a.ok("card", "get", "--agent-card", f"localhost:{served.port}")
    assert bare.field("Selected Interface") == [selected]
    full = f"{served.url}/.well-known/agent-card.json"
    done = a2a.ok("card", "get", "-a", full)
    assert done.field("Name") == ["A2A agent"] and done.field("Streaming") == ["true"]
    assert "JSONRPC 1.0" in " ".join(done.field("Interface"))
    assert done.field("Skill") == ["cli-test: CLI test"]
    saved = tmp_path / "card.json"
    saved.write_text(a2a.ok("-o", "json", "card", "get").out)
    for ref in (str(saved), f"file://{saved}"):
        assert a2a.ok("card", "get", "-a", ref).field("Selected Interface") == [selected]
    # The card chose the transport: a send through the file's card reaches the agent.
    assert a2a.ok("send", "-a", str(saved), "--text", "hi").field("State") == ["COMPLETED"]


@claims("A2ACLI_TX_001", "A2ACLI_TX_002")
def test_the_first_interface_it_speaks_is_used_and_transport_is_repeatable(
    a2a: Runner, served: Server, tmp_path: Path
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/"
    document = json.loads(a2a.ok("-o", "json", "card", "get").out)
    for key in ("protocolVersion", "url", "preferredTransport", "additionalInterfaces"):
        document.pop(key, None)  # a 1.0-only card

    def with_order(*urls: str) -> str:
        interfaces = [
            {"url": u, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"} for u in urls
        ]
        grpc = {"url": dead, "protocolBinding": "GRPC", "protocolVersion": "1.0"}
        path = tmp_path / f"card-{uuid.uuid4().hex}.json"
        path.write_text(json.dumps({**document, "supportedInterfaces": [grpc, *interfaces]}))
        return str(path)

    good_first = with_order(f"{served.url}/", dead)
    assert a2a.ok("send", "-a", good_first, "hi").field("State") == ["COMPLETED"]
    dead_first = a2a("send", "-a", with_order(dead, f"{served.url}/"), "hi")
    assert dead_first.code == 3 and f"cannot connect to {dead}" in dead_first.err
    # --transport, repeated, first preferred: a binding it does not speak is passed over.
    preferred = a2a("send", "-a", good_first, "--transport", "GRPC", "--transport", "JSONRPC", "x")
    assert preferred.code == 0, preferred
    assert a2a("send", "--transport", "SMOKE-SIGNALS", "x").code == 2


@claims("A2ACLI_TX_003")
def test_the_interfaces_tenant_is_sent_exactly_in_every_request(
    scripted: ScriptedAgent, home: Path
) -> None:
    scripted.serve_card(
        card(
            f"{scripted.url}/",
            supportedInterfaces=[
                {
                    "url": f"{scripted.url}/",
                    "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0",
                    "tenant": "acme/EU",
                }
            ],
        )
    )
    scripted.answer("SendMessage", {"task": task("WORKING")})
    scripted.answer("GetTask", task("COMPLETED"))
    run = Runner(scripted.url, home)
    run.ok("send", "hi")
    run.ok("task", "get", "t-1")
    posts = [r.body for r in scripted.requests if r.method == "POST"]
    assert len(posts) >= 3
    assert all(post["params"]["tenant"] == "acme/EU" for post in posts)
    # A card that declares none gets none.
    scripted.serve_card(card(f"{scripted.url}/"))
    run.ok("task", "get", "t-1")
    assert "tenant" not in scripted.requests[-1].body["params"]


@claims("A2ACLI_VER_001")
def test_the_version_is_signalled_on_every_request_and_never_below_1_0_unasked(
    a2a: Runner, scripted: ScriptedAgent, home: Path
) -> None:
    debug = a2a.ok("--debug", "send", "--stream", "steps=1")
    requests = [
        line for line in debug.err.splitlines() if re.match(r"a2a: debug: > (GET|POST) ", line)
    ]
    assert len(requests) >= 2
    assert all('"A2A-Version": "1.0"' in line for line in requests), requests
    # A 0.3-only agent: refused, not spoken to in 0.3, unless asked.
    scripted.serve_card({"name": "Old", "protocolVersion": "0.3.0", "url": f"{scripted.url}/"})
    scripted.answer(
        "message/send",
        {"kind": "task", "id": "t-1", "contextId": "c-1", "status": {"state": "completed"}},
    )
    old = Runner(scripted.url, home)
    refused = old("send", "hi")
    assert refused.code == 1 and "VersionNotSupportedError" in refused.err, refused
    assert "--a2a-version 0.3" in refused.err
    assert [r.method for r in scripted.requests] == ["GET"]
    assert old.ok("send", "--a2a-version", "0.3", "hi").field("State") == ["COMPLETED"]


# -- send -----------------------------------------------------------------------------------


@claims("A2ACLI_SEND_001", "A2ACLI_EXIT_002")
def test_send_starts_an_interaction_and_a_failed_task_exits_0_with_a_warning(
    a2a: Runner,
) -> None:
    done = a2a.ok("send", "--text", "hello")
    assert done.field("State") == ["COMPLETED"] and "Text:\necho: hello\n" in done.out
    # Issue 37: `a2a send --text fail` against an agent that fails exits 0 with a warning.
    for text, state, warning in (
        ("fail", "FAILED", "the task FAILED: failed on purpose"),
        ("reject", "REJECTED", "the agent REJECTED the task"),
        ("I need a new phone", "INPUT_REQUIRED", "the task waits for input (INPUT_REQUIRED)"),
        ("sign in", "AUTH_REQUIRED", "the task waits for authorization (AUTH_REQUIRED)"),
    ):
        for mode in ([], ["-o", "json"], ["--stream"]):
            done = a2a("send", *mode, "--text", text)
            assert done.code == 0, done
            assert done.err.startswith(f"a2a: warning: {warning}"), done.err
            assert state in done.out


@claims("A2ACLI_SEND_002", "A2ACLI_OUT_006")
def test_send_waits_by_default_and_async_returns_the_ids_at_once(a2a: Runner) -> None:
    # The agent answers a blocking send after 0.5 s as the task stands: the CLI polls on.
    waited = a2a.ok("send", "steps=3", "delay=0.3")
    assert waited.field("State") == ["COMPLETED"] and "waiting for task" in waited.err
    for flag in ("--async", "--no-wait", "--return-immediately"):
        started = time.monotonic()
        done = a2a.ok("send", flag, "steps=3", "delay=1")
        assert time.monotonic() - started < 3
        assert done.field("State")[0] in ("SUBMITTED", "WORKING")
        assert done.field("Task ID") and done.field("Context ID")
    as_json = a2a.ok("-o", "json", "send", "--async", "steps=3", "delay=1").json()
    assert as_json["task"]["id"] and as_json["task"]["contextId"]


@claims("A2ACLI_SEND_003")
def test_stream_consumes_events_falls_back_without_streaming_and_a_message_ends_cleanly(
    a2a: Runner, quick: Runner, scripted: ScriptedAgent, home: Path, tmp_path: Path
) -> None:
    streamed = a2a.ok("-o", "json", "send", "--stream", "steps=3", "delay=0.1")
    events = [json.loads(line) for line in streamed.out.splitlines()]
    assert "task" in events[0] and sum("statusUpdate" in e for e in events) >= 4
    # A card without the streaming capability: one answer, no hang.
    document = json.loads(a2a.ok("-o", "json", "card", "get").out)
    document["capabilities"]["streaming"] = False
    quiet = tmp_path / "card.json"
    quiet.write_text(json.dumps(document))
    done = a2a("-o", "json", "send", "--stream", "-a", str(quiet), "hi", timeout=30)
    assert done.code == 0 and "declares no streaming" in done.err, done
    assert [json.loads(line)["task"]["status"]["state"] for line in done.out.splitlines()] == [
        "TASK_STATE_COMPLETED"
    ]
    # A message and no task: exactly one object, exit 0. (The kit's agent streams a reply
    # as a task that completes with it: the scripted one streams the message alone.)
    reply = quick.ok("-o", "json", "send", "reply")
    assert reply.json()["message"]["parts"] == [{"text": "a message, no task"}]
    assert reply.err == ""
    message = {"messageId": "m-1", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}
    scripted.serve_card(card(f"{scripted.url}/"))
    scripted.answer("SendStreamingMessage", Stream([{"message": message}]))
    streamed_reply = Runner(scripted.url, home).ok("-o", "json", "send", "--stream", "hi")
    assert streamed_reply.json() == {"message": message} and streamed_reply.err == ""


@claims("A2ACLI_SEND_004", "A2ACLI_TASK_GET_001", "A2ACLI_OUT_005")
def test_artifacts_are_rendered_never_dropped_and_text_is_fields_and_blocks(
    a2a: Runner, tmp_path: Path
) -> None:
    done = a2a.ok("send", "files")
    shown = a2a.ok("task", "get", task_of(done))
    for out in (done.out, shown.out):
        assert out.count("File Name: ../../escape.txt\n") == 2
        assert "Size: 5 bytes" in out and "Size: 6 bytes" in out
        assert 'Data:\n{\n  "answer": 42,' in out
        assert "Text:\nbell\\x07 and \\x1b[2J clear\n\n" in out
        assert not CONTROL.search(out)
        _fields_and_blocks(out)
    assert not (tmp_path / "escape.txt").exists()  # a file part is written only when asked
    saved = a2a.ok("--files", str(tmp_path / "files"), "task", "get", task_of(done))
    assert (tmp_path / "files" / "escape.txt").read_bytes() == b"first"
    assert saved.field("Saved To")
    as_json = a2a.ok("-o", "json", "task", "get", task_of(done)).json()
    assert len(as_json["artifacts"]) == 4  # the protocol's Task, unchanged
    history = a2a.ok("task", "get", task_of(done), "--history", "3")
    assert "Role: user\nText:\nfiles\n" in history.out
    # An interactive mode with no terminal degrades to text and never prompts.
    chat = a2a.ok("chat", stdin="hello\n")
    assert "Text:\necho: hello\n" in chat.out and chat.err == ""
    _fields_and_blocks(chat.out)


def _fields_and_blocks(out: str) -> None:
    lines = out.split("\n")
    index = 0
    while index < len(lines) - 1:
        line = lines[index]
        if line.endswith(":") and FIELD.match(line + " x"):  # a block, to its blank line
            index = lines.index("", index + 1) + 1
        elif line == "":
            index += 1  # between two objects
        else:
            assert FIELD.match(line), line
            index += 1


@claims("A2ACLI_SEND_005", "A2ACLI_SEND_006")
def test_parts_are_ordered_repeatable_and_typed_as_given(a2a: Runner, tmp_path: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text("hi")
    blob = tmp_path / "blob"
    blob.write_bytes(b"\x00\x01")
    data = tmp_path / "d.json"
    data.write_text('{"n": 1}')
    done = a2a.ok(
        "send",
        "--text", "first",
        "--file", str(note),
        "--file", str(blob), "--media-type", "application/pdf",
        "--data", str(data),
        "--data", "-",
        "--text", "last", "--media-type", "text/markdown",
        "--file", "https://example.com/report.pdf",
        stdin="[1, 2]",
    )  # fmt: skip
    sent = a2a.ok("-o", "json", "task", "get", task_of(done), "--history", "1").json()
    parts = sent["history"][0]["parts"]
    assert [p.get("text") or p.get("filename") or p.get("data") for p in parts] == [
        "first",
        "note.txt",
        "blob",
        {"n": 1},
        [1, 2],
        "last",
        "report.pdf",
    ]
    assert parts[1]["mediaType"] == "text/plain"  # inferred: none given
    assert parts[2]["mediaType"] == "application/pdf"  # given: not application/octet-stream
    assert parts[5]["mediaType"] == "text/markdown"
    assert parts[6]["url"] == "https://example.com/report.pdf" and "raw" not in parts[6]
    misplaced = a2a("send", "--media-type", "text/plain", "--text", "x")
    assert misplaced.code == 2 and "A2ACLI_ERR_USAGE" in misplaced.err


# -- tasks ----------------------------------------------------------------------------------


@claims("A2ACLI_TASK_CANCEL_001")
def test_cancel_reports_the_state_and_is_idempotent(a2a: Runner) -> None:
    started = task_of(a2a.ok("send", "--async", "wait"))
    assert a2a.ok("task", "cancel", started).field("State") == ["CANCELED"]
    again = a2a.ok("task", "cancel", started)
    assert again.field("State") == ["CANCELED"] and "canceled already" in again.err
    assert a2a.ok("-o", "json", "task", "cancel", started).json()["status"]["state"] == (
        "TASK_STATE_CANCELED"
    )
    ended = task_of(a2a.ok("send", "hi"))
    refused = a2a("task", "cancel", ended)
    assert refused.code == 1 and "TaskNotCancelableError" in refused.err
    assert "(the task is COMPLETED)" in refused.err


@claims("A2ACLI_TASK_POLL_001", "A2ACLI_TASK_POLL_003")
def test_task_get_reads_once_or_polls_to_the_end_or_a_question(a2a: Runner) -> None:
    started = task_of(a2a.ok("send", "--async", "steps=4", "delay=0.3"))
    once = a2a.ok("task", "get", started)
    assert once.field("State")[0] in ("SUBMITTED", "WORKING")
    assert a2a.ok("task", "get", "--wait", started).field("State") == ["COMPLETED"]
    asked = task_of(a2a.ok("send", "--async", "I need a new phone"))
    began = time.monotonic()
    waited = a2a.ok("task", "get", "--wait", asked, "--watch")
    assert waited.field("State") == ["INPUT_REQUIRED"] and time.monotonic() - began < 10


@claims("A2ACLI_TASK_POLL_003")
def test_an_unspecified_state_is_polled_on_and_reported_as_received(
    scripted: ScriptedAgent, home: Path
) -> None:
    scripted.serve_card(card(f"{scripted.url}/"))
    scripted.answer(
        "GetTask", task("UNSPECIFIED"), task("UNSPECIFIED"), task("UNSPECIFIED"), task("COMPLETED")
    )
    run = Runner(scripted.url, home)
    assert run.ok("task", "get", "t-1").field("State") == ["UNSPECIFIED"]
    done = run.ok("task", "get", "--wait", "--poll-interval", "0.2s", "t-1")
    assert done.field("State") == ["COMPLETED"]
    assert sum(r.body["method"] == "GetTask" for r in scripted.requests if r.body) == 4


@claims("A2ACLI_TASK_POLL_002")
def test_polling_is_bounded_by_its_interval_and_timeout(a2a: Runner) -> None:
    started = task_of(a2a.ok("send", "--async", "wait"))
    began = time.monotonic()
    done = a2a(
        "--debug", "task", "get", "--wait", started, "--poll-interval", "0.5s", "--timeout", "2"
    )
    took = time.monotonic() - began
    assert done.code == 5 and "A2ACLI_ERR_TIMEOUT" in done.err, done
    assert 2 <= took < 10
    polls = done.err.count('"method": "GetTask"')
    # 0.25 s, then 0.5 s each (the interval): at most 6 in 2 s, never a busy loop.
    assert 3 <= polls <= 6, polls
    a2a.ok("task", "cancel", started)
    timed = a2a("-o", "json", "send", "--timeout", "1s", "wait")
    assert timed.code == 5 and timed.json()["error"]["code"] == "A2ACLI_ERR_TIMEOUT"
    # A stream whose events keep coming past it: --timeout ends the wait all the same.
    streamed = a2a("send", "--stream", "--timeout", "1", "steps=20", "delay=0.2")
    assert streamed.code == 5 and "A2ACLI_ERR_TIMEOUT" in streamed.err, streamed
    assert streamed.field("State")[-1] == "WORKING"


@claims("A2ACLI_TASK_POLL_002")
def test_an_interrupted_wait_keeps_the_task_id_it_printed(a2a: Runner) -> None:
    process = subprocess.Popen(
        [str(A2A), "send", "wait"],
        env=a2a.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    line = process.stderr.readline()  # printed once the send answered: polling begins
    found = re.match(r"a2a: waiting for task (\S+) ", line)
    assert found, line
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130 and "a2a: interrupted" in err
    assert f"a2a task get --wait {found.group(1)}" in line
    a2a.ok("task", "cancel", found.group(1))


@claims("A2ACLI_TASK_POLL_004", "A2ACLI_OUT_003")
def test_a_failing_stream_falls_back_to_polling_and_a_final_error_is_a_line(
    scripted: ScriptedAgent, home: Path
) -> None:
    scripted.serve_card(card(f"{scripted.url}/"))
    scripted.answer("SendStreamingMessage", Stream([{"task": task("WORKING")}], error="gone"))
    scripted.answer("GetTask", task("WORKING"), task("COMPLETED"))
    run = Runner(scripted.url, home)
    done = run.ok("-o", "json", "send", "--stream", "hi")
    lines = [json.loads(line) for line in done.out.splitlines()]
    assert lines[0] == {"task": task("WORKING")}
    assert lines[-1]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "polling task t-1 instead" in done.err
    # A stream that ends in an error: its last line is the error object.
    scripted.answers["GetTask"].clear()
    scripted.answer("GetTask", Failure(-32001, "Task not found"))
    failed = run("-o", "json", "send", "--stream", "hi")
    assert failed.code == 1
    *events, last = [json.loads(line) for line in failed.out.splitlines()]
    assert events == [{"task": task("WORKING")}]
    assert last["error"]["code"] == "TaskNotFoundError" and last["error"]["a2aCode"] == -32001


# -- interaction state ----------------------------------------------------------------------


@claims("A2ACLI_INTERACT_001", "A2ACLI_INTERACT_003")
def test_a_context_is_continued_when_given_and_no_id_is_invented(a2a: Runner) -> None:
    first = a2a.ok("-o", "json", "--debug", "send", "hello").json()["task"]
    sent = _sent_message(a2a("--debug", "send", "hello").err)
    assert "taskId" not in sent and "contextId" not in sent  # the server assigns them
    context = first["contextId"]
    second = a2a.ok("-o", "json", "send", "--context-id", context, "again").json()["task"]
    assert second["contextId"] == context and second["id"] != first["id"]
    assert (
        _sent_message(a2a("--debug", "send", "--context-id", context, "x").err)["contextId"]
        == context
    )


def _sent_message(debug: str) -> dict[str, Any]:
    for line in debug.splitlines():
        if line.startswith("a2a: debug: > {") and '"SendMessage"' in line:
            body: dict[str, Any] = json.loads(line.removeprefix("a2a: debug: > "))
            return dict(body["params"]["message"])
    raise AssertionError(debug)


@claims("A2ACLI_INTERACT_002", "A2ACLI_INTERACT_004")
def test_a_task_is_continued_by_id_and_a_refused_id_starts_nothing(a2a: Runner) -> None:
    asked = a2a.ok("send", "I need a new phone")
    task_id = task_of(asked)
    assert asked.field("State") == ["INPUT_REQUIRED"] and asked.field("Context ID")
    resume = asked.field("Resume")[0]
    assert resume == f"a2a send --agent-card {a2a.card_ref} --task-id {task_id} --text REPLY"
    # The resume command, pasted, with the reply written in.
    words = shlex.split(resume.replace("REPLY", "Android"))
    done = a2a.ok(*words[1:])
    assert task_of(done) == task_id and done.field("State") == ["COMPLETED"]
    # With its context too.
    second = a2a.ok("send", "I need a new phone")
    both = ("--task-id", task_of(second), "--context-id", second.field("Context ID")[0])
    answered = a2a.ok("send", *both, "iPhone")
    assert task_of(answered) == task_of(second) and answered.field("State") == ["COMPLETED"]
    # A wrong pair, an unknown id: an error naming the protocol's, and no new task.
    third = task_of(a2a.ok("send", "I need a new phone"))
    before = {t["id"] for t in a2a.ok("-o", "json", "task", "list", "--all").json()["tasks"]}
    other = str(uuid.uuid4())
    for args in (
        ("--task-id", third, "--context-id", other),
        ("--task-id", other),
        ("--stream", "--task-id", other),
    ):
        refused = a2a("send", *args, "hi")
        assert refused.code == 1 and refused.out == "", refused
        assert re.search(r"a2a: error: \w+Error: Send\w*Message", refused.err), refused.err
        assert "--debug shows the exchange" in refused.err
    after = {t["id"] for t in a2a.ok("-o", "json", "task", "list", "--all").json()["tasks"]}
    assert after == before
    assert a2a.ok("task", "get", third).field("State") == ["INPUT_REQUIRED"]


@claims("A2ACLI_INTERACT_005", "A2ACLI_CONFIG_001")
def test_nothing_is_remembered_between_runs(a2a: Runner, home: Path) -> None:
    asked = task_of(a2a.ok("send", "I need a new phone"))
    answer = a2a.ok("send", "Android")  # no --task-id: a new task, not the waiting one
    assert task_of(answer) != asked and "echo: Android" in answer.out
    assert list(home.rglob("*")) == []  # nothing written under HOME
    assert a2a("send", "--continue", "x").code == 2


# -- output and errors ----------------------------------------------------------------------


@claims("A2ACLI_OUT_001", "A2ACLI_OUT_002")
def test_every_mode_names_the_task_its_context_and_state_and_json_is_one_document(
    a2a: Runner,
) -> None:
    text = a2a.ok("send", "fail")
    assert text.field("Task ID") and text.field("Context ID") and text.field("State")
    single = a2a.ok("-o", "json", "send", "steps=3", "delay=0.2")  # polled to its end
    document = single.json()["task"]
    assert document["id"] and document["contextId"]
    assert document["status"]["state"] == "TASK_STATE_COMPLETED" and document["artifacts"]
    assert "waiting for task" in single.err  # diagnostics on stderr only
    lines = a2a.ok("-o", "json", "send", "--stream", "steps=2").out.splitlines()
    final = json.loads(lines[-1])["statusUpdate"]
    assert final["taskId"] and final["contextId"] and final["status"]["state"]
    streamed_text = a2a.ok("send", "--stream", "steps=1").out.strip().split("\n\n")[-1].strip()
    assert re.search(r"^Task ID: .+\nContext ID: .+\nState: COMPLETED$", streamed_text)


@claims("A2ACLI_OUT_004", "A2ACLI_EXIT_001")
def test_errors_carry_their_code_and_exit_status_agrees(
    a2a: Runner, served: Server, home: Path
) -> None:
    for version in ("1.0", "0.3"):
        missing = a2a("-o", "json", "--a2a-version", version, "task", "get", "nope")
        error = missing.json()["error"]
        assert missing.code == 1 and error["code"] == "TaskNotFoundError"
        assert error["a2aCode"] == -32001 and error["message"]
    down = f"http://127.0.0.1:{free_port()}"
    cases = [
        (("send",), 2, "A2ACLI_ERR_USAGE"),
        (("--output", "yaml", "send", "x"), 2, "A2ACLI_ERR_USAGE"),
        (("card", "get", "-a", down), 3, "A2ACLI_ERR_UNREACHABLE"),
        (("card", "get", "-a", f"{served.url}/nowhere"), 3, "A2ACLI_ERR_CARD_NOT_FOUND"),
        (("card", "get", "-a", str(home)), 3, "A2ACLI_ERR_CARD_NOT_FOUND"),
    ]
    for args, code, name in cases:
        done = a2a("-o", "json", *args)
        assert done.code == code and done.json()["error"]["code"] == name, (args, done)
        assert done.json()["error"]["hint"]
        assert a2a(*args).err.startswith(f"a2a: error: {name}: ")
    invalid = home / "card.json"
    invalid.write_text("[1]")
    done = a2a("-o", "json", "card", "get", "-a", str(invalid))
    assert done.code == 1 and done.json()["error"]["code"] == "A2ACLI_ERR_CARD_INVALID"
    assert a2a("send", "--timeout", "0.5", "wait").code == 5


# -- authentication -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def locked() -> Iterator[tuple[Server, str]]:
    key = "k-" + uuid.uuid4().hex
    env = {"A2A_AUTH": "api-key", "A2A_API_KEYS": f"ann:{hashed(key)}"}
    server = Server({"A2A_HANDLER": "tests.client.agent", **env})
    yield server, key
    server.stop()


@claims("A2ACLI_AUTH_001", "A2ACLI_AUTH_002")
def test_credentials_from_flags_or_variables_per_the_cards_scheme(
    locked: tuple[Server, str], scripted: ScriptedAgent, home: Path
) -> None:
    server, key = locked
    run = Runner(server.url, home)
    missing = run("send", "hi")
    assert missing.code == 4 and "A2ACLI_ERR_CREDENTIALS_MISSING" in missing.err
    assert run.ok("send", "--api-key", key, "hi").field("State") == ["COMPLETED"]
    assert run("send", "hi", env={"A2ACLI_API_KEY": key}).code == 0
    # The flag wins over the variable.
    refused = run("send", "--api-key", "wrong", "hi", env={"A2ACLI_API_KEY": key})
    assert refused.code == 4 and "A2ACLI_ERR_AUTH_FAILED" in refused.err
    assert run("send", "--api-key", key, "hi", env={"A2ACLI_API_KEY": "wrong"}).code == 0
    # A bearer token, and a service parameter: separate, each where it belongs.
    scripted.serve_card(card(f"{scripted.url}/"))
    scripted.answer("SendMessage", {"task": task("COMPLETED")})
    other = Runner(scripted.url, home)
    other.ok("send", "--svc-param", "X-Trace-Id:abc123", "hi", env={"A2ACLI_BEARER": "tok"})
    post = next(r for r in scripted.requests if r.method == "POST")
    assert post.headers["Authorization"] == "Bearer tok" and post.headers["X-Trace-Id"] == "abc123"
    helped = other.ok("send", "--help").out
    assert "prefer A2ACLI_API_KEY" in helped and "prefer A2ACLI_BEARER" in helped
    svc_help = re.search(r"--svc-param KEY:VALUE\s+(.*?)\n  -", helped, re.DOTALL)
    assert svc_help and not re.search(r"auth|credential", svc_help.group(1), re.IGNORECASE)


@claims("A2ACLI_AUTH_003", "A2ACLI_AUTH_004")
def test_insecure_warns_and_credentials_never_reach_the_log(
    locked: tuple[Server, str], home: Path
) -> None:
    server, key = locked
    run = Runner(server.url, home)
    insecure = run.ok("--insecure", "--api-key", key, "card", "get")
    assert insecure.err.startswith("a2a: warning: --insecure: TLS certificates are not verified")
    assert "credentials sent can be read" in insecure.err
    assert "--insecure" in run.ok("--insecure", "card", "get").err  # never silent
    logged = run.ok(
        "--debug", "--verbose", "--api-key", key, "--bearer", "tok-9", "--svc-param", "X-S:svc-7",
        "send", "hi",
    )  # fmt: skip
    assert "a2a: debug: > POST" in logged.err and "[redacted]" in logged.err
    for secret in (key, "tok-9", "svc-7"):
        assert secret not in logged.err and secret not in logged.out


# -- defaults and the tool's own surface ----------------------------------------------------


@claims("A2ACLI_DEFAULT_001", "A2ACLI_CLI_001")
def test_help_version_and_the_defaults_each_overridable(a2a: Runner) -> None:
    version = a2a.ok("--version").out
    assert re.match(r"^a2a \d+\.\d+\.\d+\n$", version)
    assert a2a.ok("-v").out == version
    usage = a2a.ok("help").out
    assert usage.startswith("usage: a2a ") and "exit status:" in usage
    assert a2a.ok("help", "send").out == a2a.ok("send", "--help").out
    defaults = a2a.ok("task", "get", "--help").out
    for row in (
        rf"--agent-card +{re.escape(a2a.card_ref)} +\(A2ACLI_AGENT_CARD; ",
        r"--output +text +\(built-in default; A2ACLI_OUTPUT\)",
        r"--async +false \(send waits unless --async\)|--wait +false \(send waits",
        r"--a2a-version +1\.0 +\(built-in default",
    ):
        assert re.search(row, defaults), row
    assert re.search(
        r"--output +json +\(A2ACLI_OUTPUT; ", a2a("--help", env={"A2ACLI_OUTPUT": "json"}).out
    )
    # Concise by default, everything with --verbose.
    sent = task_of(a2a.ok("send", "remember"))
    assert "Role: user" not in a2a.ok("task", "get", sent).out
    assert "Role: user" in a2a.ok("--verbose", "task", "get", sent).out


# -- the report ------------------------------------------------------------------------------


def test_the_report_claims_what_is_tested() -> None:
    rows = re.findall(r"^\| `(A2ACLI_[A-Z_0-9]+)` \|.*?\| (✅|◐|❌|⊘|—)", REPORT.read_text(), re.M)
    tier1 = rows[:39]
    passed = {requirement for requirement, mark in tier1 if mark == "✅"}
    assert passed == set(CLAIMED), passed ^ set(CLAIMED)
    not_applicable = {requirement for requirement, mark in tier1 if mark == "—"}
    assert not_applicable == {"A2ACLI_SKILL_001", "A2ACLI_SKILL_002"}
    assert len(passed) + len(not_applicable) == 39
    summary = re.search(
        r"^\| Tier 1 — Core \| 39 \| `(\d+)` \| `0` \| `0` \| `0` \| `(\d+)` \| `yes` \|$",
        REPORT.read_text(),
        re.M,
    )
    assert summary and (int(summary.group(1)), int(summary.group(2))) == (37, 2)
    # Every test the report names as evidence exists.
    sources = "".join(path.read_text() for path in (ROOT / "tests" / "client").glob("*.py"))
    named = set(re.findall(r"\b(test_\w+)\b(?!\.py)", REPORT.read_text()))
    modules = {path.stem for path in (ROOT / "tests" / "client").glob("test_*.py")}
    assert {name for name in named - modules if f"def {name}(" not in sources} == set()
