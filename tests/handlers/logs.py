"""A handler that logs through plain `logging`, for the observability tests: "fail" raises
(the task fails with a reference), "fail later" first works a while, reporting progress;
anything else completes with an echo."""

from __future__ import annotations

import logging
import time

from shared.agent import Context

log = logging.getLogger("tests.handlers.logs")
later_seconds = 0.3  # how long "fail later" works before it fails


def handle(ctx: Context) -> None:
    log.info("handling task %s", ctx.task_id)
    if ctx.text == "fail later":
        ctx.progress("working on it")
        time.sleep(later_seconds)
    if ctx.text.startswith("fail"):
        raise RuntimeError("the handler broke")
    ctx.artifact(text=ctx.text or "", name="echo")
