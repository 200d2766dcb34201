"""What a unit of work uses, measured for `make bench`'s cost table (tests/bench/cost_model.py
turns it into dollars): a short blocking task, a short background task (a2a -> worker), a
streamed task of 100 events, a push notification, an LLM's answer streamed in 500 chunks over
10 s (inline and through the worker); and the official SDK's server beside it.

Measured on the app in this process through its front (tests/asgi_transport.py), on the
Firestore emulator: the store's document reads and writes (its `cost`), the documents it
left (each one is deleted once by the TTL policy: a delete), the queue entries enqueued
(each a Cloud Tasks create call and a delivery attempt, and an invocation of its target),
this process's CPU time (the client's side of the front included: an upper bound) and each
request's wall time. The short task's CPU is measured as `compare` does instead, for ours
and the SDK's alike: a server process under load, its CPU time per request. Counts are
averages over a few runs each, so the section stays short.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from unittest import mock

from infra import settings as deploy
from shared.queue.inline import InlineQueue
from tests.bench.cost_model import Usage, billed_alone, billed_busy
from tests.bench.load import HEADERS, send_body

# Wall time a worker or deliver invocation is billed alone: they answer within it here (the
# handler's turn, one POST to a local webhook), so the 100 ms rounding is what bills them.
QUEUED_INVOCATION_SECONDS = 0.1


@dataclass(frozen=True)
class Function:
    vcpu: float
    memory_gib: float
    concurrency: int
    threads: int  # THREADS, as `make deploy` sets it


def functions() -> dict[str, Function]:
    """The three functions' sizes, from infra/deploy.toml."""
    found = deploy.load(deploy.DEFAULT_FILE, {"PROJECT": "bench-project"}).functions
    sizes = {}
    for role in ("a2a", "worker", "deliver"):
        fs = getattr(found, role)
        amount, unit = int(fs.memory[:-2]), fs.memory[-2:]
        gib = amount / (1024 if unit == "Mi" else 1)
        sizes[role] = Function(float(fs.cpu), gib, fs.concurrency, fs.pool_threads)
    return sizes


class Enqueues:
    """Counts the in-process queues' accepted entries (each would be a Cloud Tasks task), and
    waits for what they run."""

    def __init__(self) -> None:
        self.count = 0
        self.queues: set[InlineQueue] = set()
        self._lock = threading.Lock()

    @contextmanager
    def counting(self) -> Iterator[None]:
        original = InlineQueue.enqueue

        def enqueue(
            queue: InlineQueue, name: str, payload: dict[str, Any], *, delay: float = 0.0
        ) -> bool:
            accepted = original(queue, name, payload, delay=delay)
            with self._lock:
                self.queues.add(queue)
                self.count += accepted
            return accepted

        with mock.patch.object(InlineQueue, "enqueue", enqueue):
            yield

    def join(self, timeout: float = 30) -> None:
        for queue in list(self.queues):
            if not queue.join(timeout):
                raise RuntimeError("a queued delivery did not finish")


def documents(client: Any) -> int:
    """Every document in the database (the emulator's: a few hundred here)."""

    def under(collections: Any) -> int:
        total = 0
        for collection in collections:
            for ref in collection.list_documents():
                total += 1 + under(ref.collections())
        return total

    return under(client.collections())


@dataclass(frozen=True)
class Run:
    """Totals of `runs` units of work."""

    runs: int
    reads: int
    writes: int
    documents: int
    enqueues: int
    cpu_seconds: float
    wall_seconds: float  # of the a2a requests
    notifications: int = 0
    settled_seconds: float = 0.0  # of the a2a requests and what they queued, when settled


def measure(
    project: str,
    handler: str,
    runs: int,
    work: Callable[[Any, int], None],
    hook: Any = None,
    *,
    settle: bool = False,
) -> Run:
    """`runs` times `work(client, i)` on a fresh app on the emulator's `project`; with
    `settle`, each run waits for what it queued (the worker's turn), timed as
    `settled_seconds`."""
    from shared.app import build
    from shared.settings import Settings
    from shared.store.firestore import FirestoreTaskStore
    from tests.conftest import Client

    store = FirestoreTaskStore(project)
    settings = Settings(
        handler=handler,
        backend="firestore",
        project=project,
        push_allowed_hosts=("localhost",),
    )
    enqueues = Enqueues()
    with enqueues.counting():
        app = build(settings, store=store)
        client = Client(app)
        try:
            work(client, -1)  # warm-up: the Firestore client's channels, the first imports
            enqueues.join()
            before_docs, before_enq = documents(store.client), enqueues.count
            before_hook = len(hook.accepted()) if hook else 0
            store.cost.reset()
            cpu, wall, settled = time.process_time(), 0.0, 0.0
            for i in range(runs):
                t0 = time.perf_counter()
                work(client, i)
                wall += time.perf_counter() - t0
                if settle:
                    enqueues.join(timeout=120)
                    settled += time.perf_counter() - t0
            enqueues.join()
            cpu = time.process_time() - cpu
            return Run(
                runs=runs,
                reads=store.cost.reads,
                writes=store.cost.writes,
                documents=documents(store.client) - before_docs,
                enqueues=enqueues.count - before_enq,
                cpu_seconds=cpu,
                wall_seconds=wall,
                notifications=(len(hook.accepted()) - before_hook) if hook else 0,
                settled_seconds=settled,
            )
        finally:
            app.close()


