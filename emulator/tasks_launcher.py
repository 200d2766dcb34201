"""Cloud Tasks emulator launcher: PyPI gcloud-tasks-emulator 0.6.2 with its gaps filled.

Runs inside `.emulators/tasks-venv` (the package pins protobuf<5), started by
`emulator.cloud_tasks.start_tasks_emulator` as `python -m emulator.tasks_launcher`.
It keeps the package's gRPC service and queue bookkeeping (`Greeter`, `QueueState`) and
replaces what shared/docs/local-services.md lists as missing or wrong:

- task names are de-duplicated: ALREADY_EXISTS for a live task, and for a delivered or deleted
  one for --name-retention seconds (real Cloud Tasks: about an hour);
- GetTask (BASIC view omits the body, like the real service) and DeleteTask;
- retries follow the queue's retry_config (min/max backoff, max doublings, max attempts,
  max retry duration), with the real service's defaults where unset; UpdateQueue applies;
- dispatch is concurrent: each due task gets its own thread, up to the queue's
  rate_limits.max_concurrent_dispatches (default 1000);
- HTTP tasks with an oidc_token get `Authorization: Bearer <JWT>` (see emulator/oidc.py),
  HS256-signed with $CLOUD_TASKS_EMULATOR_SECRET when set.
Not done: max_dispatches_per_second, the task size limit, the default Content-Type (urllib's
form encoding stays, as in the package: set Content-Type on every task).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable
from concurrent import futures
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any, TypeVar

# google.api_core warns about Python versions on import; noise in the emulator's log.
warnings.filterwarnings("ignore", category=FutureWarning)

import grpc  # type: ignore[import-untyped]  # noqa: E402
from gcloud_tasks_emulator import server as pkg  # type: ignore[import-not-found]  # noqa: E402
from gcloud_tasks_emulator.cloudtasks_pb2_grpc import (  # type: ignore[import-not-found]  # noqa: E402
    add_CloudTasksServicer_to_server,
)
from google.api_core.exceptions import (  # noqa: E402
    AlreadyExists,
    GoogleAPICallError,
    InvalidArgument,
    NotFound,
)
from google.cloud.tasks_v2 import Attempt, Queue, Task  # noqa: E402
from google.protobuf import empty_pb2, field_mask_pb2  # noqa: E402

from emulator.oidc import make_token  # noqa: E402

log = logging.getLogger("tasks-launcher")
T = TypeVar("T")
TICK = 0.02  # seconds between scans for due tasks: the dispatch latency floor
# Real Cloud Tasks' defaults for a queue created without these settings.
DEFAULT_MAX_ATTEMPTS = 100
DEFAULT_MIN_BACKOFF = timedelta(seconds=0.1)
DEFAULT_MAX_BACKOFF = timedelta(seconds=3600)
DEFAULT_MAX_DOUBLINGS = 16
DEFAULT_CONCURRENCY = 1000
DEFAULT_DEADLINE = 600.0  # seconds; real HTTP tasks default to 10 minutes


def _now() -> datetime:
    return datetime.now(UTC)


def with_defaults(queue: Queue) -> Queue:
    """Fill unset retry and rate settings as the real service does, so GetQueue shows them."""
    retry = queue.retry_config
    retry.max_attempts = retry.max_attempts or DEFAULT_MAX_ATTEMPTS
    retry.min_backoff = retry.min_backoff or DEFAULT_MIN_BACKOFF
    retry.max_backoff = retry.max_backoff or DEFAULT_MAX_BACKOFF
    retry.max_doublings = retry.max_doublings or DEFAULT_MAX_DOUBLINGS
    rates = queue.rate_limits
    rates.max_concurrent_dispatches = rates.max_concurrent_dispatches or DEFAULT_CONCURRENCY
    return queue


def backoff(queue: Queue, attempts: int) -> float:
    """Seconds before the next attempt after `attempts` failed ones (Cloud Tasks' rule).

    The interval starts at min_backoff, doubles max_doublings times, then grows linearly by
    min_backoff * 2**max_doublings per retry, and is capped at max_backoff.
    """
    cfg = queue.retry_config
    low, high = cfg.min_backoff.total_seconds(), cfg.max_backoff.total_seconds()
    doublings, n = cfg.max_doublings, attempts - 1
    step = low * 2 ** min(n, doublings)
    interval = step + (n - doublings) * low * 2**doublings if n > doublings else step
    return float(min(interval, high))


def _error(kind: type[GoogleAPICallError], message: str) -> GoogleAPICallError:
    # The Greeter turns these into gRPC status codes; api_core's constructors are untyped.
    return kind(message)


def exhausted(max_attempts: int, max_retry_duration: float, attempts: int, age: float) -> bool:
    """True when a failed task must not be retried (Cloud Tasks' rule).

    Retries stop once both limits are reached; -1 attempts or a zero duration is "no limit",
    which counts as reached when the other limit is set, and never stops when both are unset.
    """
    attempts_done = max_attempts == -1 or attempts >= max_attempts
    duration_done = max_retry_duration <= 0 or age >= max_retry_duration
    unlimited = max_attempts == -1 and max_retry_duration <= 0
    return attempts_done and duration_done and not unlimited


class State(pkg.QueueState):  # type: ignore[misc]
    """The package's queue state plus a lock, name reservations and in-flight dispatches."""

    def __init__(self, name_retention: float, secret: str | None) -> None:
        super().__init__(pkg.DEFAULT_TARGET_HOST, 80, -1)
        self.lock = threading.RLock()  # gRPC threads and dispatch threads share the lists
        self.name_retention = name_retention
        self.secret = secret
        self.reserved: dict[str, float] = {}  # finished task name -> monotonic expiry
        self.in_flight: dict[str, set[str]] = {}  # queue -> names being dispatched

    def create_queue(self, parent: str, queue: Queue) -> Queue:
        with self.lock:
            created: Queue = super().create_queue(parent, with_defaults(queue))
            return created

    def update_queue(self, queue: Queue, mask: field_mask_pb2.FieldMask | None = None) -> Queue:
        with self.lock:
            current: Queue | None = self._queues.get(queue.name)
            if current is None:
                return self.create_queue("", queue)
            if mask is not None and mask.paths:
                mask.MergeMessage(Queue.pb(queue), Queue.pb(current), True, True)
            else:  # no mask: every field is replaced, the run state kept
                state = Queue.pb(current).state
                Queue.pb(current).CopyFrom(Queue.pb(queue))
                Queue.pb(current).state = state
            return with_defaults(current)

    def delete_queue(self, name: str) -> None:
        with self.lock:  # due() iterates the queues from another thread
            super().delete_queue(name)
            self.in_flight.pop(name, None)

    def purge_queue(self, name: str) -> Queue:
        with self.lock:
            purged: Queue = super().purge_queue(name)
            return purged

    def _find(self, name: str) -> tuple[str, Task]:
        queue = name.rsplit("/tasks/", 1)[0]
        for task in self._queue_tasks.get(queue, []):
            if task.name == name:
                return queue, task
        raise _error(NotFound, f"Requested entity was not found: {name}")

    def _finish(self, queue: str, task: Task) -> None:
        # Gone from the queue, but its name stays taken for a while, as in the real service.
        tasks = self._queue_tasks.get(queue, [])
        tasks[:] = [t for t in tasks if t is not task]
        self.reserved[task.name] = time.monotonic() + self.name_retention

    def create_task(self, queue: str, task: Task, view: int = 0) -> Task:
        with self.lock:
            if task.name:
                if not task.name.startswith(queue + "/tasks/"):
                    raise _error(InvalidArgument, f"Task name {task.name} is not in queue {queue}")
                now = time.monotonic()
                self.reserved = {k: v for k, v in self.reserved.items() if v > now}
                live = any(t.name == task.name for t in self._queue_tasks.get(queue, []))
                if live or task.name in self.reserved:
                    raise _error(AlreadyExists, f"Requested entity already exists: {task.name}")
            else:  # the package's timestamp names collide under load; real ids are numbers
                task.name = f"{queue}/tasks/{random.getrandbits(63)}"
            task.create_time = _now()
            if "schedule_time" not in task:
                task.schedule_time = task.create_time
            created: Task = super().create_task(queue, task)
            return self._view(created, view)

    def get_task(self, name: str, view: int = 0) -> Task:
        with self.lock:
            return self._view(self._find(name)[1], view)

    def delete_task(self, name: str) -> None:
        with self.lock:
            self._finish(*self._find(name))
            log.info("[TASKS] Deleted task %s", name)

    @staticmethod
    def _view(task: Task, view: int) -> Task:
        copy: Task = Task.deserialize(Task.serialize(task))  # never hand out the live object
        if view != Task.View.FULL:  # BASIC, the default, omits the payload
            # Only the request kind that is set: touching the other would switch the oneof.
            request = copy.http_request if "http_request" in copy else copy.app_engine_http_request
            request.body = b""
        Task.pb(copy).view = Task.View.FULL if view == Task.View.FULL else Task.View.BASIC
        return copy

    def due(self) -> list[tuple[Queue, Task]]:
        """Tasks to dispatch now, marked in flight, within each queue's concurrency limit."""
        out: list[tuple[Queue, Task]] = []
        with self.lock:
            now = _now()
            for name, queue in self._queues.items():
                if queue.state != Queue.State.RUNNING:
                    continue
                flying = self.in_flight.setdefault(name, set())
                limit = queue.rate_limits.max_concurrent_dispatches or DEFAULT_CONCURRENCY
                ready = [t for t in self._queue_tasks.get(name, []) if t.name not in flying]
                for task in sorted(ready, key=lambda t: t.schedule_time):
                    if len(flying) >= limit or task.schedule_time > now:
                        break
                    flying.add(task.name)
                    out.append((queue, task))
        return out

    def dispatch(self, queue: Queue, task: Task) -> None:
        """One attempt, then success, retry with backoff, or give up (in its own thread)."""
        qname = queue.name
        with self.lock:
            task.dispatch_count += 1
            scheduled, started = task.schedule_time, _now()
            if "first_attempt" not in task:
                task.first_attempt = Attempt(dispatch_time=started)
        status = self._send(qname, task)
        with self.lock:
            self.in_flight.get(qname, set()).discard(task.name)
            if not any(t is task for t in self._queue_tasks.get(qname, [])):
                return  # deleted or purged while in flight: nothing to record or retry
            ok = status is not None and 200 <= status < 300
            task.last_attempt = Attempt(
                schedule_time=scheduled,
                dispatch_time=started,
                response_time=_now(),
                response_status={"code": 0 if ok else 2, "message": f"HTTP {status}"},
            )
            if status is not None:
                task.response_count += 1
            cfg = queue.retry_config
            age = (_now() - task.first_attempt.dispatch_time).total_seconds()
            give_up = exhausted(
                cfg.max_attempts, cfg.max_retry_duration.total_seconds(), task.dispatch_count, age
            )
            if ok or give_up:
                self._finish(qname, task)
                log.info(
                    "[TASKS] %s %s after %d attempt(s), HTTP %s",
                    "Done" if ok else "Gave up",
                    task.name,
                    task.dispatch_count,
                    status,
                )
            else:
                delay = backoff(queue, task.dispatch_count)
                task.schedule_time = _now() + timedelta(seconds=delay)
                log.info(
                    "[TASKS] %s got HTTP %s; retry %d in %.2f s",
                    task.name,
                    status,
                    task.dispatch_count,
                    delay,
                )

    def _send(self, queue: str, task: Task) -> int | None:
        """POST (or whatever the task says) once; the HTTP status, or None without answer."""
        http = task.http_request
        if not http.url:  # App Engine tasks: the package's own request code
            try:
                with pkg._make_task_request(queue, task, self._target_host, self._target_port) as r:
                    return int(r.status)
            except urllib.error.HTTPError as exc:
                exc.close()
                return int(exc.code)
            except OSError:
                return None
        headers = dict(http.headers)
        headers.update(
            {
                "User-Agent": "Google-Cloud-Tasks",
                "X-CloudTasks-QueueName": queue.rsplit("/", 1)[-1],
                "X-CloudTasks-TaskName": task.name.rsplit("/", 1)[-1],
                "X-CloudTasks-TaskRetryCount": str(task.dispatch_count - 1),
                "X-CloudTasks-TaskExecutionCount": str(task.response_count),
                "X-CloudTasks-TaskETA": f"{task.schedule_time.timestamp():.6f}",
            }
        )
        previous = task.last_attempt.response_status.message.removeprefix("HTTP ")
        if previous.isdigit():  # set by dispatch() after an attempt that got an answer
            headers["X-CloudTasks-TaskPreviousResponse"] = previous
        if http.oidc_token.service_account_email:
            audience = http.oidc_token.audience or http.url
            token = make_token(http.oidc_token.service_account_email, audience, self.secret)
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(
            http.url,
            data=http.body or None,
            # HTTP_METHOD_UNSPECIFIED is 0, and means POST.
            method=http.http_method.name if http.http_method else "POST",
            headers=headers,
        )
        deadline = task.dispatch_deadline.total_seconds() or DEFAULT_DEADLINE
        log.info("[TASKS] %s %s (attempt %d)", req.method, http.url, task.dispatch_count)
        try:
            with urllib.request.urlopen(req, timeout=deadline) as resp:
                resp.read()
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            exc.close()
            return int(exc.code)
        except OSError as exc:  # refused, reset, timed out: retried like a 5xx
            log.info("[TASKS] %s: no answer (%s)", task.name, exc)
            return None


class Servicer(pkg.Greeter):  # type: ignore[misc]
    """The package's gRPC service, with the task methods it lacks or gets wrong."""

    def __init__(self, state: State) -> None:
        super().__init__(state)
        self.state = state

    @staticmethod
    def _guard(context: Any, call: Callable[[], T]) -> T:
        try:
            return call()
        except GoogleAPICallError as err:
            context.abort(err.grpc_status_code, err.message)
            raise  # not reached: abort raises

    def CreateTask(self, request: Any, context: Any) -> Task:
        return self._guard(
            context,
            lambda: self.state.create_task(request.parent, request.task, request.response_view),
        )

    def GetTask(self, request: Any, context: Any) -> Task:
        return self._guard(
            context, lambda: self.state.get_task(request.name, request.response_view)
        )

    def DeleteTask(self, request: Any, context: Any) -> empty_pb2.Empty:
        self._guard(context, lambda: self.state.delete_task(request.name))
        return empty_pb2.Empty()

    def UpdateQueue(self, request: Any, context: Any) -> Queue:
        mask = field_mask_pb2.FieldMask(paths=list(request.update_mask.paths))
        return self._guard(context, lambda: self.state.update_queue(request.queue, mask))


def dispatch_forever(state: State, stop: threading.Event) -> None:
    """Start one thread per due task, so a slow task never holds up the others."""
    while not stop.wait(TICK):
        for queue, task in state.due():
            threading.Thread(target=state.dispatch, args=(queue, task), daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9022)
    parser.add_argument(
        "--queue",
        action="append",
        default=[],
        help="create this queue at start (projects/P/locations/L/queues/Q)",
    )
    parser.add_argument(
        "--name-retention",
        type=float,
        default=float(os.environ.get("CLOUD_TASKS_EMULATOR_NAME_RETENTION", "3600")),
        help="seconds a finished task's name stays taken",
    )
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO, format="%(asctime)s %(message)s"
    )
    state = State(args.name_retention, os.environ.get("CLOUD_TASKS_EMULATOR_SECRET") or None)
    for name in args.queue:
        state.create_queue(name.rsplit("/queues/", 1)[0], Queue(name=name))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    add_CloudTasksServicer_to_server(Servicer(state), server)
    if not server.add_insecure_port(f"{args.host}:{args.port}"):
        log.error("cannot listen on %s:%s", args.host, args.port)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    threading.Thread(target=dispatch_forever, args=(state, stop), daemon=True).start()
    log.warning(
        "Cloud Tasks emulator listening on %s:%s (tokens %s)",
        args.host,
        args.port,
        "HS256-signed" if state.secret else "unsigned",
    )
    while not stop.wait(0.5):
        pass
    server.stop(grace=1).wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
