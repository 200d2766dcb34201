"""What every section of `make bench` measures with: the blocking-send load, percentiles, and
a server's CPU time and memory read from /proc.

Process figures cover the server's whole process group (functions-framework serves from a
gunicorn worker forked from its arbiter; the bench starts each server as a group leader): CPU
is user + system time, memory the sum of the processes' proportional set sizes (PSS: a page
two processes share counts once, as in the instance's memory).
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import threading
import time
import uuid
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}
TICK = os.sysconf("SC_CLK_TCK")


class HasUrl(Protocol):
    @property
    def url(self) -> str: ...


def send_body(text: str, *, blocking: bool = True) -> str:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    params = {"message": message, "configuration": {"returnImmediately": not blocking}}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params})


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def load(
    server: HasUrl, clients: int, requests_per_client: int, max_seconds: float
) -> dict[str, float]:
    """`clients` threads, each sending blocking SendMessage requests one after another."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    deadline = time.monotonic() + max_seconds

    address = urlsplit(server.url)

    def client() -> None:
        nonlocal errors
        # http.client, not requests: requests spends ~1 ms of CPU a call in this process,
        # whose 16 threads share one core and its GIL; the load generator was the bottleneck
        # of the faster server (a bare functions-framework function answered no more
        # requests per second than our agent), and its queueing counted as server latency.
        connection = http.client.HTTPConnection(address.netloc, timeout=30)
        mine: list[float] = []
        bad = 0
        for i in range(requests_per_client):
            if time.monotonic() > deadline:
                break
            body = send_body(f"hello {i}").encode()
            t0 = time.perf_counter()
            try:
                connection.request("POST", address.path or "/", body, HEADERS)
                answer = json.loads(connection.getresponse().read())
            except (OSError, http.client.HTTPException, ValueError):
                connection.close()  # the next request connects again
                bad += 1
                continue
            mine.append(time.perf_counter() - t0)
            bad += "result" not in answer
        connection.close()
        with lock:
            latencies.extend(mine)
            errors += bad

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "mean_ms": statistics.fmean(latencies) * 1000,
    }


def _fields(pid: int) -> list[str]:
    # The command name (field 2) may hold spaces: the fields after its ")" are fixed.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def group_pids(leader: int) -> list[int]:
    """The live processes of `leader`'s process group."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_fields(int(entry.name))[2]) == leader:  # pgrp
                    pids.append(int(entry.name))
            except OSError:
                continue  # it exited meanwhile
    return pids


def cpu_seconds(leader: int) -> float:
    """User + system CPU time of the group's live processes."""
    ticks = 0
    for pid in group_pids(leader):
        fields = _fields(pid)
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / TICK


def pss_mib(leader: int) -> float:
    """The group's memory: the sum of its processes' PSS."""
    kib = 0
    for pid in group_pids(leader):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                kib += int(line.split()[1])
    return kib / 1024
