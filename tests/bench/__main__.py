"""`make bench`: `a2a` side by side with the official SDK's server (throughput, CPU, latency,
memory, cold start: tests/bench/compare.py); blocking sends and memory over many tasks on the
Firestore emulator; Firestore reads and writes per operation, and what a short,
background and streamed task and a push notification cost in dollars per million
(tests/bench/usage.py, cost_model.py, prices.py; beside the SDK's server on Cloud SQL, a model);
streaming: time to the first frame of an inline stream, the latency from an event's commit
in one process to its frame at a subscriber on another (Firestore emulator, listener and
polling), the writes of a 100-event streamed send, and fifty subscribers of one task on one
instance (frames, listeners, threads); many tenants' streams on one instance (memory per
open stream, how many fit 512 MiB, first frame at 100 and 1,000 open: tests/bench/streams.py);
live progress: the time from a handler's
`ctx.progress` in the worker to its frame at a stream on another `a2a` instance (the
Firestore and Cloud Tasks emulators); background work: the time from a non-blocking send
to the handler's start in the worker, and tasks completed per second through the queue
(embedded, and `a2a` -> Cloud Tasks -> `worker` on the emulators); agents that wait on
models: N turns of an async handler awaiting S seconds at once on one instance, blocking and
streamed, beside the SDK's server (tests/bench/agents.py).

Runs functions-framework as `make run` does and drives it over real HTTP from this process.
Every loop is bounded in count and time and talks to localhost only.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import requests

from emulator.firestore import start_firestore
from tests import sse
from tests.bench.agents import agents
from tests.bench.compare import compare, round_of_load, running
from tests.bench.load import HEADERS, cpu_seconds, load, percentile, pss_mib, send_body
from tests.bench.stacks import emulated
from tests.bench.streams import streams
from tests.conftest import Server, wait_until


def store_costs(project: str | None) -> list[tuple[str, int, int]]:
    """(operation, document reads, document writes) measured on the store in process: the
    Firestore store's real ones (with a project), else what the embedded one counts."""
    from shared.app import build
    from shared.settings import Backend, Settings
    from shared.store.firestore import FirestoreTaskStore
    from shared.store.memory import MemoryTaskStore
    from tests.conftest import Client

    backend: Backend = "firestore" if project else "memory"
    settings = Settings(handler="functions.handlers.echo", backend=backend, project=project)
    client = Client(build(settings))
    store = getattr(client.app.service.ports.store, "inner", client.app.service.ports.store)
    assert isinstance(store, FirestoreTaskStore | MemoryTaskStore)
    rows: list[tuple[str, int, int]] = []

    def measure(name: str, method: str, params: dict[str, object]) -> dict[str, object]:
        store.cost.reset()
        result: dict[str, object] = client.result(method, params, version="1.0")
        rows.append((name, store.cost.reads, store.cost.writes))
        return result

    def msg(text: str, **extra: object) -> dict[str, object]:
        message = {"role": "ROLE_USER", "parts": [{"text": text}], "messageId": str(uuid.uuid4())}
        return {"message": {**message, **extra}}

    sent = measure("SendMessage, short task to completed", "SendMessage", msg("hi"))
    task_id = sent["task"]["id"]  # type: ignore[index]
    measure("GetTask", "GetTask", {"id": task_id})
    for _ in range(9):
        client.result("SendMessage", msg("more"), version="1.0")
    measure("ListTasks, page of 10", "ListTasks", {"pageSize": 10})
    return rows


def first_frame(server: Server, runs: int) -> tuple[float, float]:
    """p50 and p99 seconds from sending SendStreamingMessage to reading its first frame."""
    times = []
    for i in range(runs):
        body = json.loads(send_body(f"stream {i}"))
        body["method"] = "SendStreamingMessage"
        t0 = time.perf_counter()
        response = sse.stream(server.url, body, HEADERS)
        next(sse.read(response))
        times.append(time.perf_counter() - t0)
        response.close()
    return percentile(times, 0.5), percentile(times, 0.99)


