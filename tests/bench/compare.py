"""`make bench`'s side-by-side section: our `a2a` (embedded backend, echo agent) against the
official SDK's server (`tests/bench/reference.py`) on the same load, in alternating rounds.

Every figure is measured in each round for both, and printed as ours, the SDK's (medians) and
the ratio ours / SDK's: its median and its min-max over the rounds, beside the issue's target.
A round: a fresh process of each (and of a bare functions-framework function, the floor)
timed from spawn to its first completed task (ours served from its staged folder, with the
bytecode `make deploy` uploads); then the same blocking-send load against one
long-lived server of each, which keeps its tasks from round to round (memory under load).
CPU and memory are the server's whole process group's (tests/bench/load.py).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from infra.stage import stage
from tests.bench import usage
from tests.bench.load import HEADERS, cpu_seconds, load, pss_mib, send_body
from tests.conftest import FUNCTIONS_FRAMEWORK, ROOT, free_port


def _as_deployed() -> dict[str, str]:
    """What `make deploy` gives the `a2a` function's server and Cloud Functions its logs: the
    threads of deploy.toml (`infra.plan.function_env`'s THREADS), and JSON lines (auto under
    K_SERVICE)."""
    return {"THREADS": str(usage.functions()["a2a"].threads), "A2A_LOG_FORMAT": "json"}


OURS_ENV = {"A2A_HANDLER": "functions.handlers.echo", "A2A_BACKEND": "memory", **_as_deployed()}


@dataclass
class Process:
    """A server process started as the leader of its own process group."""

    process: subprocess.Popen[bytes]
    url: str

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@functools.cache
def staged() -> Path:
    """The `a2a` function as `make deploy` uploads it (infra.stage: its modules compiled), so
    a fresh process of ours compiles nothing, as a new instance does not (a source checkout
    compiles every module at each start where bytecode is not written: PYTHONDONTWRITEBYTECODE,
    a read-only tree)."""
    folder = Path(tempfile.mkdtemp(prefix="bench-stage-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return stage(ROOT, "a2a", folder / "a2a", OURS_ENV["A2A_HANDLER"]).path


def spawn(kind: str, extra: dict[str, str] | None = None, argv: tuple[str, ...] = ()) -> Process:
    """Start `ours` (the staged function; its environment: the echo agent, embedded, and
    `extra`), `sdk` (tests/bench/reference.py, with `argv`) or `floor` (the bare
    functions-framework function); returns at once."""
    port = free_port()
    cwd = ROOT
    if kind == "sdk":
        command = [sys.executable, "-m", "tests.bench.reference", f"--port={port}", *argv]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
    elif kind == "floor":
        command = [str(FUNCTIONS_FRAMEWORK), "--target=hello", "--source=tests/bench/hello/main.py"]
        command.append(f"--port={port}")
        # Its environment as ours: the same THREADS (unused by an async function).
        env = {**os.environ, "PYTHONPATH": str(ROOT), "THREADS": OURS_ENV["THREADS"]}
    else:
        cwd = staged()
        command = [str(FUNCTIONS_FRAMEWORK), "--target=a2a", f"--source={cwd / 'main.py'}"]
        command.append(f"--port={port}")
        # Only the stage's own `functions` and `shared`, as in the cloud.
        env = {**os.environ, "PYTHONPATH": str(cwd), **OURS_ENV, **(extra or {})}
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed with the process's descriptors
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    return Process(process, f"http://localhost:{port}/")


def first_answer(server: Process, kind: str, timeout: float = 30) -> None:
    """Try until the server answers: a completed task (a GET for the floor)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if kind == "floor":
                requests.get(server.url, timeout=10).raise_for_status()
                return
            answer = requests.post(
                server.url, data=send_body("first"), headers=HEADERS, timeout=timeout
            ).json()
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer
            return
        except requests.ConnectionError:
            if server.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{kind} did not start") from None
            # Not listening yet: look again soon (another process, no event to wait on).
            time.sleep(0.002)


def cold_start(kind: str) -> float:
    """Seconds from spawn to the first completed task (the floor: its first answer)."""
    started = time.perf_counter()
    server = spawn(kind)
    try:
        first_answer(server, kind)
        return time.perf_counter() - started
    finally:
        server.stop()


@contextmanager
def running(kind: str, extra: dict[str, str] | None = None) -> Iterator[Process]:
    """A server that has answered (waits for it as long as it takes to start, not a second
    per try: a loaded machine makes a slow first answer, not a missing server)."""
    server = spawn(kind, extra)
    try:
        first_answer(server, kind)
        yield server
    finally:
        server.stop()


@dataclass
class Figures:
    rps: float
    cpu_ms: float  # per request
    p50_ms: float
    p99_ms: float
    memory_mib: float  # after the round


def round_of_load(server: Process, clients: int, per_client: int) -> Figures:
    leader = server.process.pid
    cpu = cpu_seconds(leader)
    figures = load(server, clients, per_client, 120)
    if figures["errors"]:
        raise RuntimeError(f"{figures['errors']:.0f} requests failed at {server.url}")
    used = cpu_seconds(leader) - cpu
    return Figures(
        rps=figures["rps"],
        cpu_ms=used / figures["requests"] * 1000,
        p50_ms=figures["p50_ms"],
        p99_ms=figures["p99_ms"],
        memory_mib=pss_mib(leader),
    )


