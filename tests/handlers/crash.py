"""A handler that raises, to prove the client gets a failed task and no traceback."""

from __future__ import annotations

from shared.agent import Context


def handle(ctx: Context) -> None:
    ctx.progress("about to divide")
    print(1 / 0)
