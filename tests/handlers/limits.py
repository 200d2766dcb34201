"""A handler for the limit tests: `artifact <n>` makes an artifact of n characters, `chunks
<n> [<size>]` one artifact of n text chunks of `size` characters (default 1), `datachunks <n>`
one of n data chunks, `held <n> <key>` n one-character chunks, then waits until a test sets
`flag(key, "go")` (having set `flag(key, "made")`) and ends with a last chunk "!",
`unservable <how>` output no answer could carry (`progress`, `reply`: a lone surrogate;
`deep`: data nested 3000 deep, `deeper`: 65 deep; `nan`, `infinity`: such a number in data;
`set`: a set in data; `type`: a number as a part's text; `append`: "yes" for append);
anything else asks for more (input-required), so that a task's history can grow."""

from __future__ import annotations

from typing import Any

from shared.agent import Context, Part
from tests.flags import flag


def handle(ctx: Context) -> None:
    command, _, count = ctx.text.partition(" ")
    if command == "artifact":
        ctx.artifact("x" * int(count))
    elif command == "chunks":
        chunks, _, size = count.partition(" ")
        text = "x" * int(size or 1)
        artifact_id = ctx.artifact(text)
        for _ in range(int(chunks) - 1):
            ctx.artifact(text, artifact_id=artifact_id, append=True)
    elif command == "held":
        chunks, _, key = count.partition(" ")
        artifact_id = ctx.artifact("x")
        for _ in range(int(chunks) - 1):
            ctx.artifact("x", artifact_id=artifact_id, append=True)
        flag(key, "made").set()
        flag(key, "go").wait(60)  # a failed test that never sets it leaves no handler behind
        ctx.artifact("!", artifact_id=artifact_id, append=True, last_chunk=True)
    elif command == "datachunks":
        artifact_id = ctx.artifact(data=0)
        for index in range(1, int(count)):
            ctx.artifact(data=index, artifact_id=artifact_id, append=True)
    elif command == "unservable":
        unservable(ctx, count)
    else:
        ctx.ask("more?")


def unservable(ctx: Context, how: str) -> None:
    wrong: Any = {"type": 5, "append": "yes"}.get(how)  # what the signatures do not allow
    if how == "progress":
        ctx.progress("half a pair: \ud800")
    elif how == "reply":
        ctx.reply("half a pair: \udfff")
    elif how in ("nan", "infinity"):
        ctx.artifact(data={"x": [float(how)]})
    elif how == "set":
        ctx.progress(parts=[Part(data={"s": {1, 2}})])
    elif how == "type":
        ctx.reply(parts=[Part(text=wrong)])
    elif how == "append":
        ctx.artifact("x", append=wrong)
    else:
        deep: list[object] = []
        for _ in range(3000 if how == "deep" else 65):
            deep = [deep]
        ctx.artifact(data=deep)
