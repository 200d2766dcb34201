"""Server-sent events on the wire: one event's text, comments, and the streaming response.

Frames are `id: <seq>` and one line of JSON `data:`; an `event:` name only where a form needs
one (the seeds' `task_update`, an `error` frame). Proxies must not buffer the stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import flask

MEDIA_TYPE = "text/event-stream"


def event(data: Any, *, seq: int | None = None, name: str | None = None) -> str:
    lines = []
    if name is not None:
        lines.append(f"event: {name}")
    if seq is not None:
        lines.append(f"id: {seq}")
    # json.dumps escapes newlines inside strings: the data is always a single line.
    lines.append("data: " + json.dumps(data, separators=(",", ":"), ensure_ascii=False))
    return "\n".join(lines) + "\n\n"


def comment(text: str) -> str:
    """A line clients ignore: keeps idle connections open through proxies."""
    return f": {text}\n\n"


def response(chunks: Iterator[str]) -> flask.Response:
    return flask.Response(
        chunks,
        mimetype=MEDIA_TYPE,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
