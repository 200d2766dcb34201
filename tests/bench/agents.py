"""`make bench BENCH_ARGS="--only agents"`: agents that wait on models (issue 34).

N turns (`--turns`, 400) of an `async` handler that awaits S seconds (`--wait`, 2) as a model
call does (tests/handlers/awaits_model.py), all sent at once to one instance sized as
deployed (THREADS and concurrency of infra/deploy.toml's `a2a`, `usage.functions()`; the
embedded backend, as `make run` serves it), blocking (`SendMessage`) and streamed
(`SendStreamingMessage`); the same against the official SDK's server whose agent awaits the
same S seconds (tests/bench/reference.py's `WaitingExecutor`). Meanwhile a side client asks
for the agent card and GetTask (of a task made before) every 50 ms, each on schedule
whatever the ones before it became. Each burst on a fresh server process. Reported:

- the time from the first send until every turn is answered, and the concurrency that
  reached: N x S over that time, the turns awaiting at once on average;
- the side requests' p50 and p99 while the turns run;
- the server's memory per turn in flight: its process group's PSS at peak (sampled every
  100 ms) less at rest (after one turn), over N;
- what a turn's compute costs on Cloud Run at that concurrency (tests/bench/cost_model.py):
  a request-based instance, as `make deploy` deploys it, is billed while it holds a request,
  so N turns answered within T share T seconds of it; alone, a turn is billed its own time;
- how soon a cancel reaches a turn's await (ours): CANCELS streamed turns awaiting
  CANCEL_WAIT seconds, one at a time, each canceled once its handler began to await, the
  time from sending CancelTask to the await's end (canceled, or run out: the handler's log,
  $TEST_HANDLER_LOG), on the instance running the turn (embedded), and from another
  instance (two `a2a` on the Firestore emulator).

The client is this process's event loop (uvloop, as the servers') speaking HTTP/1.1 on
raw asyncio streams, a connection a request (`Connection: close`, the answer read to its
end): a few hundred microseconds of CPU a request, so 400 sends are written within tens of
milliseconds of the first on a quiet machine; the section prints that and the client's CPU,
beside the server's, as the proof that the client is not what is measured.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import requests
import uvloop

from emulator.firestore import start_firestore
from tests import sse
from tests.bench import cost_model, usage
from tests.bench.compare import Process, first_answer, spawn
from tests.bench.load import HEADERS, cpu_seconds, percentile, pss_mib
from tests.conftest import Server, wait_until

Kind = Literal["ours", "sdk"]
Method = Literal["SendMessage", "SendStreamingMessage"]
SIDE_INTERVAL = 0.05  # seconds between the side client's card and GetTask requests
MEMORY_INTERVAL = 0.1  # seconds between samples of the server's PSS
CARD = "/.well-known/agent-card.json"
TIMEOUT = 120.0  # seconds any one request may take before the burst is called failed


@dataclass(frozen=True)
class Exchange:
    """One request: when it was sent, written and answered (the event loop's clock), and
    whether the answer was a completed task."""

    started: float
    written: float
    ended: float
    ok: bool

    @property
    def seconds(self) -> float:
        return self.ended - self.started


@dataclass
class Burst:
    """What one burst of turns measured."""

    kind: Kind
    method: Method
    turns: list[Exchange]
    cards: list[Exchange]
    gets: list[Exchange]
    rest_mib: float
    peak_mib: float
    alone_seconds: float  # one turn alone, before the burst
    client_cpu: float
    server_cpu: float
    started: float  # when the first turn was sent

    @property
    def elapsed(self) -> float:
        """From the first send until the last turn's answer was read."""
        return max(t.ended for t in self.turns) - self.started

    @property
    def all_written(self) -> float:
        return max(t.written for t in self.turns) - self.started


def _request(url: str, method: str, path: str, body: bytes = b"") -> bytes:
    """An HTTP/1.1 request's bytes, the connection closed after the answer."""
    host = urlsplit(url).netloc
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nA2A-Version: 1.0\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def _rpc(url: str, method: str, params: dict[str, object]) -> bytes:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return _request(url, "POST", urlsplit(url).path or "/", json.dumps(body).encode())


def _send(url: str, method: Method, text: str) -> bytes:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    return _rpc(url, method, {"message": message})


def completed(answer: bytes, streamed: bool) -> bool:
    """Whether an answer read whole says the task completed: a 200 whose body (a blocking
    send's task) or whose last event (a stream's) is in the completed state."""
    head, _, body = answer.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        return False
    if streamed:
        events = [line for line in body.splitlines() if line.startswith(b"data:")]
        return bool(events) and b"TASK_STATE_COMPLETED" in events[-1]
    return b"TASK_STATE_COMPLETED" in body


async def _exchange(url: str, request: bytes, check: bool | None) -> tuple[Exchange, bytes]:
    """One request on a connection of its own, read to the end (`check`: None, any 200
    will do; else whether the answer is a stream)."""
    loop = asyncio.get_running_loop()
    address = urlsplit(url)
    started = loop.time()
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    try:
        writer.write(request)
        await writer.drain()
        written = loop.time()
        answer = await asyncio.wait_for(reader.read(), TIMEOUT)
    finally:
        writer.close()
    ok = answer.startswith(b"HTTP/1.1 200") if check is None else completed(answer, check)
    return Exchange(started, written, loop.time(), ok), answer


class MemoryPeak:
    """The server group's highest PSS, sampled on a thread of this process while in use."""

    def __init__(self, leader: int) -> None:
        self.leader = leader
        self.peak = 0.0
        self._stop = threading.Event()

    @contextmanager
    def sampling(self) -> Iterator[None]:
        thread = threading.Thread(target=self._sample, daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join()

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, pss_mib(self.leader))
            if self._stop.wait(MEMORY_INTERVAL):
                return


async def _side(url: str, get_task: bytes, done: asyncio.Event) -> list[list[Exchange]]:
    """The card and a GetTask every SIDE_INTERVAL until `done`, each sent on schedule (the
    GetTask counts as answered when it holds the completed task it reads)."""
    loop = asyncio.get_running_loop()
    card = _request(url, "GET", CARD)
    pending: list[list[asyncio.Task[tuple[Exchange, bytes]]]] = [[], []]
    tick = loop.time()
    while not done.is_set():
        pending[0].append(asyncio.create_task(_exchange(url, card, None)))
        pending[1].append(asyncio.create_task(_exchange(url, get_task, False)))
        tick += SIDE_INTERVAL
        # A schedule, not a synchronisation: the side client's requests come at this rate.
        with suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), max(0.0, tick - loop.time()))
    return [[exchange for exchange, _ in await asyncio.gather(*side)] for side in pending]


