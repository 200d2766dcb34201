"""`make bench BENCH_ARGS="--only agents"`: agents that wait on models (issue 34).

N turns (`--turns`, 400) of an `async` handler that awaits S seconds (`--wait`, 2) as a model
call does (tests/handlers/awaits_model.py), all sent at once to one instance sized as
deployed (THREADS and concurrency of infra/deploy.toml's `a2a`, `usage.functions()`; the
embedded backend, as `make run` serves it), blocking (`SendMessage`) and streamed
(`SendStreamingMessage`); the same against the official SDK's server whose agent awaits the
same S seconds (tests/bench/reference.py's `WaitingExecutor`); and, as the control, N
requests for our card (no handler runs) sent the same way. Meanwhile a side client asks for
the agent card and GetTask (of a task made before) every 50 ms, each on schedule whatever
the ones before it became, both on a connection kept open (as an HTTP client's pool keeps
it: opened before the burst) and on a new connection each. A new connection waits in the
listening socket's queue behind the burst's N, and uvicorn's loop (uvloop: libuv accepts
one connection a loop iteration since its PR 3696) takes them in arrival order, each
iteration also running what the connections before it made ready: that figure is the
burst's admission, with or without a handler (the control shows it). A kept connection's
request is read in the loop's next iteration: its figure shows whether requests that run no
handler wait behind turns. Each burst on a fresh server process. Reported:

- the time from the first send until every turn is answered, and the concurrency that
  reached: N x S over that time, the turns awaiting at once on average;
- the side requests' p50 and p99 while the turns run, each way;
- the server's memory per turn in flight: its process group's PSS at peak (sampled every
  100 ms) less at rest (after one turn), over N;
- what a turn's compute costs on Cloud Run at that concurrency (tests/bench/cost_model.py):
  a request-based instance, as `make deploy` deploys it, is billed while it holds a request,
  so N turns answered within T share T seconds of it; alone, a turn is billed its own time;
- how soon a cancel reaches a turn's await (ours): CANCELS turns awaiting CANCEL_WAIT
  seconds, one at a time, each canceled once its handler began to await, the time from
  sending CancelTask to the await's end (canceled, or run out: the handler's log,
  $TEST_HANDLER_LOG): streamed, on the instance running the turn (embedded) and from another
  instance (two `a2a` on the Firestore emulator); and sent not to be waited for, the turn run
  by the worker (`a2a` and `worker` on the Firestore and Cloud Tasks emulators).

The client is this process's event loop (uvloop, as the servers') speaking HTTP/1.1 on
raw asyncio streams, a connection a burst's request (`Connection: close`, the answer read to
its end): a few hundred microseconds of CPU a request, so 400 sends are written within tens
of milliseconds of the first on a quiet machine; the section prints that and the client's
CPU, beside the server's, as the proof that the client is not what is measured.
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
from tests.bench.stacks import emulated
from tests.conftest import Server, wait_until

Kind = Literal["ours", "sdk"]
# What a burst sends: turns, blocking or streamed, or the control's requests for the card.
Method = Literal["SendMessage", "SendStreamingMessage", "card"]
# How a side request reaches the server: on a connection kept open, or on a new one.
Way = Literal["kept", "new"]
WAYS: tuple[Way, ...] = ("kept", "new")
SIDE_INTERVAL = 0.05  # seconds between the side client's card and GetTask requests
KEPT = 4  # connections the side client opens before a burst (two requests in flight a tick)
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
    side: Side
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


def _request(url: str, method: str, path: str, body: bytes = b"", *, close: bool = True) -> bytes:
    """An HTTP/1.1 request's bytes, the connection closed after the answer unless kept."""
    host = urlsplit(url).netloc
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nA2A-Version: 1.0\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        + ("Connection: close\r\n" if close else "")
        + "\r\n"
    )
    return head.encode() + body


def _rpc(url: str, method: str, params: dict[str, object], *, close: bool = True) -> bytes:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    path = urlsplit(url).path or "/"
    return _request(url, "POST", path, json.dumps(body).encode(), close=close)


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