class _Versions:
    """When each event of a task was committed, from a listener on the task's document: the
    update time of the first version seen to hold it (None: already in the version the
    listener started from)."""

    def __init__(self, document: Any) -> None:
        self._committed: dict[int, float | None] = {}
        self._started = False
        self._seen = threading.Condition()
        self._watch = document.on_snapshot(self._on_snapshot)

    def _on_snapshot(self, documents: Any, changes: Any, read_time: Any) -> None:
        with self._seen:
            for document in documents:
                fields = document.to_dict() or {}
                last, log = fields.get("lastSeq", 0), fields.get("log") or []
                at = document.update_time.timestamp() if self._started else None
                for seq in range(last - len(log) + 1, last + 1):
                    self._committed.setdefault(seq, at)
            self._started = True
            self._seen.notify_all()

    def at(self, seq: int, wait: float) -> float | None:
        """When `seq` was committed, once the listener has seen it (within `wait` seconds)."""
        with self._seen:
            self._seen.wait_for(lambda: seq in self._committed, timeout=wait)
            return self._committed.get(seq)

    def close(self) -> None:
        self._watch.unsubscribe()


def commit_to_frame(mode: str, tasks: int) -> tuple[float, float, int]:
    """p50 and p99 seconds from an event's commit in the process running the task to its
    frame at a subscriber on another process. A commit's time is the update time of the
    task document's version that first holds the event (its latest events are there:
    shared.store.firestore), seen by a listener of this process's (opened once the task is
    sent: the events of the version it starts from, committed before, are left out)."""
    from google.cloud import firestore

    emulator = start_firestore()
    env = {
        **emulator.env(),
        "A2A_BACKEND": "firestore",
        "GOOGLE_CLOUD_PROJECT": emulator.project,
        "A2A_HANDLER": "tests.handlers.slow",
        "A2A_STREAM_TAIL": mode,
    }
    runner, streamer = Server(env), Server(env)
    os.environ.update(emulator.env())  # this process reads commit times from the emulator
    client = firestore.Client(project=emulator.project)
    latencies: list[float] = []
    try:
        for _ in range(tasks):
            body = json.loads(send_body("steps=20 delay=0.05"))
            body["params"]["configuration"] = {"returnImmediately": True}
            task_id = requests.post(runner.url, json=body, headers=HEADERS, timeout=30).json()[
                "result"
            ]["task"]["id"]
            # A2A_AUTH=none: every caller is the owner "anonymous" (shared.identity).
            from shared.store.firestore import document_id

            task_doc = client.collection("tasks").document(document_id("anonymous", task_id))
            versions = _Versions(task_doc)
            subscribe = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask"}
            subscribe["params"] = {"id": task_id}
            arrived: dict[int, float] = {}
            try:
                for event in sse.read(sse.stream(streamer.url, subscribe, HEADERS)):
                    arrived[int(event.id or 0)] = time.time()
                opening = min(arrived)  # the snapshot, not an event of its own
                for seq in sorted(arrived):
                    at = versions.at(seq, wait=5)
                    if seq != opening and at is not None:
                        latencies.append(arrived[seq] - at)
            finally:
                versions.close()
    finally:
        client.close()  # type: ignore[no-untyped-call]
        runner.stop()
        streamer.stop()
        emulator.stop()
    return percentile(latencies, 0.5), percentile(latencies, 0.99), len(latencies)


def stream_writes(project: str | None, delay: float, runs: int) -> tuple[int, int, int]:
    """Frames, and the fewest and most document writes, of a streamed send whose handler
    makes 100 status and artifact events `delay` seconds apart (the app in this process, on
    the Firestore store of `project`, else the embedded one)."""
    from shared.app import build
    from shared.settings import Backend, Settings
    from shared.store.firestore import FirestoreTaskStore
    from shared.store.memory import MemoryTaskStore
    from tests.conftest import Client

    store = FirestoreTaskStore(project) if project else MemoryTaskStore()
    backend: Backend = "firestore" if project else "memory"
    settings = Settings(handler="tests.handlers.slow", backend=backend, project=project)
    app = build(settings, store=store)
    client = Client(app)
    writes, frames = [], 0
    try:
        for _ in range(runs):
            # The slow handler: 98 steps, an artifact, the end.
            body = json.loads(send_body(f"steps=98 delay={delay}"))
            body["method"] = "SendStreamingMessage"
            store.cost.reset()
            answer = client.post(body, HEADERS)
            frames = len(sse.parse(answer.text))
            writes.append(store.cost.writes)
    finally:
        app.close()
    return frames, min(writes), max(writes)


