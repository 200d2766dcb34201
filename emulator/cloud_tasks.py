"""The local Cloud Tasks emulator: its own venv, the launcher process, and a client for it.

PyPI `gcloud-tasks-emulator` pins protobuf<5 while google-cloud-firestore needs protobuf>=6,
so it lives in `.emulators/tasks-venv`, created on first use. `emulator/tasks_launcher.py`
runs there (a thin layer that fills the package's gaps); this module installs, starts, waits
for and stops it by PID. Clients find it through $CLOUD_TASKS_EMULATOR_HOST (host:port).
Only grpc and google.cloud.tasks_v2 are imported, and only when needed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from emulator._process import (
    REPO_ROOT,
    STATE_DIR,
    Emulator,
    EmulatorError,
    free_port,
    launch,
    port_in_use,
)

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient

PACKAGE = "gcloud-tasks-emulator"
VERSION = "0.6.2"
DEFAULT_VENV = STATE_DIR / "tasks-venv"
# Every package of that venv, pinned (see the file's header); installed with --no-deps.
REQUIREMENTS = Path(__file__).with_name("tasks-requirements.txt")
_STAMP = ".a2a-requirements.sha256"  # in the venv: which REQUIREMENTS it was built from
HOST_ENV = "CLOUD_TASKS_EMULATOR_HOST"
SECRET_ENV = "CLOUD_TASKS_EMULATOR_SECRET"
NAME_RETENTION_ENV = "CLOUD_TASKS_EMULATOR_NAME_RETENTION"
DEFAULT_PORT = 9022
_LIST_QUEUES = "/google.cloud.tasks.v2.CloudTasks/ListQueues"
# The emulator is local: gRPC must not route it through an $http_proxy of the machine.
_NO_PROXY = [("grpc.enable_http_proxy", 0)]


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def installed_version(venv: Path = DEFAULT_VENV) -> str | None:
    """The gcloud-tasks-emulator version installed in venv, or None (read from its dist-info)."""
    if not _venv_python(venv).exists():
        return None
    for info in venv.glob("lib/python*/site-packages/gcloud_tasks_emulator-*.dist-info"):
        match = re.fullmatch(r"gcloud_tasks_emulator-(.+)\.dist-info", info.name)
        if match:
            return match.group(1)
    return None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    # Two test processes may set up the venv at once; one installs, the other waits.
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(argv: Sequence[str], out: IO[str] | None, what: str) -> None:
    """Run a setup command, streaming its output to out; fail with the output on error."""
    lines: list[str] = []
    with subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if out is not None:
                out.write(f"  | {line}")
                out.flush()
    if proc.returncode != 0:
        raise EmulatorError(
            f"{what} failed (exit {proc.returncode}): {' '.join(argv)}\n" + "".join(lines[-30:])
        )


def ensure_tasks_venv(
    venv: Path = DEFAULT_VENV, *, out: IO[str] | None = sys.stderr, python: str | None = None
) -> Path:
    """Create venv and install gcloud-tasks-emulator==0.6.2 in it unless already there.

    Idempotent and safe to call from several processes; prints progress to out (None: quiet).
    Returns the venv's python. Needs a package registry the first time (about 10 s).
    """
    with _locked(venv.parent / f"{venv.name}.lock"):
        found = installed_version(venv)
        wanted = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
        stamp = venv / _STAMP
        if found == VERSION and stamp.exists() and stamp.read_text().strip() == wanted:
            return _venv_python(venv)

        def say(text: str) -> None:
            if out is not None:
                out.write(f"[emulator] {text}\n")
                out.flush()

        started = time.monotonic()
        if not _venv_python(venv).exists() or not _healthy(venv):
            if venv.exists():
                say(f"{venv} is broken; recreating it")
                shutil.rmtree(venv)
            say(f"creating {venv} for {PACKAGE} (it pins protobuf<5, so not the project venv)")
            _run([python or sys.executable, "-m", "venv", str(venv)], out, "creating the venv")
        say(f"installing {PACKAGE}=={VERSION} into {venv}" + (f" (found {found})" if found else ""))
        pip = [str(_venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check"]
        pip += ["--progress-bar", "off", "--no-deps", "-r", str(REQUIREMENTS)]
        _run(pip, out, "pip install")
        if installed_version(venv) != VERSION:
            raise EmulatorError(f"{PACKAGE}=={VERSION} is still not installed in {venv}")
        stamp.write_text(wanted + "\n")
        say(f"{PACKAGE} {VERSION} ready in {time.monotonic() - started:.1f} s")
        return _venv_python(venv)


def _healthy(venv: Path) -> bool:
    # A venv copied or left from another Python points at a missing interpreter.
    try:
        subprocess.run(
            [str(_venv_python(venv)), "-c", "pass"], check=True, capture_output=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def _answers_list_queues(address: str, timeout: float = 1.0) -> bool:
    """True when a ListQueues call succeeds (an empty request is an empty byte string)."""
    import grpc  # type: ignore[import-untyped]

    with grpc.insecure_channel(address, options=_NO_PROXY) as channel:
        call = channel.unary_unary(_LIST_QUEUES)
        try:
            call(b"", timeout=timeout)
        except grpc.RpcError:
            return False
    return True


@dataclass
class TasksEmulator(Emulator):
    """A running Cloud Tasks emulator (our launcher) that we started."""

    secret: str | None = None

    def env(self) -> dict[str, str]:
        """The environment variables a client or a worker process needs."""
        env = {HOST_ENV: self.address}
        if self.secret:
            env[SECRET_ENV] = self.secret
        return env

    def is_ready(self) -> bool:
        """True when the gRPC port answers a ListQueues call."""
        return port_in_use(self.host, self.port) and _answers_list_queues(self.address)

    def client(self) -> CloudTasksClient:
        """A CloudTasksClient talking plain gRPC to this emulator."""
        return tasks_client(self.address)


def start_tasks_emulator(
    port: int | None = None,
    *,
    host: str = "127.0.0.1",
    secret: str | None = None,
    queues: Sequence[str] = (),
    name_retention: float | None = None,
    timeout: float = 30.0,
    venv: Path = DEFAULT_VENV,
    log_dir: Path | None = None,
    out: IO[str] | None = sys.stderr,
) -> TasksEmulator:
    """Install if needed, start the launcher, and wait until it answers ListQueues.

    port=None picks a free port. secret signs the OIDC-shaped tokens (HS256); None sends
    unsigned ones. queues are created at start (full names). name_retention is how long a
    finished task's name stays taken (default: an hour, like the real service).
    """
    python = ensure_tasks_venv(venv, out=out)
    if port is None:
        port = free_port(host)
    elif port_in_use(host, port):
        raise EmulatorError(
            f"Port {host}:{port} is already in use; is another Cloud Tasks emulator running? "
            "Stop it, or choose another port."
        )
    log_path = (log_dir or STATE_DIR) / f"cloud-tasks-{port}.log"
    log_path.unlink(missing_ok=True)
    argv = [str(python), "-m", "emulator.tasks_launcher", f"--host={host}", f"--port={port}"]
    argv += [f"--queue={name}" for name in queues]
    if name_retention is not None:
        argv.append(f"--name-retention={name_retention}")
    # Only what the launcher needs: the emulator package must not see the project's
    # PYTHONPATH or venv, and the secret reaches it through the environment, not argv.
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop(SECRET_ENV, None)
    if secret:
        env[SECRET_ENV] = secret
    return launch(
        lambda process: TasksEmulator(
            host=host,
            port=port,
            pid=process.pid,
            log_path=log_path,
            secret=secret,
            process=process,
        ),
        argv,
        log_path,
        what="The Cloud Tasks emulator",
        timeout=timeout,
        env=env,
    )


def tasks_client(address: str | None = None) -> CloudTasksClient:
    """A CloudTasksClient for the emulator at address (default: $CLOUD_TASKS_EMULATOR_HOST).

    Setting only api_endpoint would open TLS and fail; the emulator speaks plain gRPC.
    """
    address = address or os.environ.get(HOST_ENV)
    if not address:
        raise EmulatorError(f"No emulator address: pass one or set ${HOST_ENV} (host:port)")
    import grpc
    from google.cloud.tasks_v2 import CloudTasksClient
    from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport

    channel = grpc.insecure_channel(address, options=_NO_PROXY)
    return CloudTasksClient(transport=CloudTasksGrpcTransport(channel=channel))
