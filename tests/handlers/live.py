"""A long-running handler that reports progress, then works until a test lets it go on.

It says "phase 1 at <time.time()>" (`ctx.progress`), then waits, as a handler calling a slow
tool would, on a FIFO named after its task in the directory $TEST_HANDLER_GATES, until a test
in any process writes to it (`release`, once it saw the progress); then it makes an artifact
and ends. "phases=N" in the message: it says "phase n at ..." N times, waiting for a release
after each; "wait": it waits for one before the first too (a client then follows the task
before it speaks). The time in the text lets a client on the
same machine measure how late the progress reached it.
"""

from __future__ import annotations

import os
import re
import select
import time
from pathlib import Path

from shared.agent import Context, Skill

LONG_RUNNING = True
SKILLS = [Skill(id="live", name="Live", description="Reports, then waits", tags=("test",))]
_SAID = re.compile(r"phase \d+ at (\d+\.\d+)")
_WAIT_SECONDS = 60.0  # a test that never lets it go on (it failed) leaves no handler behind


def gate(task_id: str, gates: Path | None = None) -> Path:
    """The FIFO of the task's handler, in `gates` (default: $TEST_HANDLER_GATES)."""
    return (gates or Path(os.environ["TEST_HANDLER_GATES"])) / task_id


def handle(ctx: Context) -> None:
    path = gate(ctx.task_id)
    making = path.with_suffix(".new")
    os.mkfifo(making)
    # Read and write: the open never blocks; named once open, `release` always finds a reader.
    fd = os.open(making, os.O_RDWR)
    making.rename(path)
    try:
        if "wait" in ctx.text:
            _wait(fd)
        values = dict(item.split("=", 1) for item in ctx.text.split() if "=" in item)
        for phase in range(1, int(values.get("phases", 1)) + 1):
            ctx.progress(f"phase {phase} at {time.time():.6f}")
            _wait(fd)
    finally:
        os.close(fd)
        path.unlink()
    ctx.artifact(text="done")


def _wait(fd: int) -> None:
    """Until one `release` (a byte) came."""
    if select.select([fd], [], [], _WAIT_SECONDS)[0]:
        os.read(fd, 1)


def said_at(text: str) -> float | None:
    """When the handler made this progress text (time.time()), if it is one of its own."""
    said = _SAID.fullmatch(text)
    return None if said is None else float(said.group(1))


def release(task_id: str, gates: Path | None = None) -> None:
    """Let the handler of `task_id` go on (it started: its FIFO exists)."""
    fd = os.open(gate(task_id, gates), os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, b"g")
    finally:
        os.close(fd)