def shared_listener(subscribers: int) -> None:
    """`subscribers` streams of one task on one instance (this process, the Firestore
    emulator), the task run by another: frames delivered, listeners opened, threads."""
    from shared.app import build
    from shared.settings import Settings
    from shared.store.firestore import FirestoreTaskStore
    from tests.conftest import Client

    with start_firestore() as emulator:
        os.environ.update(emulator.env())
        project = emulator.project
        env: dict[str, Any] = {
            "handler": "tests.handlers.slow",
            "backend": "firestore",
            "project": project,
        }
        runner = build(Settings(**env))
        store = FirestoreTaskStore(project)
        streams = subscribers + 2
        streamer = build(Settings(**env, max_streams=streams, threads=streams), store=store)
        followers = Client(streamer)
        try:
            body = json.loads(send_body("steps=20 delay=0.05", blocking=False))
            task_id = Client(runner).post(body, HEADERS).json()["result"]["task"]["id"]
            subscribe = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask"}
            subscribe["params"] = {"id": task_id}
            frames = [0] * subscribers
            threads_before = threading.active_count()

            def follow(index: int) -> None:
                answer = followers.post(subscribe, {**HEADERS, "Last-Event-ID": "0"})
                frames[index] = len(sse.parse(answer.text))

            with ThreadPoolExecutor(subscribers) as pool:
                running = [pool.submit(follow, i) for i in range(subscribers)]
                peak = 0
                while not all(f.done() for f in running):
                    peak = max(peak, threading.active_count())
                    time.sleep(0.05)
                for future in running:
                    future.result()
            assert store.watches is not None
            print(
                f"  {subscribers} subscribers of one task on one instance, Firestore emulator: "
                f"{sum(frames)} frames delivered ({min(frames)} to {max(frames)} each), "
                f"{store.watches.opened} listener(s) opened, {store.cost.reads} document reads "
                "(the task once per subscribe, the log's by the listener); "
                f"threads {threads_before} before, {peak} at most while streaming "
                f"({subscribers} of them the subscribers' own, as many the front's)"
            )
        finally:
            runner.close()
            streamer.close()


def streaming(args: argparse.Namespace) -> None:
    server = Server({"A2A_HANDLER": "functions.handlers.echo", "A2A_BACKEND": "memory"})
    try:
        p50, p99 = first_frame(server, 50)
    finally:
        server.stop()
    print("\nstreaming:")
    print(
        f"  inline SendStreamingMessage, embedded backend: first frame p50 {p50 * 1000:.1f} ms,"
        f" p99 {p99 * 1000:.1f} ms"
    )
    for mode in ("listener", "polling"):
        p50, p99, count = commit_to_frame(mode, args.stream_tasks)
        print(
            f"  commit in one process -> frame at a subscriber on another, Firestore emulator, "
            f"{mode}: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms ({count} events)"
        )
    with start_firestore() as emulator:
        os.environ.update(emulator.env())
        for label, project in [("embedded", None), ("Firestore emulator", emulator.project)]:
            for delay in (0, 0.01):
                frames, fewest, most = stream_writes(project, delay, runs=3)
                print(
                    f"  SendStreamingMessage of 100 events {delay * 1000:.0f} ms apart, "
                    f"{label}: {frames} frames, {fewest} to {most} document writes (3 runs; "
                    "a commit per event: 203)"
                )
    shared_listener(args.subscribers)


def handler_starts(log: Path) -> dict[str, float]:
    """Task id -> when the handler started on it (time.time()), from the handler's log."""
    if not log.exists():
        return {}
    lines = [line.split() for line in log.read_text().splitlines()]
    return {task: float(at) for at, what, task in lines if what == "start"}


def queue_figures(emulators: bool, sends: int, tasks: int, seconds: float) -> None:
    where = "emulators (a2a -> Cloud Tasks -> worker, Firestore)" if emulators else "embedded"
    log = Path(tempfile.mkdtemp()) / "handler.log"
    env = {"A2A_HANDLER": "tests.handlers.long", "TEST_HANDLER_LOG": str(log)}
    with emulated(env, "worker" if emulators else None) as (server,):
        session = requests.Session()

        def send(text: str) -> str:
            answer = session.post(
                server.url, data=send_body(text, blocking=False), headers=HEADERS, timeout=30
            ).json()
            task_id: str = answer["result"]["task"]["id"]
            return task_id

        send("artifacts=1 delay=0")  # warm-up: the worker builds its app on its first call
        time.sleep(1)
        delays = []
        for _ in range(sends):
            sent = time.time()
            task_id = send("artifacts=1 delay=0")
            deadline = time.monotonic() + 10
            while task_id not in (started := handler_starts(log)):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the handler never started on {task_id}")
                time.sleep(0.002)
            delays.append(started[task_id] - sent)
        print(f"\nbackground work, {where}:")
        p50, p99 = (percentile(delays, q) * 1000 for q in (0.5, 0.99))
        print(
            f"  non-blocking send -> handler start, {len(delays)} sends one at a time: "
            f"p50 {p50:.0f} ms, p99 {p99:.0f} ms"
        )
        before = completed(server)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: send("artifacts=1 delay=0"), range(tasks)))
        deadline = time.monotonic() + seconds
        while (done := completed(server) - before) < tasks and time.monotonic() < deadline:
            time.sleep(0.05)
        elapsed = time.perf_counter() - t0
        print(
            f"  {tasks} non-blocking sends from 8 clients: {done} completed in {elapsed:.1f} s, "
            f"{done / elapsed:.1f} tasks/s through the queue"
        )