class Kept:
    """Connections kept open between requests, as an HTTP client's pool keeps them: opened
    before the burst (`open`); a request takes the one last put back, else opens one (which
    then waits in the server's queue of connections, as a pooled client's would). One the
    server closed while idle (uvicorn's keep-alive timeout) is reopened and the request sent
    again, as clients do, its time counted (`reopened`)."""

    def __init__(self, url: str) -> None:
        address = urlsplit(url)
        self.host, self.port = address.hostname, address.port
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.reopened = 0

    async def open(self, count: int, request: bytes) -> None:
        """`count` connections, each used once (`request`) so the server holds it open."""
        connections = [await self._connect() for _ in range(count)]
        for connection in connections:
            await self._ask(connection, request)
        self.idle.extend(connections)

    async def exchange(self, request: bytes, check: bool | None) -> Exchange:
        loop = asyncio.get_running_loop()
        started = loop.time()
        connection = self.idle.pop() if self.idle else await self._connect()
        try:
            answer = await self._ask(connection, request)
        except asyncio.IncompleteReadError:  # closed by the server while idle
            await _closed(connection[1])
            self.reopened += 1
            connection = await self._connect()
            answer = await self._ask(connection, request)
        self.idle.append(connection)
        ok = answer.startswith(b"HTTP/1.1 200") if check is None else completed(answer, check)
        return Exchange(started, started, loop.time(), ok)

    async def close(self) -> None:
        await asyncio.gather(*(_closed(writer) for _, writer in self.idle))

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(self.host, self.port)

    async def _ask(
        self, connection: tuple[asyncio.StreamReader, asyncio.StreamWriter], request: bytes
    ) -> bytes:
        """One request and its answer, whose length its head says (the card and GetTask)."""
        reader, writer = connection
        writer.write(request)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
        fields = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
        length = {name.strip().lower(): value for name, value in fields.items()}[b"content-length"]
        return head + await reader.readexactly(int(length))


async def _closed(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with suppress(OSError):  # the server may have reset it
        await writer.wait_closed()


@dataclass
class Side:
    """The side requests of a burst: (card or GetTask, the way it came) -> its exchanges."""

    exchanges: dict[tuple[str, Way], list[Exchange]]
    reopened: int  # kept connections the server had closed, reopened

    def of(self, way: Way) -> list[Exchange]:
        return self.exchanges["card", way] + self.exchanges["GetTask", way]

    def p99(self, way: Way) -> str:
        """The card's p99 and GetTask's, in milliseconds, as printed."""
        return self._quantile(way, 0.99)

    def p50(self, way: Way) -> str:
        return self._quantile(way, 0.5)

    def _quantile(self, way: Way, q: float) -> str:
        card, get = self.exchanges["card", way], self.exchanges["GetTask", way]
        return f"{_ms(card, q)} / {_ms(get, q)}"


async def _side(url: str, task_id: str, kept: Kept, done: asyncio.Event) -> Side:
    """The card and a GetTask every SIDE_INTERVAL until `done`, each sent on schedule, on a
    kept connection and on a new one (a GetTask counts as answered when it holds the
    completed task it reads)."""
    loop = asyncio.get_running_loop()
    asks = {
        ("card", way): (_request(url, "GET", CARD, close=way == "new"), None) for way in WAYS
    } | {
        ("GetTask", way): (_rpc(url, "GetTask", {"id": task_id}, close=way == "new"), False)
        for way in WAYS
    }
    pending: dict[tuple[str, Way], list[asyncio.Task[Exchange]]] = {key: [] for key in asks}
    tick = loop.time()
    while not done.is_set():
        for (what, way), (request, check) in asks.items():
            exchange = kept.exchange(request, check) if way == "kept" else _new(url, request, check)
            pending[what, way].append(asyncio.create_task(exchange))
        tick += SIDE_INTERVAL
        # A schedule, not a synchronisation: the side client's requests come at this rate.
        with suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), max(0.0, tick - loop.time()))
    exchanges = {key: list(await asyncio.gather(*tasks)) for key, tasks in pending.items()}
    return Side(exchanges, kept.reopened)