# figure -> (label, unit, the target ratio, whether higher is better)
TARGETS = {
    "rps": ("throughput", "req/s", 3.0, True),
    "cpu_ms": ("CPU per request", "ms", 0.33, False),
    "p50_ms": ("p50 latency", "ms", 0.4, False),
    "p99_ms": ("p99 latency", "ms", 0.5, False),
    "start_mib": ("memory at start", "MiB", 1.0, False),
    "memory_mib": ("memory after each round", "MiB", 1.0, False),
    "cold_s": ("cold start", "ms", 0.6, False),
}


def row(name: str, ours: list[float], sdk: list[float]) -> str:
    label, unit, target, higher = TARGETS[name]
    scale = 1000 if name == "cold_s" else 1
    ratios = [o / s for o, s in zip(ours, sdk, strict=True)]
    ratio = statistics.median(ratios)
    met = ratio >= target if higher else ratio <= target
    return (
        f"  {label:<24} {statistics.median(ours) * scale:>9.1f}"
        f" {statistics.median(sdk) * scale:>9.1f}"
        f" {unit:<5} {ratio:>6.2f}x  ({min(ratios):.2f}-{max(ratios):.2f})"
        f"  {'>=' if higher else '<='} {target:g}x {'met' if met else 'NOT MET'}"
    )


def floor_line(per_round: dict[str, list[Figures]]) -> str:
    """The same load on the bare function: what functions-framework itself costs, the least
    any function served by it can reach, as ratios to the SDK's like ours."""

    def ratio(name: str) -> str:
        floor = [getattr(f, name) for f in per_round["floor"]]
        sdk = [getattr(f, name) for f in per_round["sdk"]]
        ratio = statistics.median(f / s for f, s in zip(floor, sdk, strict=True))
        return f"{statistics.median(floor):.1f} ({ratio:.2f}x)"

    return (
        "  the floor under the same load (a bare functions-framework function): throughput "
        f"{ratio('rps')} req/s, CPU per request {ratio('cpu_ms')} ms, p50 {ratio('p50_ms')} "
        f"ms, p99 {ratio('p99_ms')} ms"
    )


def compare(rounds: int, clients: int, per_client: int) -> None:
    print(
        f"\nside by side with the official SDK (a2a-sdk 1.3, uvicorn, in-memory store), "
        f"echo agent, embedded backend: {rounds} paired rounds, blocking SendMessage from "
        f"{clients} clients x {per_client} per round",
        flush=True,
    )
    cold: dict[str, list[float]] = {"ours": [], "sdk": [], "floor": []}
    per_round: dict[str, list[Figures]] = {"ours": [], "sdk": [], "floor": []}
    start: dict[str, list[float]] = {"ours": [], "sdk": []}
    with running("ours") as ours, running("sdk") as sdk, running("floor") as floor:
        servers = {"ours": ours, "sdk": sdk, "floor": floor}
        for kind, server in servers.items():
            load(server, 2, 20, 10)  # warm-up: every code path ran once
            start[kind] = [pss_mib(server.process.pid)] * rounds
        for index in range(rounds):
            # Alternate who goes first, so neither always meets the machine in the same state.
            order = ("ours", "sdk") if index % 2 == 0 else ("sdk", "ours")
            for kind in (*order, "floor"):
                cold[kind].append(cold_start(kind))
            for kind in (*order, "floor"):
                per_round[kind].append(round_of_load(servers[kind], clients, per_client))
            print(
                f"  round {index + 1}/{rounds}: "
                + ", ".join(
                    f"{kind} {per_round[kind][-1].rps:.0f} req/s, cold start "
                    f"{cold[kind][-1] * 1000:.0f} ms"
                    for kind in ("ours", "sdk")
                ),
                flush=True,
            )
    print(f"\n  {'figure':<24} {'ours':>9} {'SDK':>9} {'':5} {'ratio':>7}  (min-max)  target")
    for name in ("rps", "cpu_ms", "p50_ms", "p99_ms", "memory_mib"):
        ours_values = [getattr(f, name) for f in per_round["ours"]]
        sdk_values = [getattr(f, name) for f in per_round["sdk"]]
        if name == "memory_mib":
            print(row("start_mib", start["ours"], start["sdk"]))
        print(row(name, ours_values, sdk_values))
    print(row("cold_s", cold["ours"], cold["sdk"]))
    excess = [(o - f) * 1000 for o, f in zip(cold["ours"], cold["floor"], strict=True)]
    print(
        f"  cold start of a bare functions-framework function (the floor): "
        f"{statistics.median(cold['floor']) * 1000:.0f} ms; ours exceeds it by "
        f"{statistics.median(excess):.0f} ms ({min(excess):.0f}-{max(excess):.0f}), "
        f"target <= 80 ms {'met' if statistics.median(excess) <= 80 else 'NOT MET'}"
    )
    print(floor_line(per_round))
    growth = [f.memory_mib for f in per_round["ours"]]
    print(
        f"  our memory after each round (MiB): {', '.join(f'{m:.0f}' for m in growth)}; "
        f"the SDK's: {', '.join(f'{f.memory_mib:.0f}' for f in per_round['sdk'])}"
    )
