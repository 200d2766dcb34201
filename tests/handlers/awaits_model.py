"""An LLM agent's shape for `make bench BENCH_ARGS="--only agents"`: an `async` handler whose
turn awaits a model call ($TEST_HANDLER_WAIT_SECONDS, default 2; an `asyncio.sleep` stands
for it), then answers with one artifact.

The wait is read once, at import, from the environment: one module serves every run of the
bench, each a server process of its own. tests/bench/reference.py's `WaitingExecutor` gives
the official SDK's server the same turn. When $TEST_HANDLER_LOG names a file, each turn
appends "<time> start|canceled|waited <task id>" to it (tests.handlers.long's `record`): when
it began to await, and when the await ended, canceled or run out, so the bench in another
process sees how soon a cancel reached the await.
"""

from __future__ import annotations

import asyncio
import os

from shared.agent import Context, Skill
from tests.handlers.long import record

_WAIT_SECONDS = float(os.environ.get("TEST_HANDLER_WAIT_SECONDS", "2"))
SKILLS = [Skill(id="model", name="Model", description="Awaits a model", tags=("test",))]


async def handle(ctx: Context) -> None:
    record("start", ctx.task_id)
    try:
        await asyncio.sleep(_WAIT_SECONDS)
    except asyncio.CancelledError:
        record("canceled", ctx.task_id)
        raise
    record("waited", ctx.task_id)
    ctx.artifact(text=f"answered: {ctx.text}")
