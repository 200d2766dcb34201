"""Handlers that wait, as an LLM agent's turn waits on a model: the engine's tests.

`handle` (async) counts itself in, then awaits until the test lets it go (`go`), or is
cancelled (recorded in `cancelled`). `blocking` (sync) holds its thread until let go;
`watches` (sync) too, looking at `ctx.canceled` meanwhile, as a sync handler's loop does
(a cancel recorded in `cancelled`), and notes the thread it ran on (`threads`).
`holds_the_loop` sleeps without awaiting: a mistake the log names; `computes` (sync) keeps
the CPU for a while, as a long computation does, which the log tells apart.
`waits_unless_quick` answers a message "quick" at once, and waits as `handle` does otherwise.
The test sets `expected` (how many turns make `everyone`) and resets the state between tests.
"""

from __future__ import annotations

import asyncio
import threading
import time

from shared.agent import Context

lock = threading.Lock()
arrived = 0
expected = 1
everyone = threading.Event()  # `expected` turns are waiting at once
go = threading.Event()
cancelled: dict[str, float] = {}  # task id -> time.monotonic() of the CancelledError
any_cancelled = threading.Event()  # set with the first of them
threads: dict[str, str] = {}  # task id -> the name of the thread `watches` ran on


def reset(count: int) -> None:
    global arrived, expected
    with lock:
        arrived, expected = 0, count
    everyone.clear()
    go.clear()
    cancelled.clear()
    any_cancelled.clear()
    threads.clear()


def _arrive() -> None:
    global arrived  # noqa: PLW0603
    with lock:
        arrived += 1
        if arrived >= expected:
            everyone.set()


async def handle(ctx: Context) -> None:
    _arrive()
    try:
        while not go.is_set():
            await asyncio.sleep(0.005)  # the model's answer, not yet come
    except asyncio.CancelledError:
        cancelled[ctx.task_id] = time.monotonic()
        any_cancelled.set()
        raise
    ctx.artifact(text="answered")


def blocking(ctx: Context) -> None:
    _arrive()
    go.wait(30)
    ctx.artifact(text="answered")


def watches(ctx: Context) -> None:
    threads[ctx.task_id] = threading.current_thread().name
    _arrive()
    while not go.wait(0.005):  # a step of the handler's work
        if ctx.canceled:
            cancelled[ctx.task_id] = time.monotonic()
            any_cancelled.set()
            return
    ctx.artifact(text="answered")


async def holds_the_loop(ctx: Context) -> None:
    time.sleep(0.6)  # a sync call in an async handler: every turn waits meanwhile
    ctx.artifact(text="answered")


def computes(ctx: Context) -> None:
    """Pure Python for 0.6 s: the thread keeps the interpreter until it is made to let go."""
    until = time.monotonic() + 0.6
    while time.monotonic() < until:
        pass
    ctx.artifact(text="answered")


async def waits_unless_quick(ctx: Context) -> None:
    if ctx.text != "quick":
        await handle(ctx)
    else:
        ctx.artifact(text="answered")
