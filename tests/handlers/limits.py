"""A handler for the limit tests: `artifact <n>` makes an artifact of n characters, `chunks
<n>` one artifact of n one-character chunks; anything else asks for more (input-required), so
that a task's history can grow."""

from __future__ import annotations

from shared.agent import Context


def handle(ctx: Context) -> None:
    command, _, count = ctx.text.partition(" ")
    if command == "artifact":
        ctx.artifact("x" * int(count))
    elif command == "chunks":
        artifact_id = ctx.artifact("x")
        for _ in range(int(count) - 1):
            ctx.artifact("x", artifact_id=artifact_id, append=True)
    else:
        ctx.ask("more?")
