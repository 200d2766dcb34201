"""A long-running handler that reports its progress step by step, as a newcomer's agent on
`make dev` did: "steps=N delay=S" in the message (defaults 5 and 0.5) makes it say
"step n at <time.time()>" N times, S seconds apart, then end with an artifact. The time in
the text lets a client on the same machine measure how late each step reached it
(`tests.system.listener_lateness`).
"""

from __future__ import annotations

import re
import time

from shared.agent import Context, Skill

LONG_RUNNING = True
SKILLS = [Skill(id="progress", name="Progress", description="Reports each step", tags=("test",))]
_SAID = re.compile(r"step \d+ at (\d+\.\d+)")


def handle(ctx: Context) -> None:
    values = dict(item.split("=", 1) for item in ctx.text.split() if "=" in item)
    steps, delay = int(values.get("steps", 5)), float(values.get("delay", 0.5))
    for step in range(1, steps + 1):
        ctx.progress(f"step {step} at {time.time():.6f}")
        time.sleep(delay)
    ctx.artifact(text="done")


def said_at(text: str) -> float | None:
    """When the handler said this progress text (time.time()), if it is one of its own."""
    said = _SAID.fullmatch(text)
    return None if said is None else float(said.group(1))
