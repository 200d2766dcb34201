"""The console's browser tests' agent: the sample agent, and slow work on "slow ..." (to cancel).

"slow steps=N delay=S" runs `tests.handlers.slow`; anything else goes to the sample agent
(echo, the multi-turn phone order, files, JSON). Its card's skills are the sample's (with
their examples), the slow one, and one whose example is markup (shown as text, never obeyed).
"""

from __future__ import annotations

from functions.handlers import sample
from shared.agent import Context, Skill
from tests.handlers import slow

AGENT = sample.AGENT
_HOSTILE_EXAMPLE = '<img src=x onerror="window.__xss=5">'
SKILLS = [
    *sample.SKILLS,
    *slow.SKILLS,
    Skill(
        id="markup",
        name="Markup",
        description="An example that is markup",
        examples=(_HOSTILE_EXAMPLE,),
    ),
]


def handle(ctx: Context) -> None:
    if ctx.text.startswith("slow"):
        slow.handle(ctx)
    else:
        sample.handle(ctx)
