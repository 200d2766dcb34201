"""The smallest agent: it answers every message with an artifact holding what it got."""

from __future__ import annotations

import json

from shared.agent import AgentInfo, Context, Skill

AGENT = AgentInfo(name="Echo agent", description="Answers with what it was sent.")

SKILLS = [
    Skill(
        id="echo",
        name="Echo",
        description="Repeats the message's text (or data) back as an artifact.",
        tags=("echo", "test"),
        examples=("hello",),
    )
]


def handle(ctx: Context) -> None:
    if ctx.text:
        ctx.artifact(text=ctx.text, name="echo")
    else:
        ctx.artifact(data=ctx.data, name="echo", media_type="application/json")
        ctx.complete(json.dumps(ctx.data)[:200])
