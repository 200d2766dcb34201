"""`make bench BENCH_ARGS="--only streams"`: many tenants' streams on one `a2a` instance.

One real server (functions-framework, the embedded backend, the deploy's THREADS, A2A_AUTH=
api-key with OWNERS keys, so the per-owner limit applies) holds streams that wait: each
stream is on a task of its own that waits for input (the phone order agent's question), the
owners' in turn, so a stream is open and idle, as a client waiting for an answer holds it.
Measured from /proc and over HTTP, with asyncio clients in this process (no thread per
stream here either):

- the server's memory (PSS) at each count of open streams, and its slope per stream;
- the streams that fit the function's memory setting, from that slope;
- the time to the first frame of one more stream, and a GetTask's latency, at each count;
- the server's threads at the largest count (idle streams hold none; on Firestore each
  followed task's listener holds one of the client library's).

On the embedded backend, then on the Firestore emulator.
The machine is shared: memory figures are steady, latencies are noisy.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from emulator.firestore import start_firestore
from shared.identity.api_key import hashed
from tests.bench import usage
from tests.bench.load import HEADERS, group_pids, percentile, pss_mib
from tests.conftest import Server

OWNERS = 20
COUNTS = (100, 250, 500, 1000)  # open streams at which the figures are taken
FIRESTORE_COUNTS = (100, 250, 500)  # on the emulator, which this machine also runs
_A2A = usage.functions()["a2a"]  # as infra/deploy.toml sizes it
MEMORY_MIB = round(_A2A.memory_gib * 1024)
THREADS = _A2A.threads
SAMPLES = 20  # new streams (and GetTasks) timed at each count


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _threads(leader: int) -> int:
    """The threads of the server's processes."""
    count = 0
    for pid in group_pids(leader):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                count += int(line.split()[1])
    return count


def _sockets(leader: int) -> int:
    """The sockets the server's processes hold open (its connections, and its listener)."""
    count = 0
    for pid in group_pids(leader):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                count += os.readlink(fd).startswith("socket:")
    return count


