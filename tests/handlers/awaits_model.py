"""An LLM agent's shape for `make bench BENCH_ARGS="--only agents"`: an `async` handler whose
turn awaits a model call ($TEST_HANDLER_WAIT_SECONDS, default 2; an `asyncio.sleep` stands
for it), then answers with one artifact.

The wait is read once, at import, from the environment: one module serves every run of the
bench, each a server process of its own. tests/bench/reference.py's `WaitingExecutor` gives
the official SDK's server the same turn.
"""

from __future__ import annotations

import asyncio
import os

from shared.agent import Context, Skill

_WAIT_SECONDS = float(os.environ.get("TEST_HANDLER_WAIT_SECONDS", "2"))
SKILLS = [Skill(id="model", name="Model", description="Awaits a model", tags=("test",))]


async def handle(ctx: Context) -> None:
    await asyncio.sleep(_WAIT_SECONDS)
    ctx.artifact(text=f"answered: {ctx.text}")
