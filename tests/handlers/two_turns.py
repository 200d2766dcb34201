"""Asks once, then takes a moment on the answer: two answers can race for the task."""

from __future__ import annotations

import time

from shared.agent import Context


def handle(ctx: Context) -> None:
    if len(ctx.history) == 1:
        ctx.ask("go on")
        return
    time.sleep(0.3)
    ctx.complete(f"got {ctx.text}")
