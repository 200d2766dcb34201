"""A handler with a skill for everyone and one for signed-in callers only (the extended card)."""

from __future__ import annotations

from shared.agent import Context, Skill

SKILLS = [Skill(id="hello", name="Hello", description="Greets anyone", tags=("greeting",))]
EXTENDED_SKILLS = [
    Skill(id="vault", name="Vault", description="Opens the members' vault", tags=("members",))
]


def handle(ctx: Context) -> None:
    ctx.complete("hello")
