"""The `a2a` CLI against a real server process (functions-framework on the embedded backend,
as `make run` serves it): every command, both protocol versions, and its failures."""

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
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emulator.http_target import HttpTarget
from shared.client.cli import TASK_EXITS, _ended, _state, main
from shared.identity.api_key import hashed
from tests.client.agent import _HOSTILE_TEXT as HOSTILE_TEXT
from tests.client.conftest import Cli
from tests.conftest import Server, free_port, wait_until

TASK_LINE = re.compile(r"^task (\S+) \(context (\S+)\)$", re.MULTILINE)


def task_id(output: str) -> str:
    found = TASK_LINE.search(output)
    assert found, output
    return found.group(1)


def test_card_says_which_version_and_endpoint_it_speaks(a2a: Cli) -> None:
    assert a2a.ok("card").splitlines()[0].endswith(f"A2A 1.0 JSON-RPC at {a2a.url}/")
    assert "A2A 0.3 JSON-RPC" in a2a.ok("--protocol", "0.3", "card").splitlines()[0]


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
@pytest.mark.parametrize("stream", [True, False])
def test_send_shows_the_artifacts_then_the_end(a2a: Cli, protocol: str, stream: bool) -> None:
    options = [] if stream else ["--no-stream"]
    out = a2a.ok("--protocol", protocol, "send", *options, "hello", "there")
    lines = out.splitlines()
    assert TASK_LINE.match(lines[0])
    assert lines[-2:] == ["[artifact echo] echo: hello there", "[completed]"]


def test_a_streamed_send_outliving_the_stream_resumes_without_loss(a2a: Cli) -> None:
    # The server ends each stream after a second: the send resumes from the last event seen.
    run = a2a("send", "steps=6", "delay=0.3")
    assert run.code == 0, run
    assert "resuming the stream" in run.err
    steps = re.findall(r"^\[working\] step (\d)$", run.out, re.MULTILINE)
    assert steps == [str(n) for n in range(6)]
    assert run.out.splitlines()[-2:] == ["[artifact result] all steps done", "[completed]"]


def test_watch_follows_a_background_task_across_reconnections(a2a: Cli) -> None:
    started = a2a.ok("send", "--no-wait", "steps=6", "delay=0.3")
    run = a2a("watch", task_id(started))
    assert run.code == 0, run
    assert "resuming the stream" in run.err
    steps = [int(s) for s in re.findall(r"^\[working\] step (\d)$", run.out, re.MULTILINE)]
    # The snapshot shows the step the task had reached, then each later step once, in order.
    assert steps == list(range(steps[0], 6))
    assert run.out.splitlines()[-1] == "[completed]"
    # Watching a task that has ended shows how it ended.
    assert a2a.ok("watch", task_id(started)).splitlines()[-1] == "[completed]"


def test_files_data_and_hostile_text_are_rendered_safely(a2a: Cli, tmp_path: Path) -> None:
    out = a2a.ok("send", "files")
    assert sorted(p.name for p in a2a.files.iterdir()) == ["escape-1.txt", "escape.txt"]
    assert (a2a.files / "escape.txt").read_bytes() == b"first"
    assert (a2a.files / "escape-1.txt").read_bytes() == b"second"
    assert not (tmp_path.parent / "escape.txt").exists()
    assert f"saved {a2a.files / 'escape.txt'} (5 bytes)" in out
    assert '[artifact numbers]\n{\n  "answer": 42,\n  "list": [\n    1,\n    2\n  ]\n}' in out
    assert "\x1b" not in out and "\x07" not in out
    assert "[artifact hostile] bell\\x07 and \\x1b[2J clear" in out
    assert HOSTILE_TEXT not in out
    as_json = a2a.ok("--json", "send", "--no-stream", "files")
    assert "\x1b" not in as_json and "\\u001b[2J" in as_json


def test_files_and_data_parts_reach_the_agent(a2a: Cli, tmp_path: Path) -> None:
    attachment = tmp_path / "note.txt"
    attachment.write_text("hi")
    out = a2a.ok("send", "--no-stream", "--file", str(attachment), "--data", "[1, 2]", "look")
    assert "[artifact echo] echo: look" in out
    assert "[artifact parts] file note.txt (text/plain, 2 bytes); data [1, 2]" in out


