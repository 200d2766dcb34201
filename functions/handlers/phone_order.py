"""The multi-turn phone order from the seeds: ask which phone, then confirm the order.

Shows the `input-required` round trip: the first turn asks, the task waits, and the next
message to the same task id resumes it with the whole history.
"""

from __future__ import annotations

import hashlib

from shared.agent import AgentInfo, Context, Skill

AGENT = AgentInfo(name="Phone order agent", description="Orders a new phone for you.")

SKILLS = [
    Skill(
        id="phone-order",
        name="Phone order",
        description="Orders a new phone; asks which type (iPhone or Android) first.",
        tags=("it", "order", "multi-turn"),
        examples=("request a new phone for me",),
    )
]

_QUESTION = "Select a phone type (iPhone/Android)"
_PHONE_TYPES = {"iphone": "iPhone", "android": "Android"}


def chosen_phone(text: str) -> str | None:
    lowered = text.lower()
    return next((name for key, name in _PHONE_TYPES.items() if key in lowered), None)


def asked(ctx: Context) -> bool:
    """Whether the agent already asked this task for a phone type."""
    return any(p.text == _QUESTION for m in ctx.history for p in m.parts if p.text is not None)


def handle(ctx: Context) -> None:
    phone = chosen_phone(ctx.text)
    if phone is None:
        ctx.ask(_QUESTION)
        return
    # A stable request number per task, so a retried turn confirms the same order.
    number = int(hashlib.sha256(ctx.task_id.encode()).hexdigest(), 16) % 90000 + 10000
    ctx.artifact(
        text=f"I have ordered a new {phone} device for you. Your request number is R{number}",
        name="order-confirmation",
    )
