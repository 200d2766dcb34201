"""A long-running handler for the worker tests: artifacts one by one, with pauses.

The message text sets the work: "artifacts=N delay=S" (defaults 3 and 0.1), "fail" raises
after the first artifact, "crash" dies (a BaseException, as a killed process would) after
the second artifact of the task's first run. When $TEST_HANDLER_LOG names a file, each run
appends "<time> start|canceled|end <task id>" to it, so tests in another process see what the
handler saw and when.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from shared.agent import Context, Skill, TaskCanceled

LONG_RUNNING = True
SKILLS = [Skill(id="long", name="Long", description="Takes its time", tags=("test",))]


class Crash(BaseException):
    """Stands for a process killed mid-run: nothing in the runtime handles it."""


def record(what: str, task_id: str) -> None:
    path = os.environ.get("TEST_HANDLER_LOG")
    if path:
        with Path(path).open("a") as log:
            log.write(f"{time.time():.6f} {what} {task_id}\n")


def runs(task_id: str) -> int:
    """How many runs of this task started so far (this one included)."""
    path = os.environ.get("TEST_HANDLER_LOG")
    if not path or not Path(path).exists():
        return 1
    return sum(
        line.split()[1:] == ["start", task_id] for line in Path(path).read_text().splitlines()
    )


def handle(ctx: Context) -> None:
    record("start", ctx.task_id)
    values = dict(item.split("=", 1) for item in ctx.text.split() if "=" in item)
    count, delay = int(values.get("artifacts", 3)), float(values.get("delay", 0.1))
    try:
        for n in range(count):
            if ctx.canceled:
                record("canceled", ctx.task_id)
                return
            ctx.artifact(text=f"part {n}", name=f"part-{n}")
            if "fail" in ctx.text:
                raise RuntimeError("the handler broke")
            if "crash" in ctx.text and n == 1 and runs(ctx.task_id) == 1:
                raise Crash
            time.sleep(delay)
    except TaskCanceled:
        record("canceled", ctx.task_id)
        raise
    record("end", ctx.task_id)
