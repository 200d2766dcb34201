"""The agent the CLI tests talk to (A2A_HANDLER=tests.client.agent).

"files": two file artifacts both named `../../escape.txt`, a data artifact and a text with
terminal escape sequences; "steps=N delay=S": N progress updates S seconds apart; "wait":
works until canceled (at most 30 s); a phone order asks for input, as the sample agent does;
"fail", "reject" and "sign in" end the task failed, rejected and auth-required; "reply" answers
with a message and no task; anything else
is echoed, with a line on its file and data parts.
"""

from __future__ import annotations

import base64
import json
import time

from functions.handlers import phone_order
from shared.agent import Context, Part, Skill

SKILLS = [Skill(id="cli-test", name="CLI test", description="For the CLI tests", tags=("test",))]
_HOSTILE_TEXT = "bell\x07 and \x1b[2J clear"
_WAIT_LIMIT = 30.0  # seconds a "wait" task works before it gives up on being canceled


def handle(ctx: Context) -> None:
    text = ctx.text
    if phone_order.asked(ctx) or "phone" in text:
        phone_order.handle(ctx)
    elif text == "files":
        for content in (b"first", b"second"):
            ctx.artifact(file=content, filename="../../escape.txt", name="report")
        ctx.artifact(data={"answer": 42, "list": [1, 2]}, name="numbers")
        ctx.artifact(text=_HOSTILE_TEXT, name="hostile")
    elif text.startswith("steps="):
        values = dict(item.split("=", 1) for item in text.split())
        for step in range(int(values["steps"])):
            ctx.progress(f"step {step}")
            time.sleep(float(values.get("delay", 0.1)))
        ctx.artifact(text="all steps done", name="result")
    elif text == "reply":
        ctx.reply("a message, no task")
    elif text == "fail":
        ctx.fail("failed on purpose")
    elif text == "reject":
        ctx.reject("not something this agent does")
    elif text == "sign in":
        ctx.require_auth("sign in to the calendar first")
    elif text == "wait":
        deadline = time.monotonic() + _WAIT_LIMIT
        ctx.progress("waiting to be canceled")
        while not ctx.canceled and time.monotonic() < deadline:
            time.sleep(0.02)
    else:
        ctx.artifact(text=f"echo: {text}", name="echo")
        others = [_describe(part) for part in ctx.parts if part.text is None]
        if others:
            ctx.artifact(text="; ".join(others), name="parts")


def _describe(part: Part) -> str:
    if part.raw is not None:
        size = len(base64.b64decode(part.raw))
        return f"file {part.filename} ({part.media_type}, {size} bytes)"
    return f"data {json.dumps(part.data)}"
