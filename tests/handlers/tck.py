"""The A2A TCK's scenario hooks: behaviour chosen by the prefix of `message.messageId`.

Only the conformance run loads this module (A2A_HANDLER=tests.handlers.tck); the texts are
the suite's own (scenarios/*.feature).
"""

from __future__ import annotations

import time

from shared.agent import AgentInfo, Context, Skill

AGENT = AgentInfo(name="TCK agent", description="Implements the A2A TCK scenario hooks.")
SKILLS = [Skill(id="tck", name="TCK scenarios", description="Conformance scenarios", tags=("tck",))]

# How long `tck-delayed-complete` works before it completes.
_DELAY_SECONDS = 1.0
_STREAM_TEXT = {
    "tck-stream-001": "Stream hello from TCK",
    "tck-stream-003": "Stream task lifecycle",
    "tck-stream-ordering-001": "Ordered output",
    "tck-stream-artifact-text": "Streamed text content",
}


def handle(ctx: Context) -> None:
    mid = ctx.message.message_id
    if mid.startswith("tck-complete-task"):
        ctx.complete("Hello from TCK")
    elif mid.startswith("tck-artifact-text"):
        ctx.artifact(text="Generated text content")
    elif mid.startswith("tck-artifact-file-url"):  # before its prefix tck-artifact-file
        ctx.artifact(
            url="https://example.com/output.txt", filename="output.txt", media_type="text/plain"
        )
    elif mid.startswith("tck-artifact-file"):
        ctx.artifact(file=b"tck", filename="output.txt", media_type="text/plain")
    elif mid.startswith("tck-artifact-data"):
        ctx.artifact(data={"key": "value", "count": 42})
    elif mid.startswith("tck-message-response"):
        ctx.reply("Direct message response")
    elif mid.startswith("tck-input-required"):
        ctx.ask("TCK needs more input")
    elif mid.startswith("tck-auth-required"):
        ctx.require_auth("TCK needs authorization: sign in, then send a message to this task")
    elif mid.startswith("tck-delayed-complete"):
        # The newer TCK's execution-mode probe: working for a bounded while, then done, so a
        # blocking send and a returnImmediately one answer observably different states.
        ctx.progress("working")
        time.sleep(_DELAY_SECONDS)
        ctx.complete("Delayed completion")
    elif mid.startswith("tck-reject-task"):
        ctx.reject("rejected")
    elif mid.startswith("tck-stream-artifact-chunked"):
        ctx.progress("working")
        first = ctx.artifact(text="chunk-1 ")
        ctx.artifact(text="chunk-2", artifact_id=first, append=True, last_chunk=True)
    elif mid.startswith("tck-stream-artifact-file"):
        ctx.progress("working")
        ctx.artifact(file=b"tck", filename="output.txt", media_type="text/plain")
    elif mid.startswith("tck-stream-002"):
        ctx.complete()
    elif text := next((t for p, t in _STREAM_TEXT.items() if mid.startswith(p)), None):
        ctx.progress("working")
        ctx.artifact(text=text)
    elif mid.startswith("test-resubscribe-message-id"):
        ctx.progress("working")
        time.sleep(4.5)
    else:
        ctx.complete(f"Unhandled messageId prefix: {mid}")
