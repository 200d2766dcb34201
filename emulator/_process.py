"""Process plumbing shared by the emulator launchers: ports, log files, start and stop by PID.

Both emulators run as child processes in a session of their own, so that stopping one also
stops anything it forked (the process group has the child's PID as its id).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

# The repository root: emulator/ sits directly under it.
REPO_ROOT = Path(__file__).resolve().parent.parent
# Logs, the tasks venv and locks live here; .gitignore lists it.
STATE_DIR = REPO_ROOT / ".emulators"


class EmulatorError(RuntimeError):
    """An emulator could not be found, installed, started or reached; the message says why."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free right now (another process may still take it before us)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_in_use(host: str, port: int) -> bool:
    """True when something already accepts connections on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def port_taken(host: str, port: int) -> bool:
    """True when a server could not listen on host:port now, or `localhost:port` could reach
    another server: another socket holds host:port, or, for a loopback host, [::1]:port
    (clients that try IPv6 first reach that one). Tried as servers bind (gunicorn, the
    emulators): with SO_REUSEADDR, so a port whose last connections linger in TIME_WAIT is
    free, and a listener on every address (0.0.0.0, ::) holds each one. OSError when host:port
    is no place this user may listen (a privileged port, an address not of this machine)."""
    if _bind_refused(host, port):
        return True
    if host in ("localhost", "::1") or host.startswith("127."):
        with contextlib.suppress(OSError):  # a machine without IPv6: nothing listens there
            return _bind_refused("::1", port)
    return False


def _bind_refused(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def log_tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log file, for error messages; empty when the file is missing."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def spawn(
    argv: Sequence[str], log_path: Path, *, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start argv with stdout and stderr appended to log_path, in a new session (own group)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        # The child keeps its own copy of the descriptor, so ours can be closed at once.
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=REPO_ROOT,
            start_new_session=True,
        )


def pid_alive(pid: int) -> bool:
    """True while a process with this PID exists (zombies of our own children excluded)."""
    try:
        # Reap it if it is our exited child, so that a zombie does not count as alive.
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass  # not our child: fall back to signal 0
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # The group first (it holds anything the emulator forked), then the PID itself, in case
    # it was started by someone else without a session of its own.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def stop_pid(
    pid: int, *, grace: float = 5.0, process: subprocess.Popen[bytes] | None = None
) -> None:
    """Stop a process and its group: SIGTERM, wait up to grace seconds, then SIGKILL."""
    if process is not None and process.poll() is not None:
        # Already exited; still sweep its group, in case a grandchild outlived it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        return
    _signal_group(pid, signal.SIGTERM)
    if not _wait_gone(pid, grace, process):
        _signal_group(pid, signal.SIGKILL)
        _wait_gone(pid, 5.0, process)
    # Whatever is left in the group (a grandchild ignoring SIGTERM) goes too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _wait_gone(pid: int, timeout: float, process: subprocess.Popen[bytes] | None) -> bool:
    if process is not None:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)


def wait_until(
    ready: Callable[[], bool],
    *,
    process: subprocess.Popen[bytes],
    timeout: float,
    what: str,
    log_path: Path,
) -> None:
    """Poll ready() until it is true; fail early if the process exits, else at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        code = process.poll()
        if code is not None:
            raise EmulatorError(
                f"{what} exited with code {code} before it was ready. "
                f"Log {log_path}:\n{log_tail(log_path)}"
            )
        if ready():
            return
        if time.monotonic() >= deadline:
            stop_pid(process.pid, process=process)
            raise EmulatorError(
                f"{what} was not ready after {timeout:.0f} s (stopped it). "
                f"Log {log_path}:\n{log_tail(log_path)}"
            )
        time.sleep(0.05)


@dataclass
class Emulator:
    """A running emulator that we started: where it listens, and how to stop it (or use it
    as a context manager)."""

    host: str
    port: int
    pid: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False, kw_only=True)
    # Seconds from spawn to ready, for the figures people quote.
    startup_seconds: float = field(default=0.0, kw_only=True)

    @property
    def address(self) -> str:
        """host:port, the value clients put in their *_EMULATOR_HOST variable."""
        return f"{self.host}:{self.port}"

    def is_ready(self) -> bool:
        """True once the emulator answers (each emulator knows how to ask)."""
        raise NotImplementedError

    def alive(self) -> bool:
        """True while the emulator's process exists."""
        if self.process is not None:
            return self.process.poll() is None
        return pid_alive(self.pid)

    def stop(self) -> None:
        """Stop the emulator and its process group (terminate, then kill)."""
        stop_pid(self.pid, process=self.process)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


E = TypeVar("E", bound=Emulator)


def launch(
    make: Callable[[subprocess.Popen[bytes]], E],
    argv: Sequence[str],
    log_path: Path,
    *,
    what: str,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> E:
    """Spawn an emulator, wrap its process with `make`, and wait until it answers."""
    started = time.monotonic()
    process = spawn(argv, log_path, env=env)
    emulator = make(process)
    wait_until(
        emulator.is_ready,
        process=process,
        timeout=timeout,
        what=f"{what} (pid {process.pid}, port {emulator.port})",
        log_path=log_path,
    )
    emulator.startup_seconds = time.monotonic() - started
    return emulator