def push_figures(emulators: bool, tasks: int, seconds: float) -> None:
    """Notifications delivered per second, and the latency from a status event (its status
    timestamp, taken as the handler makes it) to its arrival at a webhook."""
    from tests.webhook import Webhook

    where = "emulators (a2a -> Cloud Tasks -> deliver, Firestore)" if emulators else "embedded"
    hook = Webhook()
    try:
        env = {
            "A2A_HANDLER": "functions.handlers.echo",
            "A2A_PUSH_ALLOWED_HOSTS": "localhost",
            "A2A_DEDUPLICATE_MESSAGES": "false",
        }
        with emulated(env, "deliver" if emulators else None) as (server,):
            session = requests.Session()

            def send(i: int) -> None:
                body = json.loads(send_body(f"hello {i}"))
                config = {"url": hook.url()}
                body["params"]["configuration"] = {"taskPushNotificationConfig": config}
                session.post(server.url, json=body, headers=HEADERS, timeout=30).raise_for_status()

            send(-1)  # warm-up
            hook.wait_accepted(3, timeout=30)
            start = len(hook.accepted())
            t0 = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(send, range(tasks)))
            want = start + 3 * tasks  # echo: working, the artifact, completed
            deadline = time.monotonic() + seconds
            while len(hook.accepted()) < want and time.monotonic() < deadline:
                time.sleep(0.02)
            elapsed = time.perf_counter() - t0
            arrived = hook.accepted()[start:]
    finally:
        hook.close()
    latencies = []
    for received in arrived:
        update = received.json.get("statusUpdate")
        if update:
            stamp = update["status"]["timestamp"].replace("Z", "+00:00")
            latencies.append(received.at - datetime.fromisoformat(stamp).timestamp())
    p50, p99 = (percentile(latencies, q) * 1000 for q in (0.5, 0.99))
    print(f"\npush notifications, {where}:")
    print(
        f"  {len(arrived)} notifications of {tasks} tasks (8 clients) in {elapsed:.1f} s: "
        f"{len(arrived) / elapsed:.0f}/s; status event -> webhook p50 {p50:.0f} ms, "
        f"p99 {p99:.0f} ms"
    )


def live_progress(tasks: int) -> None:
    """Time from a handler's `ctx.progress` in the worker to its frame at a client streaming
    the task from another `a2a` instance (`make dev`'s shape, twice `a2a`: the Firestore and
    Cloud Tasks emulators). The handler (tests.handlers.live) speaks once the stream is open,
    then again each time the client saw what it said. Its first progress races the start of
    the instance's Firestore listener for the task: a figure of its own."""
    from tests.handlers import live

    gates = Path(tempfile.mkdtemp())
    env = {"A2A_HANDLER": "tests.handlers.live", "TEST_HANDLER_GATES": str(gates)}
    phases = 4
    first: list[float] = []
    later: list[float] = []
    with emulated(env, "worker", instances=2) as (sender, streamer):
        for _ in range(tasks):
            body = json.loads(send_body(f"wait phases={phases}", blocking=False))
            answer = requests.post(sender.url, json=body, headers=HEADERS, timeout=30).json()
            task_id = answer["result"]["task"]["id"]
            gate = live.gate(task_id, gates)
            failure = f"the handler behind {gate} never started"
            wait_until(gate.exists, 30, failure.format)  # the worker started it: its doing
            subscribe = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask"}
            subscribe["params"] = {"id": task_id}
            response = sse.stream(streamer.url, subscribe, HEADERS)
            frames = sse.read(response)
            next(frames)  # the opening snapshot: the stream follows the task
            live.release(task_id, gates)  # speak
            heard = first
            for event in frames:  # until the task's end closes the stream
                update = event.data.get("result", {}).get("statusUpdate", {})
                parts = update.get("status", {}).get("message", {}).get("parts", [{}])
                said = live.said_at(parts[0].get("text", ""))
                if said is not None:
                    heard.append(time.time() - said)
                    heard = later
                    live.release(task_id, gates)  # speak again, or finish
            response.close()
    print(
        "\nlive progress: ctx.progress in the worker -> its frame at a stream on another a2a "
        "instance, Firestore and Cloud Tasks emulators:"
    )
    for label, figures in [
        ("on a stream that followed the task already", later),
        ("the first, as that instance's listener for the task starts", first),
    ]:
        p50, p99 = percentile(figures, 0.5), percentile(figures, 0.99)
        print(f"  {label}: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms ({len(figures)})")


