"""Server-sent events on the wire: a stream's frames as events, and the streaming response.

Frames are `id: <seq>` and one line of JSON `data:`; an `event:` name only where a form needs
one (the seeds' `task_update`, an `error` frame). Keep-alive ticks are comments; a stream's
pauses go to the front as they are (it waits them out without a thread). A failure
after the first frame can only end the stream, with an `error` event. Closing an event
iterator or the response (the client went away, even before the first byte) closes its
stream and frees its slot. Proxies must not buffer
the stream.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from typing import Any

from shared import streaming
from shared.bindings.json_http import encode
from shared.bindings.wire import Answer
from shared.dialects.base import Dialect
from shared.dialects.v1_0 import part as v1_part
from shared.errors import A2AError, InternalError
from shared.model import ArtifactUpdate, Role, Task, new_id
from shared.observability.context import note
from shared.pause import Pause

log = logging.getLogger("a2a.sse")

CONTENT_TYPE = "text/event-stream; charset=utf-8"
# A stream's events and pauses: a generator, which the answer closes however the stream ends.
Events = Generator[str | Pause, None, None]


def event(data: Any, *, seq: int | None = None, name: str | None = None) -> str:
    lines = []
    if name is not None:
        lines.append(f"event: {name}")
    if seq is not None:
        lines.append(f"id: {seq}")
    # JSON escapes newlines inside strings: the data is always a single line.
    lines.append("data: " + encode(data))
    return "\n".join(lines) + "\n\n"


def comment(text: str) -> str:
    """A line clients ignore: keeps idle connections open through proxies."""
    return f": {text}\n\n"


def response(events: Events, frames: streaming.Stream) -> Answer:
    """The streaming answer; closing it (the server does, however the request ended, even
    before the first chunk) closes `frames` and so frees their slot."""

    def close() -> None:
        try:
            events.close()  # a started stream's events end (their `finally`) ...
        finally:
            frames.close()  # ... and one never started still frees its slot

    headers = {"Content-Type": CONTENT_TYPE, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    chunks = (e if isinstance(e, Pause) else e.encode() for e in events)
    return Answer(200, headers, chunks=chunks, close=close)


def frame_events(
    frames: streaming.Stream,
    dialect: Dialect,
    wrap: Callable[[dict[str, Any]], Any],
    fail: Callable[[A2AError], Any],
) -> Events:
    """The events of an A2A stream: each frame's result in the dialect, as `wrap` puts it on
    the wire (JSON-RPC wraps it in a response, REST sends it bare); a failure ends the stream
    with an `error` event carrying `fail`'s body. The request's line counts the events
    written and the task's state as of the last (`_sent`)."""
    sent = 0
    try:
        for frame in frames:
            if frame is None:
                yield comment("keep-alive")
                continue
            if isinstance(frame, Pause):
                yield frame
                continue
            if isinstance(frame.item, Task):
                result = dialect.stream_opening(frame.item)
            else:
                result = dialect.stream_update(frame.item, frame.task)
            if result is not None:
                yield event(wrap(result), seq=frame.seq)
                sent = _sent(sent, frame)
    except Exception:
        reference = new_id()[:8]
        log.exception("a stream failed (reference %s)", reference)
        note(reference=reference, outcome="failed")
        yield event(fail(InternalError(f"reference {reference}")), name="error")
    finally:
        frames.close()


def _sent(before: int, frame: streaming.Frame) -> int:
    """One more event written (the front asks for the next chunk only then): the line's
    count, and the task's state as of it."""
    note(frames=before + 1, turnState=frame.task.status.state.value)
    return before + 1


def task_updates(frames: streaming.Stream) -> Events:
    """Seed 004's events (`GET /sse`): `task_update` with the state and the agent's latest
    words (a status message, or an artifact's parts as the message)."""
    sent = 0
    try:
        for frame in frames:
            if frame is None:
                yield comment("keep-alive")
                continue
            if isinstance(frame, Pause):
                yield frame
                continue
            item = frame.item
            data: dict[str, Any] = {"state": frame.task.status.state.value}
            if isinstance(item, ArtifactUpdate):
                parts = item.artifact.parts
                data["message"] = {"role": Role.AGENT.value, "parts": [v1_part(p) for p in parts]}
            else:  # a status update, or the opening snapshot (a Task)
                data["state"] = item.status.state.value
                if item.status.message is not None:
                    message = item.status.message
                    data["message"] = {
                        "role": message.role.value,
                        "parts": [v1_part(p) for p in message.parts],
                    }
            yield event(data, seq=frame.seq, name="task_update")
            sent = _sent(sent, frame)
    except Exception:
        reference = new_id()[:8]
        log.exception("the event stream of a task failed (reference %s)", reference)
        note(reference=reference, outcome="failed")
        yield event({"error": "the stream failed; reconnect with Last-Event-ID"}, name="error")
    finally:
        frames.close()
