"""An LLM's answer written token by token, for `make bench BENCH_ARGS="--only costs"`: an
`async` handler that appends text chunks to one artifact, as a model's stream yields them.

The message text sets the answer: "chunks=N delay=S" (defaults 500 and 0.02: 500 chunks over
10 s), each chunk `append`ed to the artifact of the first, the last marked `last_chunk`.
"""

from __future__ import annotations

import asyncio

from shared.agent import Context, Skill

SKILLS = [Skill(id="answer", name="Answer", description="Streams its answer", tags=("test",))]


def _options(text: str) -> tuple[int, float]:
    values = dict(item.split("=", 1) for item in text.split() if "=" in item)
    return int(values.get("chunks", 500)), float(values.get("delay", 0.02))


async def handle(ctx: Context) -> None:
    chunks, delay = _options(ctx.text)
    artifact_id = ctx.artifact(text="token0 ", name="answer", last_chunk=chunks == 1)
    for index in range(1, chunks):
        await asyncio.sleep(delay)
        last = index == chunks - 1
        ctx.artifact(text=f"token{index} ", artifact_id=artifact_id, append=True, last_chunk=last)
