"""The console's browser tests' agent: the sample agent, and slow work on "slow ..." (to cancel).

"slow steps=N delay=S" runs `tests.handlers.slow`; anything else goes to the sample agent
(echo, the multi-turn phone order, files, JSON).
"""

from __future__ import annotations

from functions.handlers import sample
from shared.agent import Context
from tests.handlers import slow

AGENT = sample.AGENT
SKILLS = [*sample.SKILLS, *slow.SKILLS]


def handle(ctx: Context) -> None:
    if ctx.text.startswith("slow"):
        slow.handle(ctx)
    else:
        sample.handle(ctx)
