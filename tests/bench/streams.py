"""`make bench BENCH_ARGS="--only streams"`: many tenants' streams on one `a2a` instance.

One real server (functions-framework, the embedded backend, the deploy's THREADS, A2A_AUTH=
api-key with OWNERS keys, so the per-owner limit applies) holds streams that wait: each
stream is on a task of its own that waits for input (the phone order agent's question), the
owners' in turn, so a stream is open and idle, as a client waiting for an answer holds it.
Measured from /proc and over HTTP, with one asyncio client in this process (no thread per
stream here either):

- the server's memory (PSS) at each count of open streams, and its slope per stream;
- the streams that fit the function's memory setting, from that slope;
- the time to the first frame of one more stream, and a GetTask's latency, at each count;
- the server's threads at the largest count (idle streams hold none).

The machine is shared: memory figures are steady, latencies are noisy.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from shared.identity.api_key import hashed
from tests.bench.load import HEADERS, group_pids, percentile, pss_mib
from tests.conftest import Server

OWNERS = 20
COUNTS = (100, 250, 500, 1000)  # open streams at which the figures are taken
MEMORY_MIB = 512  # the a2a function's memory in infra/deploy.toml
THREADS = 80  # its concurrency there, which `make deploy` sets THREADS to
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


class Tenants:
    """OWNERS owners, each with a key, and their open streams, each on a task of its own that
    waits for input (as many clients each waiting for their own task's answer)."""

    def __init__(self, server: Server, keys: dict[str, str], client: httpx.AsyncClient) -> None:
        self.server = server
        self.owners = list(keys)
        self.keys = keys
        self.client = client
        self.open: list[httpx.Response] = []

    def headers(self, owner: str) -> dict[str, str]:
        return {**HEADERS, "X-API-Key": self.keys[owner]}

    async def call(self, owner: str, method: str, params: dict[str, Any]) -> Any:
        answer = await self.client.post(
            self.server.url, json=_rpc(method, params), headers=self.headers(owner)
        )
        assert answer.status_code == 200, answer.text
        return answer.json()["result"]

    async def ask(self, owner: str) -> str:
        """A new task of the owner's, waiting for input: its id."""
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER"}
        message["parts"] = [{"text": "new phone"}]  # type: ignore[assignment]
        task = (await self.call(owner, "SendMessage", {"message": message}))["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        return str(task["id"])

    async def subscribe(self, owner: str, task_id: str) -> tuple[httpx.Response, float]:
        """A stream of the owner's task, open once its first frame came; the seconds from
        the request to that frame."""
        body = _rpc("SubscribeToTask", {"id": task_id})
        started = time.perf_counter()
        request = self.client.build_request(
            "POST", self.server.url, json=body, headers=self.headers(owner)
        )
        response = await self.client.send(request, stream=True)
        assert response.headers.get("content-type", "").startswith("text/event-stream"), (
            await response.aread()
        )
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                break
        return response, time.perf_counter() - started

    async def one_more(self, index: int) -> tuple[httpx.Response, float]:
        owner = self.owners[index % OWNERS]
        return await self.subscribe(owner, await self.ask(owner))

    async def open_until(self, count: int) -> None:
        """Open streams, the owners' in turn, until `count` are."""
        while len(self.open) < count:
            batch = range(len(self.open), min(count, len(self.open) + 50))
            opened = await asyncio.gather(*(self.one_more(i) for i in batch))
            self.open.extend(response for response, _ in opened)

    async def first_frames(self) -> list[float]:
        """Seconds to the first frame of one more stream, one at a time, each closed."""
        times = []
        for i in range(SAMPLES):
            owner = self.owners[i % OWNERS]
            response, seconds = await self.subscribe(owner, await self.ask(owner))
            await response.aclose()
            times.append(seconds)
        return times

    async def get_tasks(self, task_id: str) -> list[float]:
        """Seconds a GetTask takes, one at a time."""
        times = []
        for _ in range(SAMPLES):
            started = time.perf_counter()
            await self.call(self.owners[0], "GetTask", {"id": task_id})
            times.append(time.perf_counter() - started)
        return times


async def _measure(server: Server, keys: dict[str, str]) -> None:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        tenants = Tenants(server, keys, client)
        probe = await tenants.ask(tenants.owners[0])
        leader = server.process.pid
        base = pss_mib(leader)
        rows = []
        for count in COUNTS:
            await tenants.open_until(count)
            memory = pss_mib(leader)
            frames = await tenants.first_frames()
            gets = await tenants.get_tasks(probe)
            rows.append((count, memory, frames, gets))
            print(
                f"  {count} open streams: {memory:.1f} MiB PSS; one more stream's first frame "
                f"p50 {percentile(frames, 0.5) * 1000:.1f} ms, p99 "
                f"{percentile(frames, 0.99) * 1000:.1f} ms; GetTask p50 "
                f"{percentile(gets, 0.5) * 1000:.1f} ms ({SAMPLES} each)"
            )
        threads = _threads(leader)
        for response in tenants.open:
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
    """The `streams` section."""
    keys = {f"owner{n}": secrets.token_urlsafe(32) for n in range(OWNERS)}
    most = COUNTS[-1] + SAMPLES + 10
    env = {
        "A2A_HANDLER": "functions.handlers.phone_order",
        "A2A_BACKEND": "memory",
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
    print(f"\nstreams ({OWNERS} owners; each stream on a task of its own waiting for input):")
    server = Server(env)
    try:
        asyncio.run(_measure(server, keys))
    finally:
        server.stop()