async def _burst(server: Process | Server, kind: Kind, method: Method, turns: int) -> Burst:
    url = server.url
    streamed = method == "SendStreamingMessage"
    leader = server.process.pid
    # One turn alone: its time, and the task the side client reads.
    alone, answer = await _exchange(url, _send(url, "SendMessage", "alone"), False)
    if not alone.ok:
        raise RuntimeError(f"{kind}: a turn alone was not completed: {answer[:300]!r}")
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    get_task = _rpc(url, "GetTask", {"id": body["result"]["task"]["id"]})
    requests = [_send(url, method, f"turn {i}") for i in range(turns)]
    memory = MemoryPeak(leader)
    rest = pss_mib(leader)
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    with memory.sampling():
        client_cpu, server_cpu = time.process_time(), cpu_seconds(leader)
        started = loop.time()
        sent = [asyncio.create_task(_exchange(url, r, streamed)) for r in requests]
        side = asyncio.create_task(_side(url, get_task, done))
        answered = [exchange for exchange, _ in await asyncio.gather(*sent)]
        done.set()
        cards, gets = await side
        client_cpu = time.process_time() - client_cpu
        server_cpu = cpu_seconds(leader) - server_cpu
    return Burst(
        kind=kind,
        method=method,
        turns=answered,
        cards=cards,
        gets=gets,
        rest_mib=rest,
        peak_mib=memory.peak,
        alone_seconds=alone.seconds,
        client_cpu=client_cpu,
        server_cpu=server_cpu,
        started=started,
    )


@contextmanager
def _server(kind: Kind, wait: float) -> Iterator[Process | Server]:
    """A fresh server of `kind` whose agent awaits `wait` seconds: ours as `make run` serves
    it with deploy.toml's THREADS and JSON logs (the handler module is the test suite's, so
    not from a staged folder as `compare`'s echo agent), or the SDK's."""
    if kind == "ours":
        env = {
            "A2A_HANDLER": "tests.handlers.awaits_model",
            "A2A_BACKEND": "memory",
            "THREADS": str(usage.functions()["a2a"].threads),
            "A2A_LOG_FORMAT": "json",
            "TEST_HANDLER_WAIT_SECONDS": f"{wait:g}",
        }
        server = Server(env)
        try:
            yield server
        finally:
            server.stop()
    else:
        process = spawn("sdk", argv=(f"--wait={wait:g}",))
        try:
            first_answer(process, "sdk", timeout=30 + wait)
            yield process
        finally:
            process.stop()


LABELS = {
    ("ours", "SendMessage"): "ours, blocking SendMessage",
    ("ours", "SendStreamingMessage"): "ours, SendStreamingMessage",
    ("sdk", "SendMessage"): "a2a-sdk 1.3 server, blocking",
    ("sdk", "SendStreamingMessage"): "a2a-sdk 1.3 server, streamed",
}


