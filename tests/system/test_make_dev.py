"""`make dev` and `make run` from a fresh clone of the committed HEAD, as a user runs them.

The clone reuses this checkout's `.venv` and `.emulators` (symlinks; `make -o` keeps the
install stamps from being remade), so nothing is installed. `make dev` must carry a
non-blocking message through the Cloud Tasks emulator to `worker` and a push notification
through it to `deliver`, which posts it to a receiver on this machine; Ctrl-C (SIGINT to the
process group, as a terminal sends it) must leave no process behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest
import requests

from emulator._process import port_in_use
from emulator.http_target import HttpTarget
from tests.client.conftest import Cli
from tests.conftest import ROOT, free_port, wait_until

STAMPS = [".venv/.installed", ".venv/.installed-run"]  # make test's, make run's
READY_SECONDS = 60  # the emulators and three functions start in about 5 s here
STOP_SECONDS = 10  # Ctrl-C to the last process gone (it takes about 1 s)


class Make:
    """`make <target>` in the clone, in a session of its own; its output collected by line."""

    def __init__(self, clone: Path, *args: str, env: dict[str, str] | None = None) -> None:
        # The suite's own emulator and settings variables must not leak into the clone's run.
        env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("A2A_", "FIRESTORE_", "CLOUD_TASKS_")) and k != "PYTHONPATH"
            },
            **(env or {}),
        }
        self.clone = clone
        self.lines: list[str] = []
        self.ready = threading.Event()
        kept = [option for stamp in STAMPS for option in ("-o", stamp)]
        self.process = subprocess.Popen(
            ["make", "--no-print-directory", *kept, *args],
            cwd=clone,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            # make dev: the emulators and functions answer; make run: the card does
            if line.endswith("| ready") or "| not ready: " in line or line.startswith("ready: "):
                self.ready.set()
        self.process.stdout.close()
        self.ready.set()  # it ended: nothing more will come

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_ready(self) -> None:
        assert self.ready.wait(READY_SECONDS), f"not ready in {READY_SECONDS} s:\n{self.output}"
        assert self.process.poll() is None, f"make exited:\n{self.output}"

    def wait_answering(self, port: int) -> None:
        """make run says "ready" once its card answers: then its port does."""
        self.wait_ready()
        assert f"ready: http://localhost:{port} answers" in self.lines, self.output
        assert port_in_use("127.0.0.1", port)

    def wait_for(self, text: str) -> None:
        wait_until(
            lambda: any(text in line for line in self.lines) or self.process.poll() is not None,
            READY_SECONDS,
            lambda: f"no {text!r} in {READY_SECONDS} s:\n{self.output}",
        )
        assert any(text in line for line in self.lines), self.output

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to make's whole process group; everything must be gone soon."""
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"make still runs {STOP_SECONDS} s after SIGINT:\n{self.output}")
        self._reader.join(STOP_SECONDS)

    def kill(self) -> None:
        """After a failure: whatever is left of the run goes."""
        for pid in left_in(self.clone):
            os.kill(pid, signal.SIGKILL)
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def left_in(folder: Path) -> list[int]:
    """Processes whose working directory is under `folder` (every one a run started)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cwd = os.readlink(proc / "cwd")
            except OSError:
                continue  # gone, or not ours to look at
            if cwd == str(folder) or cwd.startswith(f"{folder}/"):
                found.append(int(proc.name))
    return found


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def git_clone(root: Path) -> Path:
    """A fresh clone of the committed HEAD at `root`."""
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(root)], check=True, timeout=60)
    return root


def make_says(folder: Path, *args: str) -> str:
    """What `make <args>` prints in `folder` (it must succeed)."""
    done = subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = git_clone(tmp_path_factory.mktemp("clone") / "a2a-functions")
    for shared in (".venv", ".emulators"):
        (root / shared).symlink_to(ROOT / shared)
    return root


@pytest.mark.emulator
def test_make_dev_runs_the_deployed_shape_and_stops_on_ctrl_c(
    clone: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ports = {name: free_port() for name in ("a2a", "worker", "deliver", "firestore", "tasks")}
    options = " ".join(
        f"--{n}-port {ports[n]}" for n in ("worker", "deliver", "firestore", "tasks")
    )
    make = Make(clone, "dev", f"PORT={ports['a2a']}", f"DEV_ARGS={options}")
    try:
        make.wait_ready()
        url = f"http://localhost:{ports['a2a']}"
        a2a = Cli(url, tmp_path, capsys, monkeypatch)
        assert f"agent card   {url}/.well-known/agent-card.json" in make.output
        assert f"console      {url}/console" in make.output
        assert "webhooks allowed on: localhost,127.0.0.1" in make.output
        # Issue 36, item 4: nothing listens beyond this machine (it was 0.0.0.0).
        for role in ("a2a", "worker", "deliver"):
            assert listening_on(ports[role]) == {"127.0.0.1"}, role
        # Issue 37, item 7: its readiness checks made each queue target log a warning.
        checks = [line for line in make.lines if " 405" in line or "WARNING" in line]
        assert checks == [], make.output
        with HttpTarget.start() as receiver:
            hook = receiver.url("/hook")
            sent = a2a.ok("send", "--async", "--push", hook, "tell me a joke")
            assert sent.splitlines()[-1] == "State: SUBMITTED", sent
            task = sent.splitlines()[0].removeprefix("Task ID: ")
            # The deliverer posts the task's updates (the first of them is enough here: the
            # deploy's push queue retries a delivery that finds another one sending after 5 s).
            receiver.wait_for("/hook", 1, timeout=20)
            assert task.encode() in receiver.received("/hook")[0].body
        shown: list[str] = []

        def completed() -> bool:
            shown.append(a2a.ok("task", "get", task))
            return shown[-1].splitlines()[-1] == "State: COMPLETED"

        wait_until(completed, 20, lambda: f"not completed: {shown[-1]}\n{make.output}")
        assert "Artifact Name: joke\nText:\nWhy did the chicken cross the road?" in shown[-1]
        assert a2a.ok("watch", task).splitlines()[-1] == "State: COMPLETED"
        streamed = a2a.ok("send", "--stream", "hello")
        assert "Text:\nhello\n" in streamed and streamed.splitlines()[-1] == "State: COMPLETED"
        chat = a2a.ok("chat", stdin="a new phone please\nAndroid\n")
        assert "Status Message: Select a phone type" in chat
        assert "I have ordered a new Android device" in chat
        # A saved change to the handler restarts the functions, which then serve it.
        sample = clone / "functions" / "handlers" / "sample.py"
        sample.write_text(sample.read_text().replace("the other side!", "the reloaded side!"))
        wait_until(
            lambda: sum(line.endswith("| ready") for line in make.lines) == 2,
            READY_SECONDS,
            lambda: f"no restart after the change:\n{make.output}",
        )
        assert "functions/handlers/sample.py changed: restarting the functions" in make.output
        assert "To get to the reloaded side!" in a2a.ok("send", "tell me a joke")
        # Through the Cloud Tasks emulator (its dispatches are in the stream): the turn to the
        # worker, the notifications to the deliverer.
        assert f"  tasks | POST http://127.0.0.1:{ports['worker']}/ (attempt 1)" in make.output
        assert f"  tasks | POST http://127.0.0.1:{ports['deliver']}/ (attempt 1)" in make.output
        done = rf"  tasks \| Done \S*/queues/work/tasks/\S*{task}\S* after 1 attempt\(s\), HTTP 200"
        assert re.search(done, make.output), make.output
        make.interrupt()
        assert make.lines[-1].endswith("| stopped"), make.output
        assert not group_alive(make.process.pid)
        assert left_in(clone) == []
    finally:
        make.kill()


OUTSIDE_AGENT = '''"""An agent in a folder of its own, outside the checkout."""

from shared.agent import AgentInfo, Context

AGENT = AgentInfo(name="Outside agent", description="Lives outside the checkout.")


def handle(ctx: Context) -> None:
    ctx.artifact(text=f"from outside: {ctx.text}", name="outside")
'''
# make dev's ports at their distance from PORT (emulator/dev.py: OFFSETS).
DERIVED = {"worker": 1, "deliver": 2, "tasks": 3, "firestore": 5}
# Where the ports the system hands out for outgoing connections begin (Linux's default).
_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
EPHEMERAL_START = int(_RANGE.read_text().split()[0]) if _RANGE.exists() else 32768


def free_base() -> int:
    """A PORT whose derived ports are all free too (each is checked, none is held), all
    below the system's ephemeral range: there, any process's outgoing connection may take
    one between the check and the bind (the Firestore emulator's once failed on it)."""
    rng = random.Random()
    for _ in range(50):
        base = rng.randrange(20000, EPHEMERAL_START - max(DERIVED.values()))
        ports = [base, *(base + offset for offset in DERIVED.values())]
        if not any(port_in_use("127.0.0.1", p) for p in ports):
            return base
    raise AssertionError("no free PORT with free derived ports")


@pytest.mark.emulator
def test_make_dev_serves_a_handler_outside_the_checkout_on_ports_from_port_alone(
    clone: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 26, item 3: PYTHONPATH reached no function, and PORT moved only a2a.
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "outside_agent.py").write_text(OUTSIDE_AGENT)
    base = free_base()
    make = Make(
        clone, "dev", f"PORT={base}", "HANDLER=outside_agent", env={"PYTHONPATH": str(agents)}
    )
    try:
        make.wait_ready()
        assert make.lines[-1].endswith("| ready"), make.output
        ports = {name: base + offset for name, offset in DERIVED.items()}
        assert f"  worker       http://127.0.0.1:{ports['worker']}/" in make.output
        assert f"  deliver      http://127.0.0.1:{ports['deliver']}/" in make.output
        assert f"  Firestore    127.0.0.1:{ports['firestore']}" in make.output
        assert f"  Cloud Tasks  127.0.0.1:{ports['tasks']}" in make.output
        assert all(port_in_use("127.0.0.1", port) for port in ports.values())
        # Each function answered, so each imported the outside handler; a2a serves it.
        a2a = Cli(f"http://localhost:{base}", tmp_path, capsys, monkeypatch)
        assert "Artifact Name: outside\nText:\nfrom outside: hi" in a2a.ok("send", "hi")
        make.interrupt()
        assert left_in(clone) == []
    finally:
        make.kill()


@pytest.mark.emulator
def test_make_dev_names_each_function_that_did_not_start_and_why(
    clone: Path, tmp_path: Path
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "broken_agent.py").write_text('"""Broken."""\n\nimport not_a_module_xyz  # noqa\n')
    make = Make(
        clone,
        "dev",
        f"PORT={free_base()}",
        "HANDLER=broken_agent",
        env={"PYTHONPATH": str(agents)},
    )
    try:
        make.wait_ready()
        for role in ("a2a", "worker", "deliver"):
            said = [line for line in make.lines if f"| {role} did not start: " in line]
            assert said, make.output
            assert "exited with code" in said[0] and "not_a_module_xyz" in said[0], said[0]
        assert make.lines[-1].endswith(
            "| not ready: fix what is named above and save, the functions restart on it"
        ), make.output
        assert not [line for line in make.lines if line.endswith("| ready")], make.output
        make.interrupt()
        assert left_in(clone) == []
    finally:
        make.kill()


def test_make_dev_refuses_a_handler_it_cannot_find_before_starting_anything(
    clone: Path,
) -> None:
    make = Make(clone, "dev", f"PORT={free_base()}", "HANDLER=nowhere_agent")
    try:
        assert make.process.wait(READY_SECONDS) != 0
        make.ready.wait(STOP_SECONDS)
        assert "error: the handler module nowhere_agent is not on the functions' PYTHONPATH" in (
            make.output
        )
        assert "put the folder that holds it on PYTHONPATH" in make.output
        assert "emulators ready" not in make.output and "| ready" not in make.output
        assert left_in(clone) == []
    finally:
        make.kill()


def test_make_run_allows_loopback_webhooks_and_says_so(
    clone: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    make = Make(clone, "run", f"PORT={port}")
    try:
        make.wait_answering(port)
        assert "webhooks allowed on: localhost,127.0.0.1" in make.output
        a2a = Cli(f"http://localhost:{port}", tmp_path, capsys, monkeypatch)
        asked = a2a("send", "request a new phone")
        assert asked.code == 0 and "State: INPUT_REQUIRED" in asked.out, asked  # which phone?
        task = asked.out.splitlines()[0].removeprefix("Task ID: ")
        # A receiver that accepts: a failing webhook's retries would hold up the stop.
        with HttpTarget.start() as receiver:
            hook = receiver.url("/hook")  # refused unless loopback hosts are allowed
            added = a2a.ok("task", "push-config", "create", task, hook, "--id", "c1")
            assert added.startswith(f"Config ID: c1\nURL: {hook}\n")
            assert a2a("send", "--task-id", task, "Android").code == 0  # done, or asks on
            receiver.wait_for("/hook", 1, timeout=20)
        make.interrupt()
        assert left_in(clone) == []
    finally:
        make.kill()


def listening_on(port: int) -> set[str]:
    """The IPv4 addresses a socket listens on at `port` (/proc/net/tcp: little-endian hex)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, hex_port = local.partition(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            found.add(".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_make_run_serves_only_this_machine(clone: Path) -> None:
    # Finding 3 of issue 25: loopback only, and no rebound name, other page or untyped POST.
    port = free_port()
    make = Make(clone, "run", f"PORT={port}")
    url = f"http://127.0.0.1:{port}/"
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "m",
                "role": "user",
                "parts": [{"kind": "text", "text": "hi"}],
            }
        },
    }
    body = json.dumps(send)
    typed = {"Content-Type": "application/json"}
    try:
        make.wait_answering(port)
        assert listening_on(port) == {"127.0.0.1"}
        assert "WARNING" not in make.output
        ok = requests.post(url, data=body, headers=typed, timeout=10)
        assert ok.json()["result"]["status"]["state"] == "completed", ok.text
        rebound = requests.post(
            url, data=body, headers={**typed, "Host": "rebind.attacker.example"}, timeout=10
        )
        assert rebound.status_code == 403 and rebound.json()["error"]["code"] == -32600
        assert "set A2A_AUTH=api-key" in rebound.json()["error"]["message"]
        page = requests.post(
            f"http://localhost:{port}/message:send",
            data=json.dumps(
                {"message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
            ),
            headers={**typed, "Origin": "https://attacker.example"},
            timeout=10,
        )
        assert page.status_code == 403 and page.json()["error"]["status"] == "PERMISSION_DENIED"
        untyped = requests.post(url, data=body, timeout=10)  # requests sends no Content-Type
        assert untyped.json()["error"]["code"] == -32005, untyped.text
        assert "send Content-Type: application/json" in untyped.json()["error"]["message"]
        seeds = requests.get(f"http://localhost:{port}/sse?taskId=nope", timeout=10)
        assert seeds.json()["error"]["code"] == -32001  # served: the task is not found
        make.interrupt()
    finally:
        make.kill()


def test_make_run_on_every_address_warns_without_credentials(clone: Path) -> None:
    port = free_port()
    make = Make(clone, "run", f"PORT={port}", "HOST=0.0.0.0")
    try:
        make.wait_answering(port)
        assert listening_on(port) == {"0.0.0.0"}
        assert "WARNING: HOST=0.0.0.0 listens on every address" in make.output
        assert "only connections from this machine are served" in make.output
        assert "set A2A_AUTH=api-key and A2A_API_KEYS" in make.output
        # A machine of the LAN names this one by its address: not a name it serves.
        answer = requests.get(
            f"http://127.0.0.1:{port}/.well-known/agent-card.json",
            headers={"Host": f"192.168.1.20:{port}"},
            timeout=10,
        )
        assert answer.status_code == 403 and "Host: 192.168.1.20" in answer.text
        # Issue 36, item 4: from another address of this machine (another machine's
        # connection, as the server sees it), a loopback name is no way in.
        lan = own_address()
        if lan is not None:
            outside = requests.get(
                f"http://{lan}:{port}/.well-known/agent-card.json",
                headers={"Host": f"localhost:{port}"},
                timeout=10,
            )
            assert outside.status_code == 403, outside.text
            assert f"not one from {lan}" in outside.text
        make.interrupt()
    finally:
        make.kill()


def own_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (a connection from it is not a
    loopback peer), if it has one: the one a route out would leave from (nothing is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def refused(make: Make) -> str:
    """The one line make's recipe printed before it failed (make's own `make: ***` aside,
    `make[1]: ***` when make runs within make, as CI's `make test` does)."""
    output = ended(make)
    assert make.process.returncode != 0, output
    ours = [line for line in make.lines if not re.match(r"make(\[\d+\])?: \*\*\*", line)]
    assert len(ours) == 1, output
    return ours[0]


def ended(make: Make) -> str:
    """make's output once it ended by itself (it must, soon)."""
    try:
        make.process.wait(READY_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"make still runs after {READY_SECONDS} s:\n{make.output}")
    make.ready.wait(STOP_SECONDS)
    return make.output


def test_make_run_on_a_busy_port_says_so_in_one_line_and_never_ready(clone: Path) -> None:
    # Issue 37, item 1: another server on the port answered the readiness check.
    with HttpTarget.start() as other:  # answers 200 to the card's GET, as an agent would
        port = other.server.server_address[1]
        make = Make(clone, "run", f"PORT={port}")
        try:
            line = refused(make)
            assert line.startswith(f"error: port {port} is in use"), line
            assert "pick another port: make run PORT=" in line
            assert other.received("/") == []  # nothing asked it anything
        finally:
            make.kill()


def test_make_run_names_a_mistyped_handler_and_the_closest_in_one_line(clone: Path) -> None:
    # Issue 37, item 3: it was a 30-line traceback.
    make = Make(clone, "run", f"PORT={free_port()}", "HANDLER=functions.handlers.unit")
    try:
        line = refused(make)
        assert line.startswith("error: the handler module functions.handlers.unit is not on")
        assert "the closest handler module there is functions.handlers.echo" in line
    finally:
        make.kill()


def test_make_run_shows_an_import_error_inside_the_handler_as_its_own(
    clone: Path, tmp_path: Path
) -> None:
    (tmp_path / "broken_agent.py").write_text('"""Broken."""\n\nimport not_a_module_xyz  # noqa\n')
    make = Make(
        clone,
        "run",
        f"PORT={free_port()}",
        "HANDLER=broken_agent",
        env={"PYTHONPATH": str(tmp_path)},
    )
    try:
        output = ended(make)
        assert make.process.returncode != 0
        assert "not_a_module_xyz" in output  # the module's own error, not "missing"
        assert "is not on the functions' PYTHONPATH" not in output and "closest" not in output
        assert "ready:" not in output
    finally:
        make.kill()


def path_without(tmp_path: Path, *names: str) -> str:
    """A PATH with every program of this one's but `names`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        with contextlib.suppress(OSError):
            for program in Path(entry).iterdir():
                link = folder / program.name
                if program.name not in names and not link.exists():
                    link.symlink_to(program)
    return str(folder)


def test_make_run_needs_no_java_no_emulator_and_no_browser(clone: Path, tmp_path: Path) -> None:
    # Issue 37, item 2: a first `make run` installed everything, and stopped without java.
    fresh = git_clone(tmp_path / "fresh")  # no .venv: the dry run shows the install too
    planned = make_says(fresh, "-n", "run")
    assert "pip install -q -e '.[cli]'" in planned, planned
    assert "emulator setup" not in planned and "[dev]" not in planned, planned
    tested = make_says(fresh, "-n", "test")
    assert "emulator setup" in tested and "[dev]" in tested  # what the dry run would show
    port = free_port()
    path = path_without(tmp_path, "java", "chromium", "node", "npm")
    make = Make(clone, "run", f"PORT={port}", env={"PATH": path})
    try:
        make.wait_answering(port)
        card = requests.get(f"http://localhost:{port}/.well-known/agent-card.json", timeout=10)
        assert card.status_code == 200
        make.interrupt()
    finally:
        make.kill()


def test_make_run_on_one_address_says_ready_once_it_answers_there(clone: Path) -> None:
    lan = own_address()
    if lan is None:
        pytest.skip("this machine has no address but loopback")
    port = free_port()
    keys = {"A2A_AUTH": "api-key", "A2A_API_KEYS": "ann:sha256:" + "0" * 64}
    make = Make(clone, "run", f"PORT={port}", f"HOST={lan}", env=keys)
    try:
        make.wait_ready()  # the card asked at that address, not at 127.0.0.1
        assert f"ready: http://localhost:{port} answers" in make.lines, make.output
        assert listening_on(port) == {lan} and "WARNING" not in make.output
        card = requests.get(f"http://{lan}:{port}/.well-known/agent-card.json", timeout=10)
        assert card.status_code == 200, card.text
        make.interrupt()
    finally:
        make.kill()


def test_make_dev_refuses_a_wider_address_without_credentials(clone: Path) -> None:
    make = Make(clone, "dev", f"PORT={free_base()}", "HOST=0.0.0.0")
    try:
        output = ended(make)
        assert make.process.returncode != 0
        assert "error: HOST=0.0.0.0 would serve the agent beyond this machine" in output
        assert "set A2A_AUTH=api-key and A2A_API_KEYS" in output
        assert "emulators ready" not in output
    finally:
        make.kill()


def test_make_help_names_no_variable_and_make_clean_leaves_no_build_leftovers(
    tmp_path: Path,
) -> None:
    fresh = git_clone(tmp_path / "a2a-functions")
    shown = make_says(fresh, "help")
    assert "run\t" in shown and "$(" not in shown, shown
    leftovers = [
        fresh / "a2a_functions.egg-info",
        fresh / "shared" / "__pycache__",
        fresh / "tests" / "bindings" / "__pycache__",
    ]
    for folder in leftovers:
        folder.mkdir()
        (folder / "x.pyc").write_bytes(b"")
    make_says(fresh, "clean")
    assert [folder for folder in leftovers if folder.exists()] == []
    assert (fresh / "shared" / "app.py").exists() and (fresh / "Makefile").exists()
