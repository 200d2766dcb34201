"""The chaos soak's agent (tests/soak): each turn works a few steps, reporting progress, then
stores its artifacts and ends. The message text sets the turn: "steps=N delay=S arts=K"
(defaults 2, 0.05 and 1), and "ask" makes the task's first turn ask a question instead
(input-required) and its next one do the work. Each artifact is named after its turn and
place (`turn T art K`), so the soak's ledger can tell one stored twice from two stored once.
"""

from __future__ import annotations

import time

from shared.agent import Context


def _options(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split() if "=" in item)


def handle(ctx: Context) -> None:
    options = _options(ctx.text)
    turn = sum(1 for message in ctx.history if message.role == "user")
    if "ask" in ctx.text.split() and turn == 1:
        ctx.ask("which one?")
        return
    delay = float(options.get("delay", 0.05))
    for step in range(int(options.get("steps", 2))):
        if ctx.canceled:
            return
        ctx.progress(f"step {step}")
        time.sleep(delay)
    for place in range(int(options.get("arts", 1))):
        ctx.artifact(text=f"turn {turn} art {place}", name=f"turn {turn} art {place}")
    ctx.complete(f"done turn {turn}")