def _ms(values: list[Exchange], q: float) -> str:
    return f"{percentile([v.seconds for v in values], q) * 1000:,.0f}"


def usage_of(burst: Burst) -> cost_model.Usage:
    """A turn's compute on `a2a` as deploy.toml sizes it: its share of the instance's time
    at the concurrency the burst reached (busy), or a turn alone on its instance."""
    a2a = usage.functions()["a2a"]
    return cost_model.Usage(
        reads=0,
        writes=0,
        deletes=0,
        tasks_operations=0,
        invocations=1,
        busy_seconds=cost_model.shared_instance_seconds(len(burst.turns), burst.elapsed),
        alone_seconds=cost_model.billed_alone(burst.alone_seconds),
        vcpu=a2a.vcpu,
        memory_gib=a2a.memory_gib,
    )


def cost_name(burst: Burst, wait: float) -> str:
    """The cost tables' name of a burst's turn, with the concurrency it reached."""
    reached = cost_model.concurrency_reached(len(burst.turns), wait, burst.elapsed)
    return (
        f"LLM turn awaiting {wait:g} s, {LABELS[burst.kind, burst.method]}, "
        f"{len(burst.turns)} at once: {reached:.0f} concurrent (compute only)"
    )


def agents(turns: int, wait: float) -> None:
    bursts(turns, wait)
    cancels()


def bursts(turns: int, wait: float) -> None:
    a2a = usage.functions()["a2a"]
    print(
        f"\nagents that wait on models: {turns} turns of an async handler awaiting {wait:g} s, "
        f"sent at once to one instance sized as deployed (THREADS={a2a.threads}, concurrency "
        f"{a2a.concurrency}; the embedded backend), a side client asking for the card and "
        f"GetTask every {SIDE_INTERVAL * 1000:.0f} ms; a fresh server a burst",
        flush=True,
    )
    if turns > a2a.concurrency:
        print(
            f"  ({turns} turns are more than an instance's concurrency of {a2a.concurrency}: "
            "Cloud Run would spread them over more instances; here one takes them all)"
        )
    bursts = []
    for kind in ("ours", "sdk"):
        for method in ("SendMessage", "SendStreamingMessage"):
            with (
                _server(kind, wait) as server,
                asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
            ):
                burst = runner.run(_burst(server, kind, method, turns))
            bursts.append(burst)
            failed = sum(not t.ok for t in burst.turns)
            reached = cost_model.concurrency_reached(turns, wait, burst.elapsed)
            per_turn = (burst.peak_mib - burst.rest_mib) * 1024 / turns
            print(
                f"  {LABELS[kind, method]}: all answered after {burst.elapsed:.2f} s "
                f"({failed} not completed; a turn p50 {_ms(burst.turns, 0.5)} ms, max "
                f"{_ms(burst.turns, 1.0)} ms; {reached:.0f} awaiting at once on average); "
                f"card p50 {_ms(burst.cards, 0.5)} / p99 {_ms(burst.cards, 0.99)} ms, GetTask "
                f"p50 {_ms(burst.gets, 0.5)} / p99 {_ms(burst.gets, 0.99)} ms "
                f"({len(burst.cards)} each, {sum(not e.ok for e in burst.cards + burst.gets)} "
                f"failed); memory {burst.rest_mib:.1f} MiB at rest, {burst.peak_mib:.1f} at "
                f"peak: {per_turn:.1f} KiB a turn in flight; server CPU "
                f"{burst.server_cpu:.2f} s; client: all sent within "
                f"{burst.all_written * 1000:.0f} ms, its CPU {burst.client_cpu:.2f} s",
                flush=True,
            )
    print(
        f"\n  the table (issue 34's shape):\n  | {turns} turns of {wait:g} s, one instance | "
        "all answered after | card / GetTask p99 meanwhile | memory a turn in flight |\n"
        "  |---|---|---|---|"
    )
    for burst in bursts:
        per_turn = (burst.peak_mib - burst.rest_mib) * 1024 / turns
        print(
            f"  | {LABELS[burst.kind, burst.method]} | {burst.elapsed:.1f} s | "
            f"{_ms(burst.cards, 0.99)} / {_ms(burst.gets, 0.99)} ms | {per_turn:.0f} KiB |"
        )
    print(
        "\n  a turn's compute on Cloud Run (request-based, as deployed: billed while the "
        f"instance holds a request; {a2a.vcpu:g} vCPU, {a2a.memory_gib:g} GiB), at the "
        "concurrency reached (busy) or alone:"
    )
    print(cost_model.USAGE_HEADER)
    for burst in bursts:
        print(cost_model.usage_row(cost_name(burst, wait), usage_of(burst)))
    print(cost_model.HEADER)
    for burst in bursts:
        name = cost_name(burst, wait)
        print(cost_model.row(name, cost_model.per_million_of(name, usage_of(burst))))


