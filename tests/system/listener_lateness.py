"""How late a stream on another instance gets a long-running turn's progress, on the `make dev`
stack (emulator/dev.py: a2a, worker and deliver on the Firestore and Cloud Tasks emulators).

Each run is a `SendStreamingMessage` to a2a with tests.handlers.progress: the worker runs the
turn, and a2a's stream follows the task's log through its Firestore tail (a listener, or a
read of the log in a silent listener's place). Each step's text carries the time the handler
said it; its lateness is when the stream delivered it minus that. Re-run it as

    .venv/bin/python -m tests.system.listener_lateness --runs 200

(it starts `make dev` on a free PORT and stops it), or against a stack already running with
`--url http://localhost:8080/`. tests/system/test_listener_lateness.py runs a short version.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests import sse
from tests.conftest import ROOT
from tests.handlers.progress import said_at
from tests.system.test_make_dev import Make, free_base

HANDLER = "tests.handlers.progress"
V1_HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
# What a2a says when a read of the log finds what its listener never handed over.
SILENT_LINE = "fell silent"


@dataclass
class Run:
    """One streamed run: each step's lateness (seconds), and how the stream ended."""

    task_id: str = ""
    late: list[float] = field(default_factory=list)
    state: str = ""
    error: str = ""


def stream_run(url: str, steps: int, delay: float, timeout: float) -> Run:
    """A streamed send of a run of `steps` steps `delay` apart, read to its end."""
    run = Run()
    text = f"steps={steps} delay={delay}"
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
    seen: set[float] = set()
    try:
        response = sse.stream(url, {**body, "params": {"message": message}}, V1_HEADERS, timeout)
        with response:
            for event in sse.read(response):
                result = event.data.get("result", {})
                task = result.get("task", {})
                update = result.get("statusUpdate", {})
                run.task_id = run.task_id or task.get("id") or update.get("taskId", "")
                status = update.get("status") or task.get("status") or {}
                run.state = status.get("state", run.state)
                for part in status.get("message", {}).get("parts", []):
                    at = said_at(part.get("text", ""))
                    if at is not None and at not in seen:
                        seen.add(at)
                        run.late.append(time.time() - at)
    except Exception as exc:  # a measurement reports every failure, and goes on
        run.error = f"{type(exc).__name__}: {exc}"
    if not run.error and (run.state != "TASK_STATE_COMPLETED" or len(run.late) != steps):
        run.error = f"ended {run.state or 'without a state'} with {len(run.late)}/{steps} steps"
    return run


def measure(
    url: str, runs: int, parallel: int, *, steps: int, delay: float, timeout: float
) -> list[Run]:
    """`runs` streamed runs, `parallel` at a time."""
    with ThreadPoolExecutor(parallel) as pool:
        futures = [pool.submit(stream_run, url, steps, delay, timeout) for _ in range(runs)]
        return [f.result() for f in futures]


def percentile(values: list[float], fraction: float) -> float:
    """The value at `fraction` of the sorted values (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)]


def report(results: list[Run], silent_lines: int, bound: float) -> str:
    late = [value for run in results for value in run.late]
    lines = [
        f"{len(results)} runs, {len(late)} steps; failed runs: "
        f"{sum(1 for r in results if r.error)}; runs with a step later than {bound} s: "
        f"{sum(1 for r in results if any(v > bound for v in r.late))}; "
        f"'{SILENT_LINE}' lines: {silent_lines}",
    ]
    if late:
        lines.append(
            f"lateness: p50 {percentile(late, 0.5) * 1000:.0f} ms, "
            f"p99 {percentile(late, 0.99) * 1000:.0f} ms, max {max(late) * 1000:.0f} ms"
        )
    lines += [f"  {r.task_id}: {r.error}" for r in results if r.error][:10]
    return "\n".join(lines)


@contextmanager
def dev_stack(port: int) -> Iterator[Make]:
    """`make dev PORT=port` with tests.handlers.progress, stopped by Ctrl-C on the way out
    (its process group killed if it lingers)."""
    make = Make(ROOT, "dev", f"PORT={port}", f"HANDLER={HANDLER}")
    try:
        make.wait_ready()
        assert make.lines[-1].endswith("| ready"), make.output
        yield make
    finally:
        try:
            make.interrupt()
        finally:
            if make.process.poll() is None:
                os.killpg(make.process.pid, signal.SIGKILL)
                make.process.wait()


def said(make: Make, text: str) -> int:
    """How many lines of the stack's output hold `text`."""
    return sum(1 for line in list(make.lines) if text in line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=4, help="runs streamed at once")
    parser.add_argument("--steps", type=int, default=5, help="progress steps a run")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds between steps")
    parser.add_argument("--bound", type=float, default=1.0, help="seconds a step may be late")
    parser.add_argument("--url", help="a running make dev's a2a (default: start one)")
    parser.add_argument("--port", type=int, help="PORT of the stack started (default: free)")
    args = parser.parse_args(argv)
    timeout = args.steps * args.delay + 30
    started = time.monotonic()
    silent = 0
    if args.url:
        results = measure(
            args.url, args.runs, args.parallel, steps=args.steps, delay=args.delay, timeout=timeout
        )
    else:
        port = args.port or free_base()
        with dev_stack(port) as stack:
            results = measure(
                f"http://localhost:{port}/",
                args.runs,
                args.parallel,
                steps=args.steps,
                delay=args.delay,
                timeout=timeout,
            )
            silent = said(stack, SILENT_LINE)
    print(report(results, silent, args.bound))
    print(f"({time.monotonic() - started:.0f} s)")
    late = any(v > args.bound for r in results for v in r.late)
    return 1 if late or any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