def test_get_shows_a_task_with_its_history(a2a: Cli) -> None:
    sent = a2a.ok("send", "--no-stream", "remember", "me")
    out = a2a.ok("get", task_id(sent), "--history", "5")
    assert "user: remember me" in out
    assert out.splitlines()[-1] == "[completed]"
    assert f'"id": "{task_id(sent)}"' in a2a.ok("--json", "get", task_id(sent))


def test_list_filters_by_context_and_pages(a2a: Cli) -> None:
    context = str(uuid.uuid4())
    sent = [task_id(a2a.ok("send", "--no-stream", "--context", context, f"n{n}")) for n in range(3)]
    first = a2a.ok("list", "--context", context, "--page-size", "2").splitlines()
    assert len(first) == 3 and first[-1].startswith("more: --page-token ")
    token = first[-1].split()[-1]
    second = a2a.ok("list", "--context", context, "--page-size", "2", "--page-token", token)
    listed = [line.split()[0] for line in [*first[:2], *second.splitlines()]]
    assert listed == sent[::-1]  # newest first, each once
    everything = a2a.ok("list", "--context", context, "--page-size", "2", "--all").splitlines()
    assert [line.split()[0] for line in everything] == sent[::-1]
    assert a2a.ok("list", "--context", context, "--state", "working") == ""
    assert len(a2a.ok("list", "--context", context, "--state", "completed").splitlines()) == 3


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("text", "code", "state"),
    [("fail", 3, "failed"), ("reject", 4, "rejected"), ("sign in", 7, "auth-required")],
)
def test_send_exits_with_the_state_the_task_ended_in(
    a2a: Cli, text: str, code: int, state: str, stream: bool
) -> None:
    run = a2a("send", *([] if stream else ["--no-stream"]), text)
    assert run.code == code, run
    assert run.out.splitlines()[-1].startswith(f"[{state}] "), run.out
    assert "a2a: error" not in run.err  # the call worked: the task did not


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
@pytest.mark.parametrize("stream", [True, False])
def test_an_input_required_task_says_how_to_answer_it(
    a2a: Cli, protocol: str, stream: bool
) -> None:
    options = ["--protocol", protocol, "send", *([] if stream else ["--no-stream"])]
    asked = a2a(*options, "I need a new phone")
    assert asked.code == 6, asked
    task = task_id(asked.out)
    assert asked.out.splitlines()[-1] == "[input-required] Select a phone type (iPhone/Android)"
    assert asked.err.splitlines()[-1] == f"answer with: a2a send --task {task} TEXT..."
    # `get` shows the way too (and exits 0: it read the task).
    shown = a2a("--protocol", protocol, "get", task)
    assert shown.code == 0 and shown.err == asked.err.splitlines()[-1] + "\n", shown

    answered = a2a(*options, "--task", task, "Android")
    assert answered.code == 0, answered
    assert task_id(answered.out) == task, "the answer went to the waiting task"
    assert "I have ordered a new Android device" in answered.out
    assert "answer with" not in answered.err


def test_exit_statuses_hold_with_json_output_which_stays_json(a2a: Cli) -> None:
    run = a2a("--json", "send", "I need a new phone")
    assert run.code == 6, run
    for line in run.out.splitlines():
        json.loads(line)
    assert "answer with: a2a send --task " in run.err
    assert a2a("--json", "send", "--no-stream", "fail").code == 3


def test_watch_and_a_background_send_exit_with_the_tasks_state(a2a: Cli) -> None:
    started = a2a("send", "--no-wait", "wait")
    assert started.code == 0, started  # accepted: the task is at work
    task = task_id(started.out)
    assert a2a.ok("cancel", task).splitlines()[-1] == "[canceled]"  # the cancel worked
    watched = a2a("watch", task)
    assert watched.code == 5 and watched.out.splitlines()[-1] == "[canceled]", watched
    asked = a2a("send", "--no-wait", "I need a new phone")
    assert asked.code == 0, asked
    waiting = a2a("watch", task_id(asked.out))
    assert waiting.code == 6, waiting
    assert f"answer with: a2a send --task {task_id(asked.out)}" in waiting.err


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
STATES = st.sampled_from([*sorted(TASK_EXITS), "TASK_STATE_COMPLETED", "nonsense"])


