"""A handler that logs through plain `logging`, for the observability tests: "fail" raises
(the task fails with a reference), anything else completes with an echo."""

from __future__ import annotations

import logging

from shared.agent import Context

log = logging.getLogger("tests.handlers.logs")


def handle(ctx: Context) -> None:
    log.info("handling task %s", ctx.task_id)
    if ctx.text == "fail":
        raise RuntimeError("the handler broke")
    ctx.artifact(text=ctx.text or "", name="echo")