CANCELS = 10  # turns canceled, one at a time, on each path
CANCEL_WAIT = 5.0  # seconds a canceled turn's handler would await


def handler_log(log: Path) -> dict[tuple[str, str], float]:
    """(what, task id) -> when (time.time()), from tests.handlers.awaits_model's log."""
    if not log.exists():
        return {}
    lines = [line.split() for line in log.read_text().splitlines()]
    return {(what, task): float(at) for at, what, task in lines}


def _logged(log: Path, whats: tuple[str, ...], task_id: str, timeout: float) -> tuple[str, float]:
    """The first of `whats` the handler logged for the task, and when."""
    found: list[tuple[str, float]] = []

    def seen() -> bool:
        entries = handler_log(log)
        found.extend((w, entries[w, task_id]) for w in whats if (w, task_id) in entries)
        return bool(found)

    wait_until(seen, timeout, lambda: f"the handler logged none of {whats} for {task_id}")
    return found[0]


def _call(url: str, method: str, params: dict[str, object]) -> dict[str, object]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer: dict[str, object] = requests.post(url, json=body, headers=HEADERS, timeout=30).json()
    return answer


def cancel_latencies(sender: Server, canceller: Server, log: Path) -> list[tuple[str, float]]:
    """CANCELS streamed turns sent to `sender`, each canceled through `canceller` once its
    handler awaits: how its await ended, and the seconds from the cancel's send."""
    return [_cancel_one(sender, canceller, log, f"cancel {i}") for i in range(CANCELS)]


def _cancel_one(sender: Server, canceller: Server, log: Path, text: str) -> tuple[str, float]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
    response = sse.stream(sender.url, {**body, "params": {"message": message}}, HEADERS)
    try:
        task_id = next(sse.read(response)).data["result"]["task"]["id"]
        _logged(log, ("start",), task_id, 30)
        # Another instance cancels what its store has: the turn's first commit.
        wait_until(
            lambda: "result" in _call(canceller.url, "GetTask", {"id": task_id}),
            30,
            lambda: f"{task_id} was never stored",
        )
        sent = time.time()
        canceled = _call(canceller.url, "CancelTask", {"id": task_id})
        if "result" not in canceled:
            raise RuntimeError(f"CancelTask of {task_id} answered {canceled}")
        what, at = _logged(log, ("canceled", "waited"), task_id, CANCEL_WAIT + 30)
        return what, at - sent
    finally:
        response.close()


def _cancel_line(where: str, found: list[tuple[str, float]]) -> str:
    reached = [seconds for what, seconds in found if what == "canceled"]
    ran_on = [seconds for what, seconds in found if what == "waited"]
    line = f"  cancel -> the await's end, {where}: {len(reached)} of {len(found)} canceled"
    if reached:
        line += (
            f" (p50 {percentile(reached, 0.5) * 1000:,.0f} ms, p99 "
            f"{percentile(reached, 0.99) * 1000:,.0f} ms)"
        )
    if ran_on:
        line += (
            f"; {len(ran_on)} awaited on, uncanceled, their waits run out p50 "
            f"{percentile(ran_on, 0.5) * 1000:,.0f} ms, max {max(ran_on) * 1000:,.0f} ms "
            "after the cancel was sent"
        )
    return line


def cancels() -> None:
    """The cancel figures: on the instance running the turn, and from another."""
    log = Path(tempfile.mkdtemp()) / "handler.log"
    env = {
        "A2A_HANDLER": "tests.handlers.awaits_model",
        "THREADS": str(usage.functions()["a2a"].threads),
        "TEST_HANDLER_WAIT_SECONDS": f"{CANCEL_WAIT:g}",
        "TEST_HANDLER_LOG": str(log),
    }
    print(
        f"\n  {CANCELS} streamed turns awaiting {CANCEL_WAIT:g} s, one at a time, each canceled "
        "once its handler awaits:",
        flush=True,
    )
    server = Server({**env, "A2A_BACKEND": "memory"})
    try:
        print(_cancel_line("the instance running the turn", cancel_latencies(server, server, log)))
    finally:
        server.stop()
    with start_firestore() as emulator:
        firestore = {
            **emulator.env(),
            "A2A_BACKEND": "firestore",
            "GOOGLE_CLOUD_PROJECT": emulator.project,
        }
        runner = Server({**env, **firestore})
        try:
            other = Server({**env, **firestore})
            try:
                found = cancel_latencies(runner, other, log)
            finally:
                other.stop()
        finally:
            runner.stop()
    print(_cancel_line("from another instance (Firestore emulator)", found), flush=True)