@given(
    st.fixed_dictionaries(
        {"id": JSON, "status": JSON | st.fixed_dictionaries({"state": JSON | STATES})}
    )
)
def test_whatever_state_an_agent_sends_the_exit_status_is_one_of_the_list(task: Any) -> None:
    state = _state(task)
    assert state is None or isinstance(state, str)
    assert _ended(task["id"], state) in {0, *(code for code, _ in TASK_EXITS.values())}


def test_help_lists_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    def help_of(*args: str) -> str:
        with pytest.raises(SystemExit) as done:
            main([*args, "--help"])
        assert done.value.code == 0
        return capsys.readouterr().out

    lines = help_of().splitlines()
    start = lines.index("exit status:")
    codes = [line.split()[0] for line in lines[start + 1 :] if line[2:3].strip()]
    assert codes == ["0", "1", "2", "3", "4", "5", "6", "7", "130"]
    for expected in (
        "  2    a usage error",
        "  3    the task failed (send, watch)",
        "  4    the agent rejected the task (send, watch)",
        "  5    the task was canceled (send, watch)",
        "  6    the task waits for input: answer with a2a send --task ID (send, watch)",
        "  7    the task waits for authorization (auth-required) (send, watch)",
    ):
        assert expected in lines, lines
    assert "answer this task" in help_of("send")


def test_cancel_stops_a_running_task(a2a: Cli) -> None:
    started = a2a.ok("send", "--no-wait", "wait")
    assert a2a.ok("cancel", task_id(started)).splitlines()[-1] == "[canceled]"
    assert a2a.ok("get", task_id(started)).splitlines()[-1] == "[canceled]"


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
def test_push_configs_are_added_listed_and_removed(a2a: Cli, protocol: str) -> None:
    with HttpTarget.start() as receiver:
        started = a2a.ok("--protocol", protocol, "send", "--no-wait", "wait")
        task = task_id(started)
        push = ("--protocol", protocol, "push")
        added = a2a.ok(*push, "add", task, receiver.url("/hook"), "--token", "t", "--id", "c1")
        assert added.split()[:2] == ["c1", receiver.url("/hook")]
        a2a.ok(*push, "add", task, receiver.url("/other"), "--id", "c2")
        assert [line.split()[0] for line in a2a.ok(*push, "list", task).splitlines()] == [
            "c1",
            "c2",
        ]
        assert "removed push config c2" in a2a.ok(*push, "rm", task, "c2")
        assert [line.split()[0] for line in a2a.ok(*push, "list", task).splitlines()] == ["c1"]
        # Removing it again removes nothing, and says so.
        again = a2a(*push, "rm", task, "c2")
        assert again.code == 1 and again.out == "", again
        assert again.err.startswith("a2a: error: nothing removed: "), again.err
        assert f"task {task} has no push notification config c2" in again.err
        assert [line.split()[0] for line in a2a.ok(*push, "list", task).splitlines()] == ["c1"]
        a2a.ok("cancel", task)
        hits = receiver.wait_for("/hook", 1)
        assert hits[-1].headers["X-A2A-Notification-Token"] == "t"
        assert receiver.received("/other") == []


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
def test_chat_answers_the_question_in_the_same_task(a2a: Cli, protocol: str) -> None:
    run = a2a("--protocol", protocol, "chat", stdin="I need a new phone\nAndroid\nhello\n")
    assert run.code == 0, run
    tasks = TASK_LINE.findall(run.out)
    assert "[input-required] Select a phone type (iPhone/Android)" in run.out
    assert "I have ordered a new Android device" in run.out
    # The answer went to the waiting task; the next line, after it completed, to a new one.
    assert tasks[0] == tasks[1] and tasks[2][0] != tasks[0][0]
    assert tasks[2][1] == tasks[0][1]  # the same context throughout
    assert run.out.splitlines()[-2:] == ["[artifact echo] echo: hello", "[completed]"]


