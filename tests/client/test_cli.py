"""The `a2a` CLI against a real server process (functions-framework on the embedded backend,
as `make run` serves it): every command, both protocol versions, and its failures.
(tests/client/test_compliance.py runs the installed script for each requirement of the A2A
CLI specification it claims.)"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.http_target import HttpTarget
from shared.client.cli import main
from shared.identity.api_key import hashed
from tests.client.agent import _HOSTILE_TEXT as HOSTILE_TEXT
from tests.client.conftest import Cli
from tests.conftest import Server, free_port, wait_until

TASK_LINE = re.compile(r"^Task ID: (\S+)$", re.MULTILINE)
CONTEXT_LINE = re.compile(r"^Context ID: (\S+)$", re.MULTILINE)
STEP = re.compile(r"^Status Message: step (\d)$", re.MULTILINE)


def task_id(output: str) -> str:
    found = TASK_LINE.search(output)
    assert found, output
    return found.group(1)


def last(output: str) -> str:
    return output.rstrip("\n").splitlines()[-1]


def test_card_get_says_which_interface_it_speaks(a2a: Cli) -> None:
    out = a2a.ok("card", "get")
    assert out.startswith("Name: A2A agent\n")
    assert f"Selected Interface: JSONRPC 1.0 {a2a.url}/\n" in out
    assert "Streaming: true\n" in out and "Skill: cli-test: CLI test\n" in out
    legacy = a2a.ok("card", "get", "--a2a-version", "0.3")
    assert f"Selected Interface: JSONRPC 0.3 {a2a.url}/\n" in legacy
    assert json.loads(a2a.ok("-o", "json", "card", "get"))["name"] == "A2A agent"


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
@pytest.mark.parametrize("stream", [True, False])
def test_send_shows_the_artifacts_then_the_end(a2a: Cli, protocol: str, stream: bool) -> None:
    options = ["--stream"] if stream else []
    out = a2a.ok("--a2a-version", protocol, "send", *options, "hello", "there")
    assert out.startswith("Task ID: ")
    assert "Artifact Name: echo\nText:\necho: hello there\n\n" in out
    assert last(out) == "State: COMPLETED"


def test_a_streamed_send_outliving_the_stream_resumes_without_loss(a2a: Cli) -> None:
    # The server ends each stream after a second: the send resumes from the last event seen.
    run = a2a("send", "--stream", "steps=6", "delay=0.3")
    assert run.code == 0, run
    assert "resuming the stream" in run.err
    assert STEP.findall(run.out) == [str(n) for n in range(6)]
    assert "Text:\nall steps done\n" in run.out and last(run.out) == "State: COMPLETED"


def test_watch_follows_a_background_task_across_reconnections(a2a: Cli) -> None:
    started = a2a.ok("send", "--async", "steps=6", "delay=0.3")
    run = a2a("watch", task_id(started))
    assert run.code == 0, run
    assert "resuming the stream" in run.err
    steps = [int(s) for s in STEP.findall(run.out)]
    # The snapshot shows the step the task had reached, then each later step once, in order.
    assert steps == list(range(steps[0], 6))
    assert last(run.out) == "State: COMPLETED"
    # Watching a task that has ended shows how it ended.
    assert last(a2a.ok("task", "subscribe", task_id(started))) == "State: COMPLETED"


def test_files_are_written_only_where_asked_and_hostile_text_is_escaped(
    a2a: Cli, tmp_path: Path
) -> None:
    described = a2a.ok("send", "files")
    assert "File Name: ../../escape.txt\nSize: 5 bytes\n" in described
    assert "Saved To" not in described and not a2a.files.exists()
    out = a2a.ok("--files", str(a2a.files), "send", "files")
    assert sorted(p.name for p in a2a.files.iterdir()) == ["escape-1.txt", "escape.txt"]
    assert (a2a.files / "escape.txt").read_bytes() == b"first"
    assert (a2a.files / "escape-1.txt").read_bytes() == b"second"
    assert not (tmp_path.parent / "escape.txt").exists()
    assert f"Saved To: {a2a.files / 'escape.txt'}\n" in out
    assert 'Data:\n{\n  "answer": 42,\n  "list": [\n    1,\n    2\n  ]\n}\n\n' in out
    assert "\x1b" not in out and "\x07" not in out
    assert "Text:\nbell\\x07 and \\x1b[2J clear\n" in out
    assert HOSTILE_TEXT not in out
    as_json = a2a.ok("-o", "json", "send", "files")
    assert "\x1b" not in as_json and "\\u001b[2J" in as_json


def test_parts_reach_the_agent_in_order_with_the_media_types_given(
    a2a: Cli, tmp_path: Path
) -> None:
    attachment = tmp_path / "note.txt"
    attachment.write_text("hi")
    data = tmp_path / "data.json"
    data.write_text("[1, 2]")
    out = a2a.ok(
        "send",
        "--text",
        "look",
        "--file",
        str(attachment),
        "--media-type",
        "application/x-note",
        "--data",
        str(data),
        "--text",
        "twice",
    )
    assert "Text:\nfile note.txt (application/x-note, 2 bytes); data [1, 2]\n" in out
    task = json.loads(a2a.ok("-o", "json", "task", "get", task_id(out), "--history", "5"))
    sent = task["history"][0]["parts"]
    assert [next(iter(set(p) & {"text", "raw", "data"})) for p in sent] == [
        "text",
        "raw",
        "data",
        "text",
    ]
    assert sent[0]["text"] == "look" and sent[3]["text"] == "twice"
    assert sent[1]["mediaType"] == "application/x-note" and sent[2]["data"] == [1, 2]
    from_stdin = a2a.ok("send", "--data", "-", "x", stdin='{"k": "v"}')
    assert 'data {"k": "v"}' in from_stdin


def test_task_download_writes_the_file_artifacts_and_nothing_else(a2a: Cli, tmp_path: Path) -> None:
    task = task_id(a2a.ok("send", "files"))
    target = tmp_path / "down"
    out = a2a.ok("task", "download", task, "--dir", str(target))
    assert re.findall(r"^Saved To: (.+)$", out, re.MULTILINE) == [
        str(target / "escape.txt"),
        str(target / "escape-1.txt"),
    ]
    assert (target / "escape.txt").read_bytes() == b"first"
    assert sorted(p.name for p in target.iterdir()) == ["escape-1.txt", "escape.txt"]
    assert not (tmp_path / "escape.txt").exists()
    plain = task_id(a2a.ok("send", "hi"))
    none = a2a("task", "download", plain, "--dir", str(tmp_path / "empty"))
    assert none.code == 0 and "has no file artifact" in none.err


def test_push_configs_need_an_agent_that_declares_push(a2a: Cli, tmp_path: Path) -> None:
    document = json.loads(a2a.ok("-o", "json", "card", "get"))
    document["capabilities"]["pushNotifications"] = False
    card = tmp_path / "card.json"
    card.write_text(json.dumps(document))
    for args in (
        ("send", "--push", "http://127.0.0.1:9/hook", "hi"),
        ("task", "push-config", "list", "t-1"),
    ):
        run = a2a(*args, url=str(card))
        assert run.code == 1, run
        assert run.err.startswith("a2a: error: PushNotificationNotSupportedError: "), run.err


def test_task_get_shows_a_task_with_its_history(a2a: Cli) -> None:
    sent = a2a.ok("send", "remember", "me")
    out = a2a.ok("task", "get", task_id(sent), "--history", "5")
    assert "Role: user\nText:\nremember me\n" in out
    assert last(out) == "State: COMPLETED"
    assert json.loads(a2a.ok("-o", "json", "task", "get", task_id(sent)))["id"] == task_id(sent)


def test_task_list_filters_by_context_and_pages(a2a: Cli) -> None:
    context = str(uuid.uuid4())
    sent = [task_id(a2a.ok("send", "--context-id", context, f"n{n}")) for n in range(3)]
    listing = ("task", "list", "--context", context, "--page-size", "2")
    first = a2a.ok(*listing)
    token = re.findall(r"^Next Page Token: (\S+)$", first, re.MULTILINE)
    assert len(token) == 1
    second = a2a.ok(*listing, "--page-token", token[0])
    assert TASK_LINE.findall(first + second) == sent[::-1]  # newest first, each once
    assert TASK_LINE.findall(a2a.ok(*listing, "--all")) == sent[::-1]
    assert a2a.ok("task", "list", "--context", context, "--status", "working") == ""
    done = json.loads(a2a.ok("-o", "json", "task", "list", "--context", context, "--all"))
    assert [t["id"] for t in done["tasks"]] == sent[::-1]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("text", "state", "warning"),
    [
        ("fail", "FAILED", "the task FAILED: failed on purpose"),
        ("reject", "REJECTED", "the agent REJECTED the task"),
        ("sign in", "AUTH_REQUIRED", "the task waits for authorization (AUTH_REQUIRED)"),
    ],
)
def test_a_task_that_did_not_complete_exits_0_with_a_warning(
    a2a: Cli, text: str, state: str, warning: str, stream: bool
) -> None:
    run = a2a("send", *(["--stream"] if stream else []), "--text", text)
    assert run.code == 0, run  # the CLI did its job: the outcome is the task's
    assert f"\nState: {state}\n" in run.out, run.out
    assert run.err.startswith(f"a2a: warning: {warning}"), run.err
    assert "a2a: error" not in run.err


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
@pytest.mark.parametrize("stream", [True, False])
def test_an_input_required_task_says_how_to_answer_it(
    a2a: Cli, protocol: str, stream: bool
) -> None:
    options = ["--a2a-version", protocol, "send", *(["--stream"] if stream else [])]
    asked = a2a(*options, "I need a new phone")
    assert asked.code == 0, asked
    task = task_id(asked.out)
    resume = f"a2a send --agent-card {a2a.url} --task-id {task} --text REPLY"
    assert last(asked.out) == f"Resume: {resume}"
    assert "State: INPUT_REQUIRED\n" in asked.out
    if not stream:
        assert "Status Message: Select a phone type (iPhone/Android)\n" in asked.out
    assert asked.err.rstrip().endswith(f"answer with: {resume}"), asked.err
    # `task get` shows the way too.
    shown = a2a("--a2a-version", protocol, "task", "get", task)
    assert shown.code == 0 and last(shown.out) == f"Resume: {resume}", shown

    answered = a2a(*options, "--task-id", task, "Android")
    assert answered.code == 0, answered
    assert task_id(answered.out) == task, "the answer went to the waiting task"
    assert "I have ordered a new Android device" in answered.out
    assert answered.err == ""


def test_json_output_is_one_document_or_json_lines_when_streamed(a2a: Cli) -> None:
    run = a2a("-o", "json", "send", "I need a new phone")
    assert run.code == 0 and run.out.count("\n") == 1, run
    assert json.loads(run.out)["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert "answer with: a2a send " in run.err
    streamed = a2a("-o", "json", "send", "--stream", "steps=2")
    events = [json.loads(line) for line in streamed.out.splitlines()]
    assert len(events) >= 4 and "task" in events[0]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_background_send_and_a_cancel_report_the_state(a2a: Cli) -> None:
    started = a2a("send", "--async", "wait")
    assert started.code == 0 and started.err == "", started  # accepted: the task is at work
    task = task_id(started.out)
    assert "State: WORKING" in started.out or "State: SUBMITTED" in started.out
    assert last(a2a.ok("task", "cancel", task)) == "State: CANCELED"
    watched = a2a("watch", task)
    assert watched.code == 0 and last(watched.out) == "State: CANCELED", watched
    assert "a2a: warning: the task was CANCELED" in watched.err
    asked = a2a("send", "--async", "I need a new phone")
    assert asked.code == 0, asked
    waiting = a2a("watch", task_id(asked.out))
    assert waiting.code == 0, waiting
    assert f"--task-id {task_id(asked.out)}" in waiting.err


def test_help_lists_the_exit_statuses_and_the_effective_defaults(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("A2ACLI_AGENT_CARD", "http://agent.example:9")
    monkeypatch.setenv("A2ACLI_API_KEY", "secret-key")

    def help_of(*args: str) -> str:
        with pytest.raises(SystemExit) as done:
            main([*args, "--help"])
        assert done.value.code == 0
        return capsys.readouterr().out

    lines = help_of().splitlines()
    start = lines.index("exit status:")
    codes = [line.split()[0] for line in lines[start + 1 :] if line[2:3].strip()]
    assert codes == ["0", "1", "2", "3", "4", "5", "130"]
    assert any(
        re.match(r"^  --agent-card +http://agent.example:9 +\(A2ACLI_AGENT_CARD; ", line)
        for line in lines
    ), lines
    assert any(re.match(r"^  --api-key +set +\(A2ACLI_API_KEY; ", line) for line in lines)
    assert "secret-key" not in "\n".join(lines)
    assert "--task-id" in help_of("send") and "exit status:" in help_of("task", "get")
    assert main(["help", "task", "get"]) == 0
    assert capsys.readouterr().out.startswith("usage: a2a task get")


def test_push_configs_are_created_listed_and_deleted(a2a: Cli) -> None:
    with HttpTarget.start() as receiver:
        task = task_id(a2a.ok("send", "--async", "wait"))
        # Once its turn has started (its `working` committed): a config on the task hears
        # only of the events that come after it, and none come before the cancel.
        wait_until(lambda: "State: WORKING" in a2a.ok("task", "get", task), 10, lambda: task)
        push = ("task", "push-config")
        added = a2a.ok(*push, "create", task, receiver.url("/hook"), "--token", "t", "--id", "c1")
        assert added.startswith(f"Config ID: c1\nURL: {receiver.url('/hook')}\n")
        a2a.ok(*push, "create", task, receiver.url("/other"), "--id", "c2")
        ids = re.compile(r"^Config ID: (\S+)$", re.MULTILINE)
        assert ids.findall(a2a.ok(*push, "list", task)) == ["c1", "c2"]
        assert ids.findall(a2a.ok(*push, "get", task, "c2")) == ["c2"]
        assert "Removed: push config c2" in a2a.ok(*push, "delete", task, "c2")
        assert ids.findall(a2a.ok(*push, "list", task)) == ["c1"]
        # Deleting it again deletes nothing, and says so.
        again = a2a(*push, "delete", task, "c2")
        assert again.code == 1 and again.out == "", again
        assert again.err.startswith("a2a: error: TaskNotFoundError: nothing removed: "), again.err
        a2a.ok("task", "cancel", task)
        hits = receiver.wait_for("/hook", 1)
        assert hits[-1].headers["X-A2A-Notification-Token"] == "t"
        assert receiver.received("/other") == []


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
def test_chat_answers_the_question_in_the_same_task(a2a: Cli, protocol: str) -> None:
    run = a2a("--a2a-version", protocol, "chat", stdin="I need a new phone\nAndroid\nhello\n")
    assert run.code == 0, run
    assert "Status Message: Select a phone type (iPhone/Android)" in run.out
    assert "I have ordered a new Android device" in run.out
    # The answer went to the waiting task; the next line, after it completed, to a new one.
    tasks = list(dict.fromkeys(TASK_LINE.findall(run.out)))
    assert len(tasks) == 2
    assert len(set(CONTEXT_LINE.findall(run.out))) == 1  # the same context throughout
    assert "Text:\necho: hello\n" in run.out and last(run.out) == "State: COMPLETED"
    assert "you>" not in run.err  # no prompt: stdin is no terminal


def test_failures_exit_with_their_code_and_one_clear_line(a2a: Cli, tmp_path: Path) -> None:
    def error(code: int, *args: str, url: str | None = None) -> str:
        run = a2a(*args, url=url)
        assert run.code == code and run.out == "", run
        assert run.err.startswith("a2a: error: "), run.err
        assert run.err.count("\n") <= 2, run.err  # the error, and its hint
        return run.err

    assert "TaskNotFoundError: GetTask: TaskNotFoundError (-32001)" in error(
        1, "task", "get", "no-such-task"
    )
    assert "CancelTask: TaskNotFoundError (-32001)" in error(1, "task", "cancel", "no-such-task")
    down = f"http://127.0.0.1:{free_port()}"
    assert "A2ACLI_ERR_UNREACHABLE: cannot connect" in error(3, "card", "get", url=down)
    assert "is the agent running" in error(3, "send", "hi", url=down)
    assert "A2ACLI_ERR_USAGE: nothing to send" in error(2, "send")
    data = tmp_path / "bad.json"
    data.write_text("{nope")
    assert f"--data {data}: not JSON" in error(2, "send", "--data", str(data))
    assert "no such file" in error(2, "send", "--file", str(tmp_path / "missing")).lower()
    assert "list needs A2A 1.0" in error(1, "--a2a-version", "0.3", "task", "list")
    assert "A2ACLI_ERR_CARD_NOT_FOUND" in error(3, "card", "get", url=f"{a2a.url}/nowhere")
    assert "A2ACLI_ERR_USAGE" in error(2, "send", "--async", "--stream", "x")
    assert "A2ACLI_ERR_USAGE" in error(2, "--poll-interval", "soon", "send", "x")


def test_credentials_missing_refused_and_right_are_told_apart(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key = "k-" + uuid.uuid4().hex
    env = {"A2A_AUTH": "api-key", "A2A_API_KEYS": f"ann:{hashed(key)}"}
    server = Server({"A2A_HANDLER": "tests.client.agent", **env})
    try:
        cli = Cli(server.url, tmp_path, capsys, monkeypatch)
        refused = cli("--api-key", "wrong", "send", "hi")
        assert refused.code == 4 and "A2ACLI_ERR_AUTH_FAILED: HTTP 401" in refused.err, refused
        missing = cli("send", "hi")
        assert missing.code == 4 and "A2ACLI_ERR_CREDENTIALS_MISSING" in missing.err, missing
        assert "--api-key" in missing.err
        assert last(cli.ok("--api-key", key, "send", "hi")) == "State: COMPLETED"
        monkeypatch.setenv("A2ACLI_API_KEY", key)
        assert last(cli.ok("send", "hi")) == "State: COMPLETED"
    finally:
        server.stop()


def test_the_console_script_is_installed_and_exits_non_zero_on_failure() -> None:
    script = Path(sys.executable).with_name("a2a")
    url = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [str(script), "--agent-card", url, "card", "get"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3
    assert done.stderr.startswith(f"a2a: error: A2ACLI_ERR_UNREACHABLE: cannot connect to {url}")
    usage = subprocess.run([str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert usage.returncode == 2 and "A2ACLI_ERR_USAGE" in usage.stderr


def test_a_reader_that_leaves_early_gets_no_traceback(agent: Server) -> None:
    script = Path(sys.executable).with_name("a2a")
    with subprocess.Popen(
        [str(script), "--agent-card", agent.url, "send", "--stream", "steps=4", "delay=0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline().startswith(b"Task ID: ")
        process.stdout.close()  # as `| head -1` does
        err = process.stderr.read()
        assert process.wait(timeout=60) == 1
    assert b"Traceback" not in err, err


class CuttingProxy:
    """A TCP proxy to the agent that drops a connection once, when the agent's bytes have
    carried `marker` `count` times: a network cut in the middle of a stream."""

    def __init__(self, target_port: int, marker: bytes, count: int) -> None:
        self.marker = marker
        self.count = count
        self.seen = 0
        self.cut = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target_port = target_port
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                try:
                    agent = socket.create_connection(("127.0.0.1", self.target_port))
                except OSError:
                    client.close()
                    continue
                for pipe in ((client, agent, False), (agent, client, True)):
                    threading.Thread(target=self._pipe, args=pipe, daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, from_agent: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if from_agent and not self.cut.is_set():
                    self.seen += data.count(self.marker)
                    if self.seen >= self.count:
                        self.cut.set()
                        break  # drop this connection: neither side gets the rest
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self.listener.close()


def test_watch_resumes_after_the_connection_is_cut(a2a: Cli, agent: Server) -> None:
    proxy = CuttingProxy(agent.port, b'"statusUpdate"', 2)  # after the first update
    try:
        # Long enough (2 s) that the watch sees two updates however loaded the machine is.
        started = a2a.ok("send", "--async", "steps=8", "delay=0.25")
        run = a2a("watch", task_id(started), url=f"http://127.0.0.1:{proxy.port}")
        assert proxy.cut.is_set()
        assert run.code == 0, run
        assert "resuming the stream" in run.err
        steps = [int(s) for s in STEP.findall(run.out)]
        # The update cut off comes after the resumption; nothing comes twice.
        assert steps == list(range(steps[0], 8))
        assert last(run.out) == "State: COMPLETED"
    finally:
        proxy.close()


@pytest.fixture(scope="module")
def giving_up() -> Iterator[Server]:
    """An agent whose push queue gives up after one attempt, whose streams keep the default
    limits (A2A_STREAM_IDLE_SECONDS 15 s on a task waiting for input) and send a keep-alive
    comment after a tenth of a second of silence."""
    server = Server(
        {
            "A2A_HANDLER": "tests.client.agent",
            "A2A_PUSH_ALLOWED_HOSTS": "127.0.0.1",
            "A2A_PUSH_MAX_ATTEMPTS": "1",
            "A2A_STREAM_KEEPALIVE_SECONDS": "0.1",
        }
    )
    yield server
    server.stop()


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
def test_push_list_shows_the_failure_of_a_config_the_agent_gave_up_on(
    a2a: Cli, giving_up: Server, protocol: str
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens: the POST is refused
    sent = a2a("--a2a-version", protocol, "send", "--push", dead, "hi", url=giving_up.url)
    assert sent.code == 0, sent
    task = task_id(sent.out)

    def listed() -> str:
        run = a2a("--a2a-version", protocol, "task", "push-config", "list", task, url=giving_up.url)
        assert run.code == 0, run
        return run.out

    wait_until(lambda: "Delivery Failed" in listed(), 20, lambda: f"no failure shown: {listed()}")
    failure = next(line for line in listed().splitlines() if line.startswith("Delivery Failed"))
    assert failure.startswith("Delivery Failed: at 20") and "could not connect" in failure


def test_watching_a_task_that_waits_for_input_returns_at_once(a2a: Cli, giving_up: Server) -> None:
    asked = a2a("send", "I need a new phone", url=giving_up.url)
    assert asked.code == 0, asked
    started = time.monotonic()
    watched = a2a("watch", task_id(asked.out), url=giving_up.url)
    assert watched.code == 0 and "answer with: a2a send " in watched.err, watched
    # Not once the agent's idle limit (15 s) has closed the silent subscription.
    assert time.monotonic() - started < 10


def test_a_stream_silent_past_its_keep_alives_goes_on(a2a: Cli, giving_up: Server) -> None:
    # Half a second between steps: keep-alive comments come meanwhile, and are no events.
    started = a2a("send", "--async", "steps=2", "delay=0.5", url=giving_up.url)
    assert started.code == 0, started
    watched = a2a("watch", task_id(started.out), url=giving_up.url)
    assert watched.code == 0, watched
    assert "Text:\nall steps done\n" in watched.out and last(watched.out) == "State: COMPLETED"