def message(text: str) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}


def rpc(client: Any, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = client.post(json.dumps(body), HEADERS)
    if answer.status_code != 200:
        raise RuntimeError(f"{method}: {answer.status_code} {answer.text[:200]}")
    return answer


def short(client: Any, i: int) -> None:
    rpc(client, "SendMessage", json.loads(send_body(f"hi {i}"))["params"])


def background(client: Any, i: int) -> None:
    params = {"message": message(f"hi {i}"), "configuration": {"returnImmediately": True}}
    rpc(client, "SendMessage", params)


def streamed(client: Any, i: int) -> None:
    # tests.handlers.slow: 98 steps 10 ms apart, an artifact, the end: 100 events.
    rpc(client, "SendStreamingMessage", {"message": message("steps=98 delay=0.01")})


# An LLM's answer (tests.handlers.streams_answer): 500 chunks 20 ms apart, 10 s, and a slower
# one, 60 chunks 150 ms apart, 9 s (issue 35's two); the warm-up a short one, so it costs no
# 10 s of its own.
ANSWER = "chunks=500 delay=0.02"
SLOW_ANSWER = "chunks=60 delay=0.15"
WARM_ANSWER = "chunks=5 delay=0"


def answer_streamed(text: str) -> Callable[[Any, int], None]:
    def send(client: Any, i: int) -> None:
        answer = rpc(
            client, "SendStreamingMessage", {"message": message(WARM_ANSWER if i < 0 else text)}
        )
        if "TASK_STATE_COMPLETED" not in answer.text.rsplit("data:", 1)[-1]:
            raise RuntimeError(f"the streamed answer did not complete: {answer.text[-300:]}")

    return send


def answer_queued(client: Any, i: int) -> None:
    params = {
        "message": message(WARM_ANSWER if i < 0 else ANSWER),
        "configuration": {"returnImmediately": True},
    }
    rpc(client, "SendMessage", params)


def pushed(url: str) -> Callable[[Any, int], None]:
    def send(client: Any, i: int) -> None:
        params = {
            "message": message(f"hi {i}"),
            "configuration": {"taskPushNotificationConfig": {"url": url}},
        }
        rpc(client, "SendMessage", params)

    return send


def usage_of(run: Run, *, invocations: float, alone: float, busy: float, fn: Function) -> Usage:
    """A run's totals per unit of work."""
    per = run.runs
    return Usage(
        reads=run.reads / per,
        writes=run.writes / per,
        deletes=run.documents / per,
        tasks_operations=2 * run.enqueues / per,
        invocations=invocations,
        busy_seconds=busy,
        alone_seconds=alone,
        vcpu=fn.vcpu,
        memory_gib=fn.memory_gib,
    )


def ours(project: str, short_cpu: float, short_wall: float) -> dict[str, tuple[Usage, Run]]:
    """Each unit of work's usage on the emulator's `project`; the short task's compute from
    `short_cpu` and `short_wall` seconds a request (measured on a server process)."""
    from tests.webhook import Webhook

    fn = functions()
    a2a = fn["a2a"]
    found: dict[str, tuple[Usage, Run]] = {}
    run = measure(project, "functions.handlers.echo", 20, short)
    busy = billed_busy(short_cpu, short_wall, a2a.vcpu, a2a.concurrency)
    found["short task (blocking send, echo)"] = (
        usage_of(run, invocations=1, alone=billed_alone(short_wall), busy=busy, fn=a2a),
        run,
    )
    base = run

    run = measure(project, "functions.handlers.echo", 10, background)
    per_send = run.wall_seconds / run.runs
    queued = run.enqueues / run.runs
    found["short background task (a2a -> worker)"] = (
        usage_of(
            run,
            invocations=1 + queued,
            alone=billed_alone(per_send) + queued * QUEUED_INVOCATION_SECONDS,
            busy=run.cpu_seconds / run.runs / a2a.vcpu,
            fn=a2a,  # the worker's size is a2a's
        ),
        run,
    )

    run = measure(project, "tests.handlers.slow", 3, streamed)
    wall = run.wall_seconds / run.runs
    busy = billed_busy(run.cpu_seconds / run.runs, wall, a2a.vcpu, a2a.concurrency)
    found["streamed task of 100 events"] = (
        usage_of(run, invocations=1, alone=billed_alone(wall), busy=busy, fn=a2a),
        run,
    )

    found.update(llm_answers(project, fn))

    hook = Webhook()
    try:
        run = measure(project, "functions.handlers.echo", 10, pushed(hook.url()), hook)
    finally:
        hook.close()
    if not run.notifications:
        raise RuntimeError("no push notification arrived")
    # What the notifications add to short tasks, per notification (echo: 3 a task).
    extra = Run(
        runs=run.notifications,
        reads=max(0, run.reads - base.reads * run.runs // base.runs),
        writes=max(0, run.writes - base.writes * run.runs // base.runs),
        documents=max(0, run.documents - base.documents * run.runs // base.runs),
        enqueues=run.enqueues,
        cpu_seconds=max(0.0, run.cpu_seconds - base.cpu_seconds * run.runs / base.runs),
        wall_seconds=0.0,
        notifications=run.notifications,
    )
    deliver = fn["deliver"]
    per_notification = extra.enqueues / extra.runs
    found["push notification"] = (
        usage_of(
            extra,
            invocations=per_notification,
            alone=per_notification * QUEUED_INVOCATION_SECONDS,
            busy=extra.cpu_seconds / extra.runs / deliver.vcpu,
            fn=deliver,
        ),
        extra,
    )
    return found


def llm_answers(project: str, fn: dict[str, Function]) -> dict[str, tuple[Usage, Run]]:
    """An LLM's answer streamed in 500 chunks over 10 s: inline (SendStreamingMessage, the
    turn in the request) and through the worker (a non-blocking send, the turn on the work
    queue; its instance holds the turn's request all along, among the worker's concurrency);
    and one of 60 chunks over 9 s, inline."""
    a2a, worker = fn["a2a"], fn["worker"]
    handler = "tests.handlers.streams_answer"
    found: dict[str, tuple[Usage, Run]] = {}
    for name, text in [
        ("LLM answer of 500 chunks over 10 s, streamed (SendStreamingMessage)", ANSWER),
        ("LLM answer of 60 chunks over 9 s, streamed (SendStreamingMessage)", SLOW_ANSWER),
    ]:
        run = measure(project, handler, 2, answer_streamed(text))
        wall = run.wall_seconds / run.runs
        busy = billed_busy(run.cpu_seconds / run.runs, wall, a2a.vcpu, a2a.concurrency)
        found[name] = (
            usage_of(run, invocations=1, alone=billed_alone(wall), busy=busy, fn=a2a),
            run,
        )
    run = measure(project, handler, 2, answer_queued, settle=True)
    send = run.wall_seconds / run.runs
    turn = (run.settled_seconds - run.wall_seconds) / run.runs
    queued = run.enqueues / run.runs
    cpu = run.cpu_seconds / run.runs
    found["LLM answer of 500 chunks over 10 s, through the worker (non-blocking send)"] = (
        usage_of(
            run,
            invocations=1 + queued,
            alone=billed_alone(send) + queued * billed_alone(turn),
            # The turn's request held open among the worker's concurrency, or its CPU.
            busy=billed_busy(cpu, turn, worker.vcpu, worker.concurrency),
            fn=worker,  # a2a's size too
        ),
        run,
    )
    return found


@dataclass(frozen=True)
class SdkRun:
    """One unit of work on the official SDK's server in this process, through its ASGI app
    (tests/bench/reference.py)."""

    saves: int  # of its task store: on its DatabaseTaskStore, each a transaction
    gets: int  # (SQLAlchemy's merge: a SELECT, then an INSERT or UPDATE), each get a SELECT
    cpu_seconds: float  # this process's (the client's side included, as in `measure`)
    wall_seconds: float


def sdk(method: str, text: str, runs: int) -> SdkRun:
    """`runs` sends of `text` by `method` to the SDK's server (echo, or for "steps=" the
    slow handler's shape), after one to warm up: per send."""
    import httpx
    from a2a.server.context import ServerCallContext
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import Task

    from tests.asgi_transport import AsgiTransport
    from tests.bench import reference

    calls = {"save": 0, "get": 0}

    class Counting(InMemoryTaskStore):
        async def save(self, task: Task, context: ServerCallContext) -> None:
            calls["save"] += 1
            await super().save(task, context)

        async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
            calls["get"] += 1
            return await super().get(task_id, context)

    executor = reference.StepsExecutor() if text.startswith("steps=") else None
    app = reference.app("http://localhost/", Counting(), executor)
    with httpx.Client(transport=AsgiTransport(app), base_url="http://localhost") as client:

        def send() -> None:
            body = {"jsonrpc": "2.0", "id": 1, "method": method}
            body["params"] = {"message": message(text)}
            answer = client.post("/", content=json.dumps(body), headers=HEADERS)
            if answer.status_code != 200 or "TASK_STATE_COMPLETED" not in answer.text:
                raise RuntimeError(f"the SDK's server answered {answer.text[:300]}")

        send()
        calls.update(save=0, get=0)
        cpu, t0 = time.process_time(), time.perf_counter()
        for _ in range(runs):
            send()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu
    return SdkRun(calls["save"] // runs, calls["get"] // runs, cpu / runs, wall / runs)
