"""`python -m emulator dev` (`make dev`): the deployed shape on this machine.

The Firestore and Cloud Tasks emulators, and `a2a`, `worker` and `deliver` each under its own
functions-framework, wired as `make deploy` wires them: each function's environment is
`infra.plan.function_env` (queue names, attempts, timeouts, the service account Cloud Tasks
signs for) with `infra.plan.WIRING`'s URLs pointing at the local ports, and the queues carry
the retry policies of `infra/deploy.toml`. The emulator signs its OIDC-shaped tokens with a
secret the worker and the deliverer check (emulator/oidc.py). Local differences, all said in
the banner: callers are not authenticated unless A2A_AUTH says so, webhooks on this machine
are allowed, the console is on.

The functions' output and the Cloud Tasks emulator's dispatches are one stream, each line
prefixed with its process's name. When a Python file under functions/ or shared/ (or the
handler module's) changes, the three functions restart; the emulators and their data stay.
Ctrl-C (SIGINT) or SIGTERM stops everything this started, by process group.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING

from emulator import cloud_tasks, firestore
from emulator._process import REPO_ROOT, EmulatorError, port_in_use, stop_pid
from emulator.cloud_tasks import TasksEmulator, start_tasks_emulator
from emulator.firestore import FirestoreEmulator, start_firestore

if TYPE_CHECKING:
    from infra.settings import Settings as Deploy

ROLES = ("a2a", "worker", "deliver")
LOOPBACK_HOSTS = "localhost,127.0.0.1"
# Deploy-time settings that make no sense here: callers' identity is the developer's choice
# (A2A_AUTH in the environment), and the audience is the deployed URL.
NOT_LOCAL = ("A2A_AUTH", "A2A_AUDIENCE")
WATCHED = ("functions", "shared")  # folders whose Python files restart the functions
POLL_SECONDS = 0.5  # how often the files are looked at
START_SECONDS = 30.0  # a function that does not answer by then is reported as not started
STOP_GRACE = 2.0  # seconds each process has after SIGTERM before SIGKILL


@dataclass
class Function:
    """One function under functions-framework: its role, port, environment and process."""

    role: str
    port: int
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    reader: threading.Thread | None = field(default=None, repr=False)


def local_url(role: str, port: int) -> str:
    # a2a's is the URL people type (and its card shows); the queues' targets take an address.
    return f"http://localhost:{port}/" if role == "a2a" else f"http://127.0.0.1:{port}/"


def function_envs(
    deploy: Deploy,
    ports: Mapping[str, int],
    emulators: Mapping[str, str],
    environ: Mapping[str, str],
) -> dict[str, dict[str, str]]:
    """Each role's environment: the deploy's (`infra.plan.function_env`) and wiring, local
    URLs, the emulators' variables; the developer's A2A_* variables win except for the wiring,
    and loopback webhooks are allowed unless A2A_PUSH_ALLOWED_HOSTS is set."""
    from infra.plan import WIRING, function_env

    own = {k: v for k, v in environ.items() if k.startswith("A2A_")}
    envs: dict[str, dict[str, str]] = {}
    for role in ROLES:
        deployed = {k: v for k, v in function_env(deploy, role).items() if k not in NOT_LOCAL}
        wiring = {var: local_url(target, ports[target]) for var, target in WIRING[role].items()}
        local = {"A2A_PUSH_ALLOWED_HOSTS": LOOPBACK_HOSTS}
        if role == "a2a":
            local["A2A_CONSOLE"] = "true"  # the browser console, for development only
        envs[role] = {
            **deployed,
            **local,
            **own,
            **wiring,
            "A2A_BACKEND": "firestore",
            **emulators,
            "PYTHONPATH": str(REPO_ROOT),
            "PYTHONUNBUFFERED": "1",
        }
    return envs


def create_queues(tasks: TasksEmulator, deploy: Deploy) -> list[str]:
    """The deploy's two queues on the emulator, with its retry policies and rate limits."""
    from google.cloud import tasks_v2
    from google.protobuf import duration_pb2

    def seconds(text: str) -> duration_pb2.Duration:
        duration = duration_pb2.Duration()
        duration.FromNanoseconds(int(float(text.removesuffix("s")) * 1e9))
        return duration

    parent = f"projects/{deploy.project}/locations/{deploy.region}"
    names = []
    client = tasks.client()
    try:
        for queue in (deploy.queues.work, deploy.queues.push):
            name = f"{parent}/queues/{queue.name}"
            retry = tasks_v2.RetryConfig(
                max_attempts=queue.max_attempts,
                min_backoff=seconds(queue.min_backoff),
                max_backoff=seconds(queue.max_backoff),
                max_doublings=queue.max_doublings,
                max_retry_duration=seconds(queue.max_retry_duration),
            )
            limits = tasks_v2.RateLimits(
                max_dispatches_per_second=queue.max_dispatches_per_second,
                max_concurrent_dispatches=queue.max_concurrent_dispatches,
            )
            client.create_queue(
                parent=parent,
                queue=tasks_v2.Queue(name=name, retry_config=retry, rate_limits=limits),
            )
            names.append(name)
    finally:
        client.transport.close()  # type: ignore[no-untyped-call]
    return names


