"""A handler that declares what it takes: text and images (its skill adds PDFs)."""

from __future__ import annotations

from shared.agent import AgentInfo, Context, Skill

AGENT = AgentInfo(name="Pictures", input_modes=("text/plain", "image/*"))
SKILLS = [Skill(id="pdf", name="PDF", description="Reads PDFs", input_modes=("application/pdf",))]


def handle(ctx: Context) -> None:
    ctx.complete(", ".join(part.media_type or part.kind for part in ctx.parts))
