"""A handler for the limit tests: `artifact <n>` makes an artifact of n characters, `chunks
<n>` one artifact of n one-character chunks, `unservable <how>` output no answer could carry
(`progress`, `reply`: a lone surrogate; `deep`: data nested 3000 deep); anything else asks
for more (input-required), so that a task's history can grow."""

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
    elif command == "unservable":
        deep: list[object] = []
        for _ in range(3000):
            deep = [deep]
        if count == "progress":
            ctx.progress("half a pair: \ud800")
        elif count == "reply":
            ctx.reply("half a pair: \udfff")
        else:
            ctx.artifact(data=deep)
    else:
        ctx.ask("more?")