class Dev:
    """The running stack: start, reload, stop. Output goes to `out`, one prefixed stream."""

    def __init__(self, args: argparse.Namespace, out: IO[str]) -> None:
        self.args = args
        self.out = out
        self.stop = threading.Event()
        self._print_lock = threading.Lock()
        self.store: FirestoreEmulator | None = None
        self.tasks: TasksEmulator | None = None
        self.functions: list[Function] = []

    def say(self, text: str, prefix: str = "dev") -> None:
        with self._print_lock:
            for line in text.splitlines() or [""]:
                print(f"{prefix:>7} | {line}", file=self.out, flush=True)

    def run(self) -> int:
        try:
            return self._run()
        except EmulatorError as exc:
            self.say(f"error: {exc}")
            return 1
        finally:
            self.shutdown()

    def _run(self) -> int:
        from infra.settings import SettingsError, load

        args = self.args
        try:
            deploy = load(environ={**os.environ, "PROJECT": args.project, "HANDLER": args.handler})
        except SettingsError as exc:
            raise EmulatorError(f"the deploy settings (infra/deploy.toml): {exc}") from None
        ports = {"a2a": args.port, "worker": args.worker_port, "deliver": args.deliver_port}
        for role, port in ports.items():
            if port_in_use("127.0.0.1", port):
                raise EmulatorError(
                    f"port {port} (for {role}) is in use: stop what serves it, or choose other "
                    "ports (make dev PORT=N DEV_ARGS='--worker-port N --deliver-port N')"
                )
        secret = os.environ.get(cloud_tasks.SECRET_ENV) or secrets.token_urlsafe(24)
        # Both at once: each takes seconds, mostly waiting.
        with ThreadPoolExecutor(2) as pool:
            store = pool.submit(start_firestore, args.firestore_port, project=args.project)
            tasks = pool.submit(start_tasks_emulator, args.tasks_port, secret=secret, out=None)
            failures = [e for f in (store, tasks) if (e := f.exception()) is not None]
        # Whichever started is stopped at shutdown, also when the other failed.
        self.store = None if store.exception() else store.result()
        self.tasks = None if tasks.exception() else tasks.result()
        if failures:
            raise failures[0]
        assert self.store is not None and self.tasks is not None
        self.say(
            f"emulators ready: Firestore in {self.store.startup_seconds:.1f} s, "
            f"Cloud Tasks in {self.tasks.startup_seconds:.1f} s"
        )
        if self.stop.is_set():
            return 0
        queues = create_queues(self.tasks, deploy)
        emulators = {
            **self.store.env(),
            **self.tasks.env(),
            "GOOGLE_CLOUD_PROJECT": args.project,
        }
        envs = function_envs(deploy, ports, emulators, os.environ)
        self.functions = [Function(role, ports[role], envs[role]) for role in ROLES]
        if self.stop.is_set():
            return 0
        self.start_functions()
        self.banner(queues)
        # What the queues dispatch, and how the functions answered, in the same stream.
        tail = threading.Thread(target=self._tail, args=(self.tasks.log_path,), daemon=True)
        tail.start()
        self.say("ready")
        seen = snapshot(self.watched())
        while not self.stop.wait(POLL_SECONDS):
            now = snapshot(self.watched())
            if now != seen:
                changed = changes(seen, now)
                seen = now
                self.say(f"{', '.join(changed[:3])} changed: restarting the functions")
                self.stop_functions()
                self.start_functions()
                self.say("ready")
        return 0

    def watched(self) -> list[Path]:
        roots = [REPO_ROOT / folder for folder in WATCHED]
        handler = REPO_ROOT.joinpath(*self.args.handler.split("."))
        roots += [handler.with_suffix(".py"), handler]
        return roots

    def start_functions(self) -> None:
        framework = Path(sys.executable).with_name("functions-framework")
        for function in self.functions:
            function.process = subprocess.Popen(
                [
                    str(framework),
                    f"--target={function.role}",
                    f"--source={REPO_ROOT / 'functions' / 'main.py'}",
                    f"--port={function.port}",
                ],
                cwd=REPO_ROOT,
                env=function.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                # A group of its own: gunicorn serves from a forked child, which stop must reach.
                start_new_session=True,
            )
            function.reader = threading.Thread(
                target=self._relay, args=(function.role, function.process), daemon=True
            )
            function.reader.start()
        started = time.monotonic()
        deadline = started + START_SECONDS
        for function in self.functions:
            if not self._wait_answering(function, deadline) and not self.stop.is_set():
                self.say(
                    f"{function.role} did not start (its output is above): fix it and save, "
                    "the functions restart on the change"
                )
        self.say(f"functions started in {time.monotonic() - started:.1f} s")

    def _wait_answering(self, function: Function, deadline: float) -> bool:
        assert function.process is not None
        while time.monotonic() < deadline and not self.stop.is_set():
            if function.process.poll() is not None:
                return False
            if port_in_use("127.0.0.1", function.port):
                return True
            time.sleep(0.05)
        return False

    def _tail(self, log: Path) -> None:
        """Relay the Cloud Tasks emulator's log lines (from now on) until the stop."""
        with log.open(errors="replace") as lines:
            lines.seek(0, os.SEEK_END)
            while not self.stop.is_set():
                line = lines.readline()
                if line:
                    self.say(line.rstrip("\n").split(" [TASKS] ", 1)[-1], "tasks")
                else:
                    self.stop.wait(POLL_SECONDS / 5)

    def _relay(self, role: str, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        with process.stdout:
            for raw in process.stdout:
                self.say(raw.decode(errors="replace").rstrip("\n"), role)

    def banner(self, queues: list[str]) -> None:
        assert self.store is not None and self.tasks is not None
        a2a = local_url("a2a", self.args.port)
        auth = os.environ.get("A2A_AUTH") or "none"
        hosts = os.environ.get("A2A_PUSH_ALLOWED_HOSTS", LOOPBACK_HOSTS)
        lines = [
            f"{self.args.handler} as deployed: a2a, worker and deliver on the emulators",
            f"  agent card   {a2a}.well-known/agent-card.json",
            f"  JSON-RPC     {a2a}   (HTTP+JSON at the same base URL)",
            f"  console      {a2a}console",
            f"  worker       {local_url('worker', self.args.worker_port)}   <- {queues[0]}",
            f"  deliver      {local_url('deliver', self.args.deliver_port)}   <- {queues[1]}",
            f"  Firestore    {self.store.address}   log {self.store.log_path}",
            f"  Cloud Tasks  {self.tasks.address}   log {self.tasks.log_path}",
            f"  A2A_AUTH={auth}"
            + (": no credentials asked, every caller is one owner" if auth == "none" else ""),
            f"  webhooks allowed on: {hosts or 'no private host'} (A2A_PUSH_ALLOWED_HOSTS)",
            f"  client: .venv/bin/a2a --url {a2a} send hello",
            "Saving a file under functions/ or shared/ restarts the functions; Ctrl-C stops all.",
        ]
        self.say("\n".join(lines))

    def stop_functions(self) -> None:
        running = [f.process for f in self.functions if f.process is not None]
        _stop_all(running)
        for function in self.functions:
            if function.reader is not None:
                function.reader.join(STOP_GRACE)
            function.process = function.reader = None

    def shutdown(self) -> None:
        """Stop the functions, then the emulators: SIGTERM to every group at once, then
        each gets STOP_GRACE seconds before SIGKILL."""
        self.say("stopping")
        emulators = [e for e in (self.tasks, self.store) if e is not None]
        for emulator in emulators:
            _terminate(emulator.pid)
        self.stop_functions()
        for emulator in emulators:
            stop_pid(emulator.pid, grace=STOP_GRACE, process=emulator.process)
        self.say("stopped")


def _terminate(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)


def _stop_all(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        _terminate(process.pid)
    for process in processes:
        stop_pid(process.pid, grace=STOP_GRACE, process=process)


def snapshot(roots: list[Path]) -> dict[Path, float]:
    """The modification time of every Python file under (or at) the roots."""
    return {path: mtime for path, mtime in _python_files(roots)}


def changes(before: Mapping[Path, float], after: Mapping[Path, float]) -> list[str]:
    """The files added, removed or modified between two snapshots, relative to the root."""
    modified = {p for p in before.keys() & after.keys() if before[p] != after[p]}
    paths = before.keys() ^ after.keys() | modified
    return sorted(str(p.relative_to(REPO_ROOT)) for p in paths)


def _python_files(roots: list[Path]) -> Iterator[tuple[Path, float]]:
    for root in roots:
        paths = [root] if root.is_file() else root.rglob("*.py") if root.is_dir() else []
        for path in paths:
            try:
                yield path, path.stat().st_mtime
            except FileNotFoundError:
                continue  # removed while we looked: the next look sees it gone


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m emulator dev", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--port", type=int, default=8080, help="a2a's port (default 8080)")
    parser.add_argument("--worker-port", type=int, default=8081)
    parser.add_argument("--deliver-port", type=int, default=8082)
    parser.add_argument("--firestore-port", type=int, default=firestore.DEFAULT_PORT)
    parser.add_argument("--tasks-port", type=int, default=cloud_tasks.DEFAULT_PORT)
    parser.add_argument("--project", default=firestore.DEFAULT_PROJECT)
    parser.add_argument("--handler", default="functions.handlers.sample")
    return parser


def main(argv: list[str] | None = None) -> int:
    dev = Dev(_parser().parse_args(argv), sys.stdout)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        dev.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    # Explicitly, so that `kill -INT` works even where a shell started us with SIGINT ignored.
    signal.signal(signal.SIGINT, on_signal)
    return dev.run()