async def _new(url: str, request: bytes, check: bool | None) -> Exchange:
    exchange, _ = await _exchange(url, request, check)
    return exchange


async def _burst(server: Process | Server, kind: Kind, method: Method, turns: int) -> Burst:
    url = server.url
    check = None if method == "card" else method == "SendStreamingMessage"
    leader = server.process.pid
    # One turn alone: its time, and the task the side client reads.
    alone, answer = await _exchange(url, _send(url, "SendMessage", "alone"), False)
    if not alone.ok:
        raise RuntimeError(f"{kind}: a turn alone was not completed: {answer[:300]!r}")
    task_id = json.loads(answer.partition(b"\r\n\r\n")[2])["result"]["task"]["id"]
    if method == "card":
        requests = [_request(url, "GET", CARD)] * turns
    else:
        requests = [_send(url, method, f"turn {i}") for i in range(turns)]
    kept = Kept(url)
    await kept.open(KEPT, _request(url, "GET", CARD, close=False))
    memory = MemoryPeak(leader)
    rest = pss_mib(leader)
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    try:
        with memory.sampling():
            client_cpu, server_cpu = time.process_time(), cpu_seconds(leader)
            started = loop.time()
            sent = [asyncio.create_task(_exchange(url, r, check)) for r in requests]
            side_task = asyncio.create_task(_side(url, task_id, kept, done))
            answered = [exchange for exchange, _ in await asyncio.gather(*sent)]
            done.set()
            side = await side_task
            client_cpu = time.process_time() - client_cpu
            server_cpu = cpu_seconds(leader) - server_cpu
    finally:
        await kept.close()
    return Burst(
        kind=kind,
        method=method,
        turns=answered,
        side=side,
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
    ("ours", "card"): "the control: ours, requests for the card (no handler)",
}
# The bursts, in the order run and printed: the turns, then the control.
BURSTS: tuple[tuple[Kind, Method], ...] = (
    ("ours", "SendMessage"),
    ("ours", "SendStreamingMessage"),
    ("sdk", "SendMessage"),
    ("sdk", "SendStreamingMessage"),
    ("ours", "card"),
)


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
    for kind, method in BURSTS:
        with (
            _server(kind, wait) as server,
            asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
        ):
            burst = runner.run(_burst(server, kind, method, turns))
        bursts.append(burst)
        print(_burst_line(burst, wait), flush=True)
    print(
        f"\n  the table (issue 34's shape):\n  | {turns} turns of {wait:g} s, one instance | "
        "all answered after | card / GetTask p99 meanwhile, on a kept connection | on a new "
        "connection each | memory a turn in flight |\n  |---|---|---|---|---|"
    )
    for burst in bursts:
        per_turn = "" if burst.method == "card" else f"{_per_turn_kib(burst):.0f} KiB"
        print(
            f"  | {LABELS[burst.kind, burst.method]} | {burst.elapsed:.1f} s | "
            f"{burst.side.p99('kept')} ms | {burst.side.p99('new')} ms | {per_turn} |"
        )
    turned = [burst for burst in bursts if burst.method != "card"]
    print(
        "\n  a turn's compute on Cloud Run (request-based, as deployed: billed while the "
        f"instance holds a request; {a2a.vcpu:g} vCPU, {a2a.memory_gib:g} GiB), at the "
        "concurrency reached (busy) or alone:"
    )
    print(cost_model.USAGE_HEADER)
    for burst in turned:
        print(cost_model.usage_row(cost_name(burst, wait), usage_of(burst)))
    print(cost_model.HEADER)
    for burst in turned:
        name = cost_name(burst, wait)
        print(cost_model.row(name, cost_model.per_million_of(name, usage_of(burst))))