def completed(server: Server) -> int:
    """How many tasks are completed (ListTasks' count: one read, not one per task)."""
    params = {"status": "TASK_STATE_COMPLETED", "pageSize": 1}
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params}
    answer = requests.post(server.url, data=json.dumps(body), headers=HEADERS, timeout=30).json()
    total: int = answer["result"]["totalSize"]
    return total


SECTIONS = (
    "compare",
    "firestore",
    "costs",
    "streaming",
    "streams",
    "live",
    "background",
    "push",
    "agents",
)
# What `--only requests` selected before the sections were split.
ALIASES = {"requests": ("compare", "firestore", "costs")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7, help="paired rounds against the SDK")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=150, help="per client and round")
    parser.add_argument("--seconds", type=float, default=60, help="upper bound for a load phase")
    parser.add_argument(
        "--firestore-tasks", type=int, default=10_000, help="blocking sends on the emulator"
    )
    parser.add_argument("--stream-tasks", type=int, default=5, help="tasks per tail mode")
    parser.add_argument("--subscribers", type=int, default=50, help="streams of one task")
    parser.add_argument("--live-tasks", type=int, default=50, help="tasks of the live figure")
    parser.add_argument("--sends", type=int, default=20, help="timed non-blocking sends")
    parser.add_argument("--tasks", type=int, default=100, help="tasks through the queue")
    parser.add_argument("--turns", type=int, default=400, help="agents: turns sent at once")
    parser.add_argument("--wait", type=float, default=2.0, help="agents: seconds a turn awaits")
    parser.add_argument(
        "--only", nargs="+", choices=[*SECTIONS, *ALIASES], help="these sections only"
    )
    args = parser.parse_args()
    chosen = {s for name in args.only or SECTIONS for s in ALIASES.get(name, (name,))}
    for section in SECTIONS:
        if section not in chosen:
            continue
        if section == "compare":
            compare(args.rounds, args.clients, args.requests)
        elif section == "firestore":
            firestore_at_scale(args.clients, args.firestore_tasks)
        elif section == "costs":
            costs()
        elif section == "streaming":
            streaming(args)
        elif section == "streams":
            streams()
        elif section == "live":
            live_progress(args.live_tasks)
        elif section == "agents":
            agents(args.turns, args.wait)
        else:
            for emulators in (False, True):
                if section == "background":
                    queue_figures(emulators, args.sends, args.tasks, args.seconds)
                else:
                    push_figures(emulators, args.tasks, args.seconds)


def firestore_at_scale(clients: int, tasks: int) -> None:
    """Blocking sends per second on the Firestore emulator, and the server's memory as the
    tasks pile up in the store (it must stay flat: the state lives in Firestore)."""
    with start_firestore() as emulator:
        env = {
            "A2A_BACKEND": "firestore",
            "GOOGLE_CLOUD_PROJECT": emulator.project,
            **emulator.env(),
        }
        with running("ours", env) as server:
            load(server, 2, 20, 30)  # warm-up: the Firestore client's channels and caches
            leader = server.process.pid
            print(
                f"\nFirestore emulator, blocking SendMessage from {clients} clients, echo "
                f"agent, {tasks} tasks; server memory (PSS) after warm-up "
                f"{pss_mib(leader):.0f} MiB",
                flush=True,
            )
            batches = 5
            for batch in range(batches):
                per_client = tasks // batches // clients
                cpu = cpu_seconds(leader)
                figures = load(server, clients, per_client, 600)
                used = cpu_seconds(leader) - cpu
                print(
                    f"  {(batch + 1) * per_client * clients:>6} tasks: {figures['rps']:.0f} "
                    f"req/s, p50 {figures['p50_ms']:.0f} ms, p99 {figures['p99_ms']:.0f} ms, "
                    f"CPU {used / figures['requests'] * 1000:.1f} ms/request, "
                    f"{figures['errors']:.0f} errors, memory {pss_mib(leader):.0f} MiB",
                    flush=True,
                )