class Tenants:
    """OWNERS owners, each with a key, and their open streams, each on a task of its own that
    waits for input (as many clients each waiting for their own task's answer)."""

    def __init__(
        self,
        server: Server,
        keys: dict[str, str],
        held: httpx.AsyncClient,
        timed: httpx.AsyncClient,
    ) -> None:
        self.server = server
        self.owners = list(keys)
        self.keys = keys
        # The streams held open, and the requests timed: on a client of their own, since a
        # client's pool of a thousand connections slows each of its requests.
        self.held = held
        self.timed = timed
        # Each open stream's response and its lines: the lines are held too, since an async
        # generator dropped is closed (asyncio's finalizer), and with it the response.
        self.open: list[tuple[httpx.Response, AsyncIterator[str]]] = []

    def headers(self, owner: str) -> dict[str, str]:
        return {**HEADERS, "X-API-Key": self.keys[owner]}

    async def call(
        self, client: httpx.AsyncClient, owner: str, method: str, params: dict[str, Any]
    ) -> Any:
        answer = await client.post(
            self.server.url, json=_rpc(method, params), headers=self.headers(owner)
        )
        assert answer.status_code == 200, answer.text
        return answer.json()["result"]

    async def ask(self, client: httpx.AsyncClient, owner: str) -> str:
        """A new task of the owner's, waiting for input: its id."""
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER"}
        message["parts"] = [{"text": "new phone"}]  # type: ignore[assignment]
        task = (await self.call(client, owner, "SendMessage", {"message": message}))["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        return str(task["id"])

    async def subscribe(
        self, client: httpx.AsyncClient, owner: str, task_id: str
    ) -> tuple[tuple[httpx.Response, AsyncIterator[str]], float]:
        """A stream of the owner's task, open once its first frame came (its response and
        lines); the seconds from the request to that frame."""
        body = _rpc("SubscribeToTask", {"id": task_id})
        started = time.perf_counter()
        request = client.build_request(
            "POST", self.server.url, json=body, headers=self.headers(owner)
        )
        response = await client.send(request, stream=True)
        assert response.headers.get("content-type", "").startswith("text/event-stream"), (
            await response.aread()
        )
        lines = response.aiter_lines()
        while not (await anext(lines)).startswith("data:"):
            pass
        return (response, lines), time.perf_counter() - started

    async def one_more(self, index: int) -> tuple[tuple[httpx.Response, AsyncIterator[str]], float]:
        owner = self.owners[index % OWNERS]
        return await self.subscribe(self.held, owner, await self.ask(self.held, owner))

    async def open_until(self, count: int) -> None:
        """Open streams, the owners' in turn, until `count` are."""
        while len(self.open) < count:
            batch = range(len(self.open), min(count, len(self.open) + 50))
            opened = await asyncio.gather(*(self.one_more(i) for i in batch))
            self.open.extend(stream for stream, _ in opened)

    async def first_frames(self) -> list[float]:
        """Seconds to the first frame of one more stream, one at a time, each closed."""
        times = []
        for i in range(SAMPLES):
            owner = self.owners[i % OWNERS]
            task_id = await self.ask(self.timed, owner)
            (response, _), seconds = await self.subscribe(self.timed, owner, task_id)
            await response.aclose()
            times.append(seconds)
        return times

    async def get_tasks(self, task_id: str) -> list[float]:
        """Seconds a GetTask takes, one at a time."""
        times = []
        for _ in range(SAMPLES):
            started = time.perf_counter()
            await self.call(self.timed, self.owners[0], "GetTask", {"id": task_id})
            times.append(time.perf_counter() - started)
        return times


async def _measure(server: Server, keys: dict[str, str], counts: tuple[int, ...]) -> None:
    # A connection a request each, as a new client's: one kept idle could be closed by the
    # server's keep-alive timeout (gunicorn's 2 s) just as it is reused (a ReadError).
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
    async with (
        httpx.AsyncClient(limits=limits, timeout=60) as held,
        httpx.AsyncClient(limits=limits, timeout=60) as timed,
    ):
        tenants = Tenants(server, keys, held, timed)
        probe = await tenants.ask(timed, tenants.owners[0])
        leader = server.process.pid
        base = pss_mib(leader)
        idle = _sockets(leader)
        rows = []
        for count in counts:
            await tenants.open_until(count)
            # Every stream is open on the server (a connection of the requests before may
            # have been reused by one: it was counted before).
            connections = _sockets(leader) - idle
            assert connections >= count - 2, f"{count} streams open, {connections} connections"
            memory = pss_mib(leader)
            frames = await tenants.first_frames()
            gets = await tenants.get_tasks(probe)
            rows.append((count, memory, frames, gets))
            print(
                f"  {count} open streams ({connections} more connections): {memory:.1f} MiB PSS; "
                "one more stream's first frame "
                f"p50 {percentile(frames, 0.5) * 1000:.1f} ms, p99 "
                f"{percentile(frames, 0.99) * 1000:.1f} ms; GetTask p50 "
                f"{percentile(gets, 0.5) * 1000:.1f} ms ({SAMPLES} each)"
            )
        threads = _threads(leader)
        for response, _ in tenants.open:
            await response.aclose()
    (low, low_mib, _, _), (high, high_mib, _, _) = rows[0], rows[-1]
    slope = (high_mib - low_mib) / (high - low)
    fits = int((MEMORY_MIB - base) / slope) if slope > 0 else 0
    print(
        f"  memory per open stream: {slope * 1024:.1f} KiB (PSS slope from {low} to {high}); "
        f"{base:.1f} MiB with none; the server's threads at {high}: {threads} "
        f"(THREADS={THREADS})"
    )
    print(
        f"  streams within {MEMORY_MIB} MiB: ({MEMORY_MIB} - {base:.0f}) MiB / "
        f"{slope * 1024:.1f} KiB = {fits} (memory alone; the embedded store and requests in "
        "flight need their share)"
    )


def streams() -> None:
    """The `streams` section: on the embedded backend, then on the Firestore emulator (each
    task followed by its own listener: a Listen stream and two of the client library's
    threads)."""
    print(f"\nstreams ({OWNERS} owners; each stream on a task of its own waiting for input):")
    print("  embedded backend:")
    _run({"A2A_BACKEND": "memory"}, COUNTS)
    with start_firestore() as emulator:
        print("  Firestore emulator (a listener per task):")
        firestore = {"A2A_BACKEND": "firestore", "GOOGLE_CLOUD_PROJECT": emulator.project}
        _run({**emulator.env(), **firestore}, FIRESTORE_COUNTS)


def _run(backend: dict[str, str], counts: tuple[int, ...]) -> None:
    keys = {f"owner{n}": secrets.token_urlsafe(32) for n in range(OWNERS)}
    most = counts[-1] + SAMPLES + 10
    env = {
        **backend,
        "A2A_HANDLER": "functions.handlers.phone_order",
        "A2A_AUTH": "api-key",
        "A2A_API_KEYS": ",".join(f"{owner}:{hashed(key)}" for owner, key in keys.items()),
        "THREADS": str(THREADS),
        "A2A_MAX_STREAMS": str(most),
        "A2A_MAX_STREAMS_PER_OWNER": str(most // OWNERS + SAMPLES),
        # Streams stay open, idle, for the whole measure.
        "A2A_STREAM_IDLE_SECONDS": "3600",
        "A2A_STREAM_SECONDS": "3600",
        "A2A_LOG_FORMAT": "text",
    }
    server = Server(env)
    try:
        asyncio.run(_measure(server, keys, counts))
    finally:
        server.stop()
