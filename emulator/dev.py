"""`python -m emulator dev` (`make dev`): the deployed shape on this machine.

The Firestore and Cloud Tasks emulators, and `a2a`, `worker` and `deliver` each under its own
functions-framework, wired as `make deploy` wires them: each function's environment is
`infra.plan.function_env` (queue names, attempts, timeouts, the service account Cloud Tasks
signs for) with `infra.plan.WIRING`'s URLs pointing at the local ports, and the queues carry
the retry policies of `infra/deploy.toml`. The emulator signs its OIDC-shaped tokens with a
secret the worker and the deliverer check (emulator/oidc.py). Local differences, all said in
the banner: callers are not authenticated unless A2A_AUTH says so, webhooks on this machine
are allowed, the console is on.

Every port follows `--port` (`make dev PORT=N`): worker N+1, deliver N+2, Cloud Tasks N+3,
Firestore N+5 (8080 gives the Firestore emulator its own default, 8085), one block of six
ports; DEV_ARGS' flags move one. Everything listens on loopback but a2a, on `--host`
(`make dev HOST=0.0.0.0`), which may be wider only when the developer's A2A_AUTH asks
credentials: without them, a2a serves this machine's connections alone anyway
(shared/bindings/local_only.py). The handler is looked up on the developer's PYTHONPATH
(after this checkout) before anything starts, without running it (emulator/handler.py: a
missing one is one line, naming the closest handler module there is), and the functions get
that path too. The ports are checked free first. "ready" is said once each function
answered over HTTP, from its own process (emulator/ready.py); otherwise each one that did
not is named, with the last line it wrote (the exception a failed import ends with).

The functions' output and the Cloud Tasks emulator's dispatches are one stream, each line
prefixed with its process's name. When a Python file under functions/ or shared/ (or the
handler module's) changes, the three functions restart; the emulators and their data stay.
Ctrl-C (SIGINT) or SIGTERM stops everything this started, by process group.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ipaddress
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

from emulator import cloud_tasks, firestore, ready
from emulator._process import REPO_ROOT, EmulatorError, port_taken, stop_pid
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
DEFAULT_PORT = 8080
LOOPBACK = "127.0.0.1"  # where all but a2a listen, whatever --host says
# Each port's distance from a2a's: one block of six from PORT, so that a PORT drawn below the
# ephemeral range keeps them all there; 8080 keeps the Firestore emulator on its own default
# (8085). The Cloud Tasks emulator's own default, 9022, is `make emulators`'.
OFFSETS = {
    "worker": 1,
    "deliver": 2,
    "tasks": 3,
    "firestore": firestore.DEFAULT_PORT - DEFAULT_PORT,
}
TAIL_LINES = 40  # what is kept of each function's output, to say why it did not start


@dataclass
class Function:
    """One function under functions-framework: its role, port, environment and process."""

    role: str
    port: int
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    reader: threading.Thread | None = field(default=None, repr=False)
    tail: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=TAIL_LINES), repr=False
    )

    def why(self) -> str:
        """Why it does not answer: how it exited and the last line it wrote."""
        code = self.process.poll() if self.process is not None else None
        said = next((line.strip() for line in reversed(self.tail) if line.strip()), "")
        how = (
            f"exited with code {code}" if code is not None else f"no answer in {START_SECONDS:g} s"
        )
        return f"{how}: {said}" if said else how


def ports_from(args: argparse.Namespace) -> dict[str, int]:
    """a2a's port and every other one: given in DEV_ARGS, or at its offset from a2a's."""
    ports = {"a2a": args.port}
    for name, offset in OFFSETS.items():
        given = getattr(args, f"{name}_port")
        ports[name] = args.port + offset if given is None else given
    for name, port in ports.items():
        if not 1 <= port <= 65535:
            raise EmulatorError(
                f"port {port} (for {name}, PORT={args.port} + {OFFSETS.get(name, 0)}) is not a "
                f"port: choose a lower PORT, or set it with DEV_ARGS='--{name}-port N'"
            )
    taken: dict[int, str] = {}
    for name, port in ports.items():
        if port in taken:
            raise EmulatorError(
                f"port {port} is given to both {taken[port]} and {name}: give each its own "
                "(DEV_ARGS='--worker-port N --deliver-port N --firestore-port N --tasks-port N')"
            )
        taken[port] = name
    return ports


def python_path(environ: Mapping[str, str]) -> str:
    """The functions' PYTHONPATH: this checkout first, then the developer's."""
    theirs = environ.get("PYTHONPATH", "")
    return os.pathsep.join([str(REPO_ROOT), *(part for part in theirs.split(os.pathsep) if part)])


def find_handler(module: str, path: str) -> Path:
    """The file of the handler module as the functions will import it (on `path`), found
    without running it (emulator/handler.py, in an interpreter on that path); EmulatorError
    naming the module, the path and the closest handler module there when there is none."""
    found = subprocess.run(
        [sys.executable, "-m", "emulator.handler", "--make", "dev", module],
        env={**os.environ, "PYTHONPATH": path},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if found.returncode != 0:
        said = found.stderr.strip().splitlines()
        raise EmulatorError(said[-1].removeprefix("error: ") if said else "no handler module")
    return Path(found.stdout.strip())


def check_host(host: str, environ: Mapping[str, str]) -> None:
    """A wider address than loopback only with credentials: EmulatorError otherwise."""
    if _is_loopback(host) or (environ.get("A2A_AUTH") or "none") != "none":
        return
    raise EmulatorError(
        f"HOST={host} would serve the agent beyond this machine, but A2A_AUTH=none asks no "
        "credentials: set A2A_AUTH=api-key and A2A_API_KEYS (docs/security.md), or leave "
        "HOST out to serve this machine only"
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
    # One owner's log tag alike on the three functions, as the deploy's shared secret makes it.
    own.setdefault("A2A_LOG_OWNER_KEY", secrets.token_hex(32))
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
            "PYTHONPATH": python_path(environ),
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
        self.handler_file: Path | None = None

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
        check_host(args.host, os.environ)
        ports = ports_from(args)
        # Before anything starts: a handler the functions cannot import would kill all three.
        self.handler_file = find_handler(args.handler, python_path(os.environ))
        for role, port in ports.items():
            host = args.host if role == "a2a" else LOOPBACK
            try:
                taken = port_taken(host, port)
            except OSError as exc:  # a privileged port, an address not of this machine
                raise EmulatorError(
                    f"cannot listen on {host}:{port} (for {role}): {exc.strerror or exc}"
                ) from None
            if taken:
                raise EmulatorError(
                    f"port {port} (for {role}) is in use: stop what serves it, or choose another "
                    f"PORT (every port follows it), or set this one with DEV_ARGS='--{role}-port N'"
                )
        secret = os.environ.get(cloud_tasks.SECRET_ENV) or secrets.token_urlsafe(24)
        # Both at once: each takes seconds, mostly waiting.
        with ThreadPoolExecutor(2) as pool:
            store = pool.submit(start_firestore, ports["firestore"], project=args.project)
            tasks = pool.submit(start_tasks_emulator, ports["tasks"], secret=secret, out=None)
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
        answering = self.start_functions()
        self.banner(queues, ports)
        # What the queues dispatch, and how the functions answered, in the same stream.
        tail = threading.Thread(target=self._tail, args=(self.tasks.log_path,), daemon=True)
        tail.start()
        self._say_ready(answering)
        seen = snapshot(self.watched())
        while not self.stop.wait(POLL_SECONDS):
            now = snapshot(self.watched())
            if now != seen:
                changed = changes(seen, now)
                seen = now
                self.say(f"{', '.join(changed[:3])} changed: restarting the functions")
                self.stop_functions()
                self._say_ready(self.start_functions())
        return 0

    def _say_ready(self, answering: bool) -> None:
        if answering:
            self.say("ready")
        elif not self.stop.is_set():
            self.say("not ready: fix what is named above and save, the functions restart on it")

    def watched(self) -> list[Path]:
        roots = [REPO_ROOT / folder for folder in WATCHED]
        if self.handler_file is not None:  # a package's whole folder, else its one file
            package = self.handler_file.name == "__init__.py"
            roots.append(self.handler_file.parent if package else self.handler_file)
        return roots

    def start_functions(self) -> bool:
        """Start the three; True once each answers over HTTP, else each failure is said."""
        framework = Path(sys.executable).with_name("functions-framework")
        for function in self.functions:
            function.tail.clear()
            function.process = subprocess.Popen(
                [
                    str(framework),
                    f"--target={function.role}",
                    f"--source={REPO_ROOT / 'functions' / 'main.py'}",
                    f"--host={self.args.host if function.role == 'a2a' else LOOPBACK}",
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
        failed = [f for f in self.functions if not self._answers(f, deadline)]
        if self.stop.is_set():
            return False
        for function in failed:
            exited = function.process is not None and function.process.poll() is not None
            if exited and function.reader is not None:
                function.reader.join(STOP_GRACE)  # its last words, before they are read
            self.say(f"{function.role} did not start: {function.why()}")
        if not failed:
            self.say(f"functions started in {time.monotonic() - started:.1f} s")
        return not failed

    def _answers(self, function: Function, deadline: float) -> bool:
        """a2a serves its card; worker and deliver answer at all, at a path functions-framework
        answers itself (a GET is not theirs: asked of them, each would log a warning)."""
        process = function.process
        assert process is not None
        host = self.args.host if function.role == "a2a" else LOOPBACK
        base = f"http://{ready.reach(host)}:{function.port}"
        card = function.role == "a2a"
        url = base + (ready.CARD_PATH if card else ready.QUIET_PATH)

        def wanted(code: int) -> bool:
            return code == 200 if card else code < 500

        seen = ready.wait_answering(
            url,
            wanted,
            running=lambda: process.poll() is None and not self.stop.is_set(),
            deadline=deadline,
            pid=process.pid,
        )
        return seen is not None and wanted(seen)

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
        function = next(f for f in self.functions if f.role == role)
        with process.stdout:
            for raw in process.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                function.tail.append(line)
                self.say(line, role)

    def banner(self, queues: list[str], ports: Mapping[str, int]) -> None:
        assert self.store is not None and self.tasks is not None
        a2a = local_url("a2a", ports["a2a"])
        auth = os.environ.get("A2A_AUTH") or "none"
        hosts = os.environ.get("A2A_PUSH_ALLOWED_HOSTS", LOOPBACK_HOSTS)
        lines = [
            f"{self.args.handler} as deployed: a2a, worker and deliver on the emulators",
            f"  agent card   {a2a}.well-known/agent-card.json",
            f"  JSON-RPC     {a2a}   (HTTP+JSON at the same base URL)",
            f"  console      {a2a}console",
            f"  worker       {local_url('worker', ports['worker'])}   <- {queues[0]}",
            f"  deliver      {local_url('deliver', ports['deliver'])}   <- {queues[1]}",
            f"  Firestore    {self.store.address}   log {self.store.log_path}",
            f"  Cloud Tasks  {self.tasks.address}   log {self.tasks.log_path}",
            f"  listening    a2a on {self.args.host}, all else on {LOOPBACK} only",
            f"  A2A_AUTH={auth}"
            + (
                ": no credentials asked, every caller is one owner; this machine's only"
                if auth == "none"
                else ""
            ),
            f"  webhooks allowed on: {hosts or 'no private host'} (A2A_PUSH_ALLOWED_HOSTS)",
            f"  client: A2ACLI_AGENT_CARD={a2a} .venv/bin/a2a send hello",
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
    """The files added, removed or modified between two snapshots, relative to the root
    (a handler outside the checkout: its full path)."""
    modified = {p for p in before.keys() & after.keys() if before[p] != after[p]}
    paths = before.keys() ^ after.keys() | modified
    return sorted(
        str(p.relative_to(REPO_ROOT) if p.is_relative_to(REPO_ROOT) else p) for p in paths
    )


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
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"a2a's port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--host",
        default=LOOPBACK,
        help=f"a2a's address (default {LOOPBACK}; a wider one needs A2A_AUTH's credentials)",
    )
    for name, offset in OFFSETS.items():
        parser.add_argument(f"--{name}-port", type=int, help=f"default: --port + {offset}")
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
