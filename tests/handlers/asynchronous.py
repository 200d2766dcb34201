"""An `async def` handler, to prove coroutines run like plain functions."""

from __future__ import annotations

import asyncio

from shared.agent import Context


async def handle(ctx: Context) -> None:
    await asyncio.sleep(0.01)
    ctx.artifact(text=f"async: {ctx.text}")