def costs() -> None:
    budgets = {
        "SendMessage": "(0, 1)",
        "GetTask": "(1, 0)",
        "ListTasks": "(N + 1 for totalSize, 0)",
    }
    with start_firestore() as emulator:
        os.environ.update(emulator.env())
        for label, project in [("embedded", None), ("Firestore emulator", emulator.project)]:
            print(f"\ndocument reads and writes per operation, {label} (budget in brackets):")
            for name, reads, writes in store_costs(project):
                budget = budgets[name.split(",")[0]]
                print(f"  {name}: {reads} reads, {writes} writes {budget}")
        dollars(emulator)


def short_compute(kind: str, extra: dict[str, str] | None = None) -> tuple[float, float]:
    """CPU seconds per blocking send of a server process under load (4 clients, as `compare`
    measures it), and the wall seconds of one sent alone (p50 of one client)."""
    with running(kind, extra) as server:
        load(server, 2, 10, 30)  # warm-up
        cpu = round_of_load(server, 4, 100).cpu_ms / 1000
        alone = load(server, 1, 20, 30)["p50_ms"] / 1000
    return cpu, alone


def dollars(emulator: Any) -> None:
    """The counts in dollars per million (tests/bench/cost_model.py, tests/bench/prices.py),
    ours and the official SDK's server on Cloud Run with its database task store (a model)."""
    from tests.bench import cost_model, prices, usage

    firestore = {"A2A_BACKEND": "firestore", "GOOGLE_CLOUD_PROJECT": emulator.project}
    cpu, alone = short_compute("ours", {**firestore, **emulator.env()})
    sdk_cpu, sdk_alone = short_compute("sdk")
    found = usage.ours(emulator.project, cpu, alone)
    a2a = usage.functions()["a2a"]
    sdk = cost_model.Usage(
        reads=0,
        writes=0,
        deletes=0,
        tasks_operations=0,
        invocations=1,
        busy_seconds=cost_model.billed_busy(sdk_cpu, sdk_alone, a2a.vcpu, a2a.concurrency),
        alone_seconds=cost_model.billed_alone(sdk_alone),
        vcpu=a2a.vcpu,
        memory_gib=a2a.memory_gib,
    )
    rows = {name: use for name, (use, _) in found.items()}
    for per_month in (1, 10):
        rows[f"a2a-sdk on Cloud SQL, short task, {per_month}M tasks a month"] = sdk
    stream = usage.sdk("SendStreamingMessage", "steps=98 delay=0.01", 3)
    rows["a2a-sdk on Cloud SQL, streamed task of 100 events, 1M tasks a month"] = replace(
        sdk,
        busy_seconds=cost_model.billed_busy(
            stream.cpu_seconds, stream.wall_seconds, a2a.vcpu, a2a.concurrency
        ),
        alone_seconds=cost_model.billed_alone(stream.wall_seconds),
    )
    print(
        f"\nwhat it costs, {prices.REGION} list prices of {prices.PRICES_AS_OF} (free tiers "
        f"left out; tests/bench/prices.py):\n{prices.table()}"
    )
    print(f"\nshort send on a server: CPU {cpu * 1000:.1f} ms, alone {alone * 1000:.0f} ms")
    for name, (_, run) in found.items():
        print(f"  {name}: {run.runs} of them measured")
    print(cost_model.USAGE_HEADER)
    for name, use in rows.items():
        print(cost_model.usage_row(name, use))
    print("\ndollars per million:")
    print(cost_model.HEADER)
    for name, use in rows.items():
        print(cost_model.row(name, cost_model.per_million_of(name, use)))
    short = usage.sdk("SendMessage", "hi", 10)
    sql = cost_model.SQL_SMALLEST
    print(
        f"  a2a-sdk (a model): its server's CPU {sdk_cpu * 1000:.1f} ms a short send (in-memory "
        f"store), alone {sdk_alone * 1000:.0f} ms, on Cloud Run sized as ours; its task store "
        f"{short.saves} saves and {short.gets} gets a short task, {stream.saves} and "
        f"{stream.gets} a streamed one (CPU {stream.cpu_seconds * 1000:.0f} ms in process, "
        f"{stream.wall_seconds:.2f} s); Cloud SQL {sql.vcpu:g} vCPU, {sql.memory_gb:g} GB, "
        f"{sql.storage_gb:g} GB SSD: ${sql.monthly():.2f} a month"
    )


if __name__ == "__main__":
    main()
