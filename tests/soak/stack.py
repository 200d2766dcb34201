"""The soak's stack: the Firestore and Cloud Tasks emulators, 3 `a2a`, 2 `worker` and 2
`deliver` processes wired as `make deploy` wires them (each `a2a` sends its turns to one worker
and its deliveries to one deliverer, in turn), and the sweep on its timer (a `POST /sweep` to a
worker with the Cloud Tasks emulator's token, as Cloud Scheduler's would be).

Every process is in its own process group (tests.conftest.Server), and `close()` stops them
all and both emulators, whatever happened: the soak always ends with nothing left running.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

import requests

from emulator.cloud_tasks import TasksEmulator, start_tasks_emulator
from emulator.firestore import FirestoreEmulator, start_firestore
from emulator.oidc import make_token
from infra.settings import QueueSettings, seconds
from tests.conftest import LOCATION, SA, free_port, make_queue
from tests.system.test_faults_stack import Process as Started

HANDLER = "tests.handlers.soak"
LEASE = 3.0  # seconds: a silent inline turn is re-driven soon after a fault
SWEEP_SECONDS = 10.0  # the sweep's timer (deployed: a minute)
COUNTS = {"a2a": 3, "worker": 2, "deliver": 2}


def _queue(name: str, attempts: int, low: float, high: float, doublings: int) -> QueueSettings:
    """A soak queue's retry policy, in the deploy's terms, sooner than the deploy's."""
    return QueueSettings(
        name=name,
        max_attempts=attempts,
        min_backoff=f"{low}s",
        max_backoff=f"{high}s",
        max_doublings=doublings,
        max_retry_duration="0s",
        max_dispatches_per_second=500,
        max_concurrent_dispatches=1000,
    )


# Enough attempts to outlast the longest fault (a paused emulator, 15 s; a hung webhook).
WORK = _queue("work", 12, 0.2, 2, 3)
PUSH = _queue("push", 40, 0.5, 2, 2)


def api_key(owner: str, seed: int) -> str:
    """The owner's API key for this run (deterministic: the logs can be read again)."""
    return f"soak-{seed}-{owner}-".ljust(40, "k")


