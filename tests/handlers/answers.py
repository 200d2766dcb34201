"""Asks once, then completes at once with the answer it got, naming it (its message id): two
answers to its question race for the task, and the task says which turns ran."""

from __future__ import annotations

from shared.agent import Context


def handle(ctx: Context) -> None:
    if len(ctx.history) == 1:
        ctx.ask("which one?")
        return
    ctx.complete(f"got {ctx.message.message_id}")
