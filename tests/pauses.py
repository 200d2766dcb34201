"""Streams read synchronously, as the front reads them on its loop: each pause (shared.pause)
waited out, until woken or its seconds passed, and never handed to the test."""

from __future__ import annotations

import threading
from collections.abc import Generator

from shared.pause import Pause
from shared.streaming import Frame


def waited(
    stream: Generator[Frame | Pause | None, None, None],
) -> Generator[Frame | None, None, None]:
    """The stream's frames and keep-alive ticks (None); closing this closes the stream."""
    try:
        for item in stream:
            if isinstance(item, Pause):
                woken = threading.Event()
                item.on_wake(woken.set)
                woken.wait(item.seconds)
            else:
                yield item
    finally:
        stream.close()
