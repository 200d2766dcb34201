"""The functions' HTTP/1.1 connections as uvicorn reads them, with a bounded head: its size,
its lines and its time.

uvicorn's protocol (httptools, the C parser) reads a request's head before any app sees it,
and bounds none of it: a head of 60,000 lines, or of one 50 MB line (which the parser grows
by concatenation as it comes: quadratic), is read whole on the event loop before the front
can refuse it, and a connection that sends nothing, or half a head, is held for ever (the
keep-alive timeout runs only after an answer). `BoundedHeads` is that protocol with three
limits (`HeadLimits`, the settings A2A_MAX_HEAD_BYTES, A2A_MAX_HEAD_LINES and
A2A_HEAD_READ_SECONDS), checked as the bytes come, before anything is handed to the app:

- a head past its bytes or lines is answered 431 and the connection closed: counted from the
  parser's callbacks (the request line and each header line), and, while a head is still
  incomplete, from the bytes received since it began, so a line that never ends is refused
  once it has taken the limit, not when it ends;
- a head not whole within its seconds of the connection's opening (or of its first byte, on a
  connection that answered before) closes the connection: silently when nothing of it came
  (an idle connection), with 408 when some did.

`functions/main.py` hands `protocol(limits)` to uvicorn's worker as its `http` protocol.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from shared.frozen import frozen
from shared.settings import Settings

# What a header line costs besides its name and value: ": " and CRLF.
_LINE_OVERHEAD = 4


@frozen
class HeadLimits:
    """What one request's head may take: bytes, header lines and seconds."""

    max_bytes: int
    max_lines: int
    seconds: float

    @classmethod
    def of(cls, settings: Settings) -> HeadLimits:
        return cls(settings.max_head_bytes, settings.max_head_lines, settings.head_read_seconds)


class _HeadRefused(Exception):
    """A head over a limit: raised from a parser callback, which stops the parse; the parser
    error it becomes is answered by `send_400_response`, which answers this instead."""


class BoundedHeads(HttpToolsProtocol):
    """uvicorn's httptools protocol, whose heads are bounded by `limits`."""

    limits: ClassVar[HeadLimits]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._heading = True  # a head is being read: none of this request reached the app
        self._head_bytes = 0  # received since the head began (its data)
        self._parsed = 0  # of the head, as the parser's callbacks gave them (exact)
        self._head_lines = 0
        self._refusal: str | None = None  # why the head is refused (431)
        self._deadline: asyncio.TimerHandle | None = None
        self._answered = False  # refused: the answer is written, the connection closing

    # The connection.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a connection that never sends a byte is closed too

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._answered:  # refused: what more comes is dropped unread until the close
            return
        reading_head = self._heading
        if reading_head:
            if self._between_requests():
                self._arm()
            self._head_bytes += len(data)
        super().data_received(data)
        # Still incomplete after this data: what came since the head began is all head.
        still_heading = self._refusal is None and reading_head and self._heading
        if still_heading and self._head_bytes > self.limits.max_bytes:
            self._refusal = self._too_large()
        if self._refusal is not None and not self._answered and not self.transport.is_closing():
            self._refuse(431, self._refusal)

    def send_400_response(self, msg: str) -> None:
        if self._refusal is not None:  # the parse was stopped by a limit
            self._refuse(431, self._refusal)
        else:
            super().send_400_response(msg)

    # The parser's callbacks.
    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_lines += 1
        if self._head_lines > self.limits.max_lines:
            self._refusal = (
                f"the request's head has more than {self.limits.max_lines} header lines "
                "(A2A_MAX_HEAD_LINES): send fewer"
            )
            raise _HeadRefused(self._refusal)
        self._count(len(name) + len(value) + _LINE_OVERHEAD)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._heading = False
        self._head_bytes = self._parsed = self._head_lines = 0
        self._disarm()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._heading = True  # the next request's head, if any, comes next
        super().on_message_complete()

    # The limits.
    def _count(self, size: int) -> None:
        """Count `size` bytes of the head the parser read; over the limit, stop the parse."""
        self._parsed += size
        if self._parsed > self.limits.max_bytes:
            self._refusal = self._too_large()
            raise _HeadRefused(self._refusal)

    def _too_large(self) -> str:
        return (
            f"the request's head is over {self.limits.max_bytes} bytes (A2A_MAX_HEAD_BYTES): "
            "send shorter headers"
        )

    def _between_requests(self) -> bool:
        """Whether no request of this connection is being answered (a pipelined head waits
        for the answer before it, and is no idle one)."""
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.limits.seconds, self._late)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _late(self) -> None:
        """The head's seconds passed: an idle connection is closed, a half-sent head 408."""
        self._deadline = None
        if (
            self._answered
            or self.transport.is_closing()
            or not self._heading
            or not self._between_requests()
        ):
            return
        if self._head_bytes == 0:
            self.transport.close()
            return
        seconds = f"{self.limits.seconds:g}"
        self._refuse(
            408,
            f"the request's head did not come whole within {seconds} s "
            "(A2A_HEAD_READ_SECONDS): send it at once",
        )

    def _refuse(self, status: int, message: str) -> None:
        """Answer `status` with a google.rpc.Status body naming the limit, and close: the
        rest of what the client sends is never read."""
        self._disarm()
        self._answered = True
        if not self._between_requests():
            # A pipelined head while an answer is being written: a second answer would be
            # written into the first one's bytes.
            self.transport.close()
            return
        reason = "REQUEST_HEADER_FIELDS_TOO_LARGE" if status == 431 else "DEADLINE_EXCEEDED"
        body = json.dumps({"error": {"code": status, "status": reason, "message": message}})
        content = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: application/json\r\n",
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                b"connection: close\r\n",
                b"\r\n",
                body.encode("ascii"),
            ]
        )
        self.transport.write(b"".join(content))
        # Closed with unread bytes from the client, the socket would be reset, and the
        # client lose the answer before it reads it: the write side is closed after the
        # answer, what still comes is dropped unread, and the connection closed once the
        # client closes, or after `seconds` at the most.
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self._deadline = self.loop.call_later(self.limits.seconds, self.transport.close)
        else:
            self.transport.close()


def protocol(limits: HeadLimits) -> type[BoundedHeads]:
    """The protocol class uvicorn makes one of per connection, bound to `limits`."""
    return type("BoundedHeads", (BoundedHeads,), {"limits": limits})
