"""The sample agent that `make run` serves: the other samples behind one front door.

It routes each message to the sample that fits it, which is also how a real agent can
compose handler modules: a JSON schema goes to `structured`, a phone order to
`phone_order`, attached files get a short report, a joke request gets a joke, and anything
else is echoed.
"""

from __future__ import annotations

import base64
import binascii

from functions.handlers import echo, phone_order, structured
from shared.agent import AgentInfo, Context, Skill

AGENT = AgentInfo(
    name="a2a-functions sample agent",
    description="Echoes, tells a joke, orders a phone (multi-turn), reads attached files, "
    "and answers in JSON when given a schema.",
    input_modes=("text/plain", "application/json", "application/octet-stream"),
    output_modes=("text/plain", "application/json"),
)

SKILLS = [
    *structured.SKILLS,
    *phone_order.SKILLS,
    Skill(
        id="joke",
        name="Joke",
        description="Tells a joke.",
        tags=("fun",),
        examples=("tell me a joke",),
    ),
    Skill(
        id="file-report",
        name="File report",
        description="Reports on attached files: names, types and sizes.",
        tags=("files",),
        examples=("Analyze the attached report and generate high level overview",),
        input_modes=("*/*",),  # any file: it reports names, types and sizes
    ),
    *echo.SKILLS,
]

_JOKE = "Why did the chicken cross the road? To get to the other side!"


def _file_report(ctx: Context) -> None:
    lines = []
    for part in ctx.parts:
        if part.raw is not None:
            try:
                size = len(base64.b64decode(part.raw))
            except (binascii.Error, ValueError):
                size = len(part.raw)
            lines.append(
                f"{part.filename or 'file'} ({part.media_type or 'unknown type'}), {size} bytes"
            )
        elif part.url is not None:
            lines.append(
                f"{part.filename or part.url} ({part.media_type or 'unknown type'}), by URL"
            )
    ctx.progress("analysis in progress, please wait")
    ctx.artifact(text="Received " + "; ".join(lines), name="analysis")


def _in_phone_order(ctx: Context) -> bool:
    return phone_order.asked(ctx) or "phone" in ctx.text.lower()


def handle(ctx: Context) -> None:
    if structured.requested_schema(ctx) is not None:
        structured.handle(ctx)
    elif _in_phone_order(ctx):
        phone_order.handle(ctx)
    elif any(p.raw is not None or p.url is not None for p in ctx.parts):
        _file_report(ctx)
    elif "joke" in ctx.text.lower():
        ctx.artifact(text=_JOKE, name="joke")
    else:
        echo.handle(ctx)