def _per_turn_kib(burst: Burst) -> float:
    return (burst.peak_mib - burst.rest_mib) * 1024 / len(burst.turns)


def _burst_line(burst: Burst, wait: float) -> str:
    """A burst's figures, as printed when it ends."""
    turns = len(burst.turns)
    side = burst.side
    failed = sum(not e.ok for way in WAYS for e in side.of(way))
    line = (
        f"  {LABELS[burst.kind, burst.method]}: all answered after {burst.elapsed:.2f} s "
        f"({sum(not t.ok for t in burst.turns)} not completed; one p50 "
        f"{_ms(burst.turns, 0.5)} ms, max {_ms(burst.turns, 1.0)} ms"
    )
    if burst.method != "card":
        reached = cost_model.concurrency_reached(turns, wait, burst.elapsed)
        line += f"; {reached:.0f} awaiting at once on average"
    line += (
        f"); card / GetTask p50 {side.p50('kept')} ms, p99 {side.p99('kept')} ms on a kept "
        f"connection, p50 {side.p50('new')} ms, p99 {side.p99('new')} ms on a new one "
        f"({len(side.exchanges['card', 'kept'])} of each, {failed} failed, "
        f"{side.reopened} kept connections reopened); memory {burst.rest_mib:.1f} MiB at "
        f"rest, {burst.peak_mib:.1f} at peak"
    )
    if burst.method != "card":
        line += f": {_per_turn_kib(burst):.1f} KiB a turn in flight"
    return line + (
        f"; server CPU {burst.server_cpu:.2f} s; client: all sent within "
        f"{burst.all_written * 1000:.0f} ms, its CPU {burst.client_cpu:.2f} s"
    )


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


def cancel_latencies(
    sender: Server, canceller: Server, log: Path, *, queued: bool = False
) -> list[tuple[str, float]]:
    """CANCELS turns sent to `sender`, streamed (or, `queued`, sent not to be waited for: the
    worker runs them), each canceled through `canceller` once its handler awaits: how its
    await ended, and the seconds from the cancel's send."""
    return [
        _cancel_one(sender, canceller, log, f"cancel {i}", queued=queued) for i in range(CANCELS)
    ]


@contextmanager
def _turn(server: Server, text: str, *, queued: bool) -> Iterator[str]:
    """A turn's task id: of a streamed send to `server` (the stream open meanwhile), or of a
    non-blocking one, whose turn the worker runs."""
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if queued:
        answer = _call(
            server.url,
            "SendMessage",
            {"message": message, "configuration": {"returnImmediately": True}},
        )
        result = answer["result"]
        assert isinstance(result, dict), answer
        yield result["task"]["id"]
        return
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
    response = sse.stream(server.url, {**body, "params": {"message": message}}, HEADERS)
    try:
        yield next(sse.read(response)).data["result"]["task"]["id"]
    finally:
        response.close()


def _cancel_one(
    sender: Server, canceller: Server, log: Path, text: str, *, queued: bool
) -> tuple[str, float]:
    with _turn(sender, text, queued=queued) as task_id:
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
    """The cancel figures: on the instance running the turn, from another, and of a turn
    the worker runs."""
    log = Path(tempfile.mkdtemp()) / "handler.log"
    env = {
        "A2A_HANDLER": "tests.handlers.awaits_model",
        "THREADS": str(usage.functions()["a2a"].threads),
        "TEST_HANDLER_WAIT_SECONDS": f"{CANCEL_WAIT:g}",
        "TEST_HANDLER_LOG": str(log),
    }
    print(
        f"\n  {CANCELS} turns awaiting {CANCEL_WAIT:g} s on each path, one at a time, each "
        "canceled once its handler awaits (streamed sends; the worker's, sent not to be "
        "waited for):",
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
    with emulated(env, "worker") as (server,):
        found = cancel_latencies(server, server, log, queued=True)
    print(
        _cancel_line("of a turn the worker runs (Firestore and Cloud Tasks emulators)", found),
        flush=True,
    )