def test_errors_exit_non_zero_with_one_clear_line(a2a: Cli, tmp_path: Path) -> None:
    def error(*args: str, url: str | None = None) -> str:
        run = a2a(*args, url=url)
        assert run.code == 1 and run.out == "", run
        assert run.err.count("\n") == 1 and run.err.startswith("a2a: error: "), run.err
        return run.err

    assert "GetTask: TaskNotFoundError (-32001): Task not found" in error("get", "no-such-task")
    assert "CancelTask: TaskNotFoundError (-32001)" in error("cancel", "no-such-task")
    down = f"http://127.0.0.1:{free_port()}"
    assert "connection refused" in error("card", url=down)
    assert "is the agent running" in error("send", "hi", url=down)
    assert "nothing to send" in error("send")
    assert "--data '{nope' is not JSON" in error("send", "--data", "{nope")
    assert "no such file" in error("send", "--file", str(tmp_path / "missing")).lower()
    assert "list needs A2A 1.0" in error("--protocol", "0.3", "list")
    assert "HTTP 404" in error("card", url=f"{a2a.url}/nowhere")


def test_a_wrong_api_key_is_refused_and_a_right_one_works(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key = "k-" + uuid.uuid4().hex
    env = {"A2A_AUTH": "api-key", "A2A_API_KEYS": f"ann:{hashed(key)}"}
    server = Server({"A2A_HANDLER": "tests.client.agent", **env})
    try:
        cli = Cli(server.url, tmp_path, capsys, monkeypatch)
        refused = cli("--api-key", "wrong", "send", "hi")
        assert refused.code == 1
        assert "HTTP 401" in refused.err and "--api-key" in refused.err
        assert "HTTP 401" in cli("send", "hi").err
        assert cli.ok("--api-key", key, "send", "hi").splitlines()[-1] == "[completed]"
    finally:
        server.stop()


def test_the_console_script_is_installed_and_exits_non_zero_on_failure() -> None:
    script = Path(sys.executable).with_name("a2a")
    url = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [str(script), "--url", url, "card"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert done.stderr.startswith(f"a2a: error: cannot connect to {url}")
    usage = subprocess.run([str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert usage.returncode == 2 and "COMMAND" in usage.stderr


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
        started = a2a.ok("send", "--no-wait", "steps=8", "delay=0.25")
        run = a2a("watch", task_id(started), url=f"http://127.0.0.1:{proxy.port}")
        assert proxy.cut.is_set()
        assert run.code == 0, run
        assert "resuming the stream" in run.err
        steps = [int(s) for s in re.findall(r"^\[working\] step (\d)$", run.out, re.MULTILINE)]
        # The update cut off comes after the resumption; nothing comes twice.
        assert steps == list(range(steps[0], 8))
        assert run.out.splitlines()[-1] == "[completed]"
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
    sent = a2a(
        "--protocol", protocol, "send", "--no-stream", "--push", dead, "hi", url=giving_up.url
    )
    assert sent.code == 0, sent
    task = task_id(sent.out)

    def listed() -> str:
        run = a2a("--protocol", protocol, "push", "list", task, url=giving_up.url)
        assert run.code == 0, run
        return run.out

    wait_until(lambda: "delivery failed" in listed(), 20, lambda: f"no failure shown: {listed()}")
    failure = listed().splitlines()[1]
    assert failure.startswith("  delivery failed at 20") and "could not connect" in failure, failure


def test_watching_a_task_that_waits_for_input_returns_at_once(a2a: Cli, giving_up: Server) -> None:
    asked = a2a("send", "--no-stream", "I need a new phone", url=giving_up.url)
    assert asked.code == 6, asked
    started = time.monotonic()
    watched = a2a("watch", task_id(asked.out), url=giving_up.url)
    assert watched.code == 6 and "answer with: a2a send --task" in watched.err, watched
    # Not once the agent's idle limit (15 s) has closed the silent subscription.
    assert time.monotonic() - started < 10


def test_a_stream_silent_past_its_keep_alives_goes_on(a2a: Cli, giving_up: Server) -> None:
    # Half a second between steps: keep-alive comments come meanwhile, and are no events.
    started = a2a("send", "--no-wait", "steps=2", "delay=0.5", url=giving_up.url)
    assert started.code == 0, started
    watched = a2a("watch", task_id(started.out), url=giving_up.url)
    assert watched.code == 0, watched
    assert watched.out.splitlines()[-2:] == ["[artifact result] all steps done", "[completed]"]
