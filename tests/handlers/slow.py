"""A handler that works for a while, reporting progress, until done or canceled.

The message text sets the work: "steps=N delay=S" (defaults 20 and 0.05). It records what
it saw in `seen` so tests can check that it noticed a cancel.
"""

from __future__ import annotations

import time

from shared.agent import Context, Skill, TaskCanceled

SKILLS = [Skill(id="slow", name="Slow", description="Takes its time", tags=("test",))]
seen: dict[str, str] = {}


def _options(text: str) -> tuple[int, float]:
    values = dict(item.split("=", 1) for item in text.split() if "=" in item)
    return int(values.get("steps", 20)), float(values.get("delay", 0.05))


def handle(ctx: Context) -> None:
    steps, delay = _options(ctx.text)
    if "silent" in ctx.text:
        time.sleep(steps * delay)
    try:
        for step in range(steps):
            if ctx.canceled:
                seen[ctx.task_id] = "canceled"
                return
            ctx.progress(f"step {step}")
            time.sleep(delay)
        ctx.artifact(text="done")
    except TaskCanceled:
        seen[ctx.task_id] = "canceled"
        raise
