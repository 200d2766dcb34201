"""A real `a2a` server (functions-framework, embedded backend, as `make run`) serving the
CLI tests' agent, and the CLI run in this process as its console script would run it."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared.client.cli import main
from tests.conftest import Server

STREAM_SECONDS = 1  # streams end this soon: `watch` and `send` must resume them


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture(scope="package")
def agent() -> Iterator[Server]:
    server = Server(
        {
            "A2A_HANDLER": "tests.client.agent",
            "A2A_STREAM_SECONDS": str(STREAM_SECONDS),
            "A2A_PUSH_ALLOWED_HOSTS": "127.0.0.1",
        }
    )
    yield server
    server.stop()


class Cli:
    """Runs `a2a --agent-card <agent> ARGS...` in this process, `stdin` as its input; file
    parts are written under `files` when a test passes `--files` (`self.files`)."""

    def __init__(
        self,
        url: str,
        files: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        self.url = url
        self.files = files
        self._capsys = capsys
        self._monkeypatch = monkeypatch

    def __call__(self, *args: str, stdin: str = "", url: str | None = None) -> Run:
        self._monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        self._capsys.readouterr()
        code = main(["--agent-card", url or self.url, *args])
        captured = self._capsys.readouterr()
        return Run(code, captured.out, captured.err)

    def ok(self, *args: str, stdin: str = "") -> str:
        """The output of a run that must succeed."""
        run = self(*args, stdin=stdin)
        assert run.code == 0, run
        return run.out


@pytest.fixture
def a2a(
    agent: Server,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Cli:
    return Cli(agent.url, tmp_path / "files", capsys, monkeypatch)