class Process(Started):
    """A function process of the stack, named, that starts without waiting for its first
    answer (`ready`), so that start-ups overlap, and can be started again in its place
    (`restart`)."""

    def __init__(self, name: str, env: dict[str, str], target: str, port: int) -> None:
        self.name = name
        super().__init__(env, target, port)

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class Stack:
    firestore: FirestoreEmulator
    tasks: TasksEmulator
    processes: dict[str, Process] = field(default_factory=dict)
    work_queue: str = ""
    push_queue: str = ""
    logs: Path | None = None  # where a killed process's output is kept, before its restart
    restarts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def urls(self, target: str) -> list[str]:
        return [p.url for name, p in sorted(self.processes.items()) if p.target == target]

    def start(self, owners: list[str], seed: int, hooks_host: str) -> None:
        project = self.firestore.project
        work = self._make_queue(project, WORK)
        push = self._make_queue(project, PUSH)
        self.work_queue, self.push_queue = work, push
        keys = ",".join(
            f"{owner}:{_hashed(api_key(owner, seed))}" for owner in owners
        )  # only a2a reads them
        common = {
            "A2A_BACKEND": "firestore",
            "GOOGLE_CLOUD_PROJECT": project,
            "A2A_HANDLER": HANDLER,
            "A2A_TASKS_SERVICE_ACCOUNT": SA,
            "A2A_REGION": LOCATION,
            "A2A_LEASE_SECONDS": str(LEASE),
            "A2A_COMMIT_INTERVAL_SECONDS": "0.1",
            "A2A_STREAM_KEEPALIVE_SECONDS": "1",
            "A2A_WORK_QUEUE": work.rsplit("/", 1)[-1],
            "A2A_WORK_MAX_ATTEMPTS": str(WORK.max_attempts),
            "A2A_WORK_RETRY_SECONDS": str(WORK.retry_span()),
            "A2A_PUSH_QUEUE": push.rsplit("/", 1)[-1],
            "A2A_PUSH_MAX_ATTEMPTS": str(PUSH.max_attempts),
            "A2A_PUSH_ALLOWED_HOSTS": hooks_host,
            "A2A_LOG_FORMAT": "text",
            "THREADS": "48",
        }
        ports = {
            f"{target}-{n}": free_port() for target, count in COUNTS.items() for n in range(count)
        }
        url = {name: f"http://localhost:{port}/" for name, port in ports.items()}
        for n in range(COUNTS["worker"]):
            env = {**common, "A2A_DELIVER_URL": url[f"deliver-{n % COUNTS['deliver']}"]}
            self._add(f"worker-{n}", env, "worker", ports[f"worker-{n}"])
        for n in range(COUNTS["deliver"]):
            env = {**common, "A2A_FUNCTION_TIMEOUT": "60", "A2A_DELIVER_URL": url[f"deliver-{n}"]}
            self._add(f"deliver-{n}", env, "deliver", ports[f"deliver-{n}"])
        for n in range(COUNTS["a2a"]):
            env = {
                **common,
                "A2A_AUTH": "api-key",
                "A2A_API_KEYS": keys,
                "A2A_WORKER_URL": url[f"worker-{n % COUNTS['worker']}"],
                "A2A_DELIVER_URL": url[f"deliver-{n % COUNTS['deliver']}"],
            }
            self._add(f"a2a-{n}", env, "a2a", ports[f"a2a-{n}"])
        for process in self.processes.values():
            process.ready()

    def _make_queue(self, project: str, policy: QueueSettings) -> str:
        low, high = seconds(policy.min_backoff), seconds(policy.max_backoff)
        backoff = (low, high, policy.max_doublings)
        return make_queue(
            self.tasks, project, f"soak-{policy.name}", policy.max_attempts, backoff=backoff
        )

    def _add(self, name: str, env: dict[str, str], target: str, port: int) -> None:
        self.processes[name] = Process(name, env, target, port)

    def kill(self, name: str) -> None:
        """SIGKILL to the process's group: an instance that dies, nothing cleaned up."""
        with self._lock:
            process = self.processes[name]
        process.kill()

    def restart(self, name: str) -> None:
        """The same function on the same port, in a new process, once it answers."""
        with self._lock:
            old = self.processes[name]
            self.restarts += 1
            if self.logs is not None:
                (self.logs / f"{name}.{self.restarts}.log").write_text(old.output())
            old.log.close()
            fresh = Process(name, old.env, old.target, old.port)
            self.processes[name] = fresh
        fresh.ready()

    def close(self) -> None:
        """Stop every function process, then both emulators (resumed first if paused)."""
        stopping = [threading.Thread(target=_stop, args=(p,)) for p in self.processes.values()]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
        for emulator in (self.tasks, self.firestore):
            resume(emulator.pid)  # a stopped process would not act on the stop's SIGTERM
            emulator.stop()


def pause(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)


def resume(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def _stop(process: Process) -> None:
    with contextlib.suppress(OSError, ValueError):  # already gone, its log closed
        process.stop()


def _hashed(key: str) -> str:
    from shared.identity.api_key import hashed

    return hashed(key)


def start_emulators() -> tuple[FirestoreEmulator, TasksEmulator]:
    """Both emulators on free ports; the caller's environment points at them (the function
    processes inherit it)."""
    import os

    firestore = start_firestore()
    try:
        tasks = start_tasks_emulator(secret=secrets.token_urlsafe(24))
    except BaseException:
        firestore.stop()
        raise
    os.environ.update(firestore.env())
    os.environ.update(tasks.env())
    return firestore, tasks


class SweepTimer:
    """Cloud Scheduler's part: a `POST /sweep` to a worker (drawn from the seed) every
    SWEEP_SECONDS, with the token the Cloud Tasks emulator would sign. Counts what it re-drove."""

    def __init__(self, stack: Stack, secret: str, rng: random.Random) -> None:
        self._stack = stack
        self._secret = secret
        self._rng = rng
        self._stop = threading.Event()
        self.sweeps = 0
        self.redriven = 0
        self._thread = threading.Thread(target=self._loop, name="sweep", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.wait(SWEEP_SECONDS):
            url = self._rng.choice(self._stack.urls("worker")) + "/sweep"
            token = make_token(SA, url, self._secret)
            try:
                answer = requests.post(
                    url, headers={"Authorization": f"Bearer {token}"}, timeout=60
                )
            except requests.RequestException:
                continue  # that worker is down or paused: the next sweep comes
            if answer.status_code == 200:
                self.sweeps += 1
                self.redriven += int(answer.json().get("redriven", 0))
