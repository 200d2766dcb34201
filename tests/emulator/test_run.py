"""What `make run` and `make dev` check before they start (emulator/run.py, emulator/handler.py)
and what their "ready" means (emulator/ready.py): a busy port or a missing handler module is
one line naming it and what to do, and only the run's own server is ever called ready. The
whole runs, from a fresh clone: tests/system/test_make_dev.py."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator import handler, ready, run
from emulator._process import REPO_ROOT, port_taken
from emulator.http_target import HttpTarget
from tests.conftest import free_port

CHECKOUT = [str(REPO_ROOT)]


@contextlib.contextmanager
def listener(host: str = "127.0.0.1", port: int = 0) -> Iterator[int]:
    """Another program's socket listening on host:port (0: a free one); its port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.fixture
def other_process() -> Iterator[int]:
    """A running process that listens on nothing: the PID of a server that is not the one
    answering."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        yield process.pid
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(10)


# --- the port -------------------------------------------------------------------------------


def test_a_busy_port_is_one_line_naming_it_and_a_free_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with listener() as port:
        assert run.main(["--port", str(port), "functions.handlers.sample"]) == 1
    said = capsys.readouterr()
    assert said.out == "" and said.err.count("\n") == 1, said.err
    assert f"error: port {port} is in use: another program listens on it" in said.err
    suggested = int(said.err.rsplit("make run PORT=", 1)[1])
    assert suggested > port and not port_taken("127.0.0.1", suggested)


def test_a_listener_on_every_address_or_on_ipv6_loopback_holds_the_port() -> None:
    with listener("0.0.0.0") as port:
        assert port_taken("127.0.0.1", port) and port_taken("0.0.0.0", port)
    if socket.has_ipv6:
        with listener("::1") as port:  # where `localhost` may take a client first
            assert port_taken("127.0.0.1", port) and port_taken("localhost", port)
    port = free_port()
    assert not port_taken("127.0.0.1", port) and not port_taken("0.0.0.0", port)


def test_no_place_to_listen_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run.main(["--port", "70000", "functions.handlers.sample"]) == 1
    assert "error: PORT=70000 is not a port" in capsys.readouterr().err
    assert (
        run.main(["--host", "203.0.113.7", "--port", "8080", "x"]) == 1
    )  # TEST-NET-3: no address here
    said = capsys.readouterr().err
    assert said.startswith("error: cannot listen on 203.0.113.7:8080") and said.count("\n") == 1


def test_a_free_port_and_a_handler_that_is_there_pass(capsys: pytest.CaptureFixture[str]) -> None:
    assert run.main(["--port", str(free_port()), "functions.handlers.sample"]) == 0
    assert capsys.readouterr() == ("", "")


# --- the handler module ---------------------------------------------------------------------


def test_a_mistyped_handler_is_one_line_naming_the_closest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Issue 37, item 3: `make run HANDLER=functions.handlers.unit`.
    assert run.main(["--port", str(free_port()), "functions.handlers.smaple"]) == 1
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "Traceback" not in said
    assert said.startswith(
        "error: the handler module functions.handlers.smaple is not on the functions' PYTHONPATH"
    )
    assert "the closest handler module there is functions.handlers.sample" in said
    assert handler.closest("tests.handlers.tk", CHECKOUT) == "tests.handlers.tck"
    assert handler.closest("sample", CHECKOUT) == "functions.handlers.sample"  # its last part
    assert handler.closest("zzzqqq", CHECKOUT) is None  # nothing close: nothing suggested
    assert "closest" not in handler.missing("zzzqqq", CHECKOUT)


def test_the_lookup_runs_nothing_and_finds_what_fails_to_import(tmp_path: Path) -> None:
    (tmp_path / "far_agent.py").write_text("raise SystemExit('never run by the lookup')\n")
    package = tmp_path / "team"
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('nor is this')\n")
    (package / "agent.py").write_text("import not_a_module_xyz\n\ndef handle(ctx): ...\n")
    path = [str(tmp_path), *CHECKOUT]
    assert handler.locate("far_agent", path) == tmp_path / "far_agent.py"
    # An import error inside the module is the module's own, for the server to report:
    # the lookup finds it.
    assert handler.locate("team.agent", path) == package / "agent.py"
    assert handler.locate("team", path) == package / "__init__.py"
    assert handler.locate("team.nobody", path) is None
    assert handler.locate("far_agent.sub", path) is None  # a module, no package
    assert handler.closest("team.agnet", [str(tmp_path)]) == "team.agent"
    (tmp_path / "namespace_only").mkdir()
    assert handler.locate("namespace_only", path) is None  # no file to import


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_handler_name_gets_a_file_or_one_line(name: str) -> None:
    found = handler.locate(name, CHECKOUT)
    if found is None:
        line = handler.missing(name, [str(REPO_ROOT / "functions")])
        assert line.startswith("error: ") and "\n" not in line and "\r" not in line
    else:
        assert found.is_file() and found.is_relative_to(REPO_ROOT)


def test_the_walk_for_suggestions_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    (deep / "agent.py").write_text("def handle(ctx): ...\n")
    (tmp_path / "a" / "b" / "c" / "shallow.py").write_text("async def handle(ctx): ...\n")
    assert list(handler.handler_modules([str(tmp_path)])) == ["a.b.c.shallow"]
    monkeypatch.setattr(handler, "MAX_FILES", 2)
    assert list(handler.handler_modules([str(tmp_path)])) == []


# --- ready ----------------------------------------------------------------------------------


def test_an_answer_counts_only_from_the_servers_own_process(other_process: int) -> None:
    with HttpTarget.start() as other:  # answers 200 to every GET: another agent
        url = other.url(ready.CARD_PATH)
        port = other.server.server_address[1]
        assert ready.holds_listener(os.getpid(), port) is True
        assert ready.holds_listener(other_process, port) is False
        ours = ready.wait_answering(
            url,
            lambda code: code == 200,
            running=lambda: True,
            deadline=time.monotonic() + 30,
            pid=os.getpid(),
        )
        assert ours == 200
        # Issue 37, item 1: another program's answer is no "ready" for this run's server.
        theirs = ready.wait_answering(
            url,
            lambda code: code == 200,
            running=lambda: True,
            deadline=time.monotonic() + 0.3,
            pid=other_process,
        )
        assert theirs is None


def test_make_runs_watcher_never_says_ready_for_another_program(other_process: int) -> None:
    with HttpTarget.start() as other:
        url = other.url(ready.CARD_PATH)
        said = subprocess.run(
            [
                sys.executable,
                "-m",
                "emulator.ready",
                "--pid",
                str(other_process),
                "--seconds",
                "1",
                "--say",
                "ready!",
                url,
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert said.returncode == 1 and "ready!" not in said.stdout
    assert said.stdout.startswith(f"not ready: {url} answered nothing"), said.stdout


def test_a_listener_of_no_process_is_nobodys() -> None:
    with listener() as port:
        assert ready.holds_listener(2**22 + 12345, port) is False  # no such PID


def test_the_card_is_asked_where_a_server_on_host_is_reached() -> None:
    assert ready.reach("0.0.0.0") == ready.reach("::") == "127.0.0.1"
    assert ready.reach("192.0.2.2") == "192.0.2.2"  # a server on one address: there
    assert ready.reach("::1") == "[::1]"
