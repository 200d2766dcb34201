"""Whole lines onto one stream from many threads, with no lock held across a write.

A `logging` handler writes each line under its lock. The write releases the GIL and takes it
back before the lock is let go, so every thread that logs meanwhile queues on the lock and
wakes in turn: under 16 requests at once that convoy made half of a request's thread switches
and a quarter of its CPU (docs/performance.md). `Lines` keeps lines whole another way. A line
of at most PIPE_BUF bytes is written by one write(2), which the kernel never splits nor mixes
with another writer's: POSIX's guarantee for a pipe (Cloud Run reads a function's logs from
one), and a regular file's or a terminal's writes are whole too. So such lines are written at
once, side by side. A longer line (a traceback) waits for those under way, holds new ones
off, and is written alone.

A stream that is no file (a test's StringIO) is written as a stream, a line at a time.

A thread that writes a line while it is writing one writes it at once, waiting for nothing,
as the logging handler's reentrant lock let it. That is a signal handler's line: Python runs
the handler in the main thread between two bytecodes, possibly in the middle of that thread's
own write, and a shutdown's handler may log. Waiting there, the thread would wait for itself
forever.
"""

from __future__ import annotations

import os
import select
import threading
from typing import TextIO


class Lines:
    """`stream`'s lines, each written whole whatever the other threads write."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        try:
            self._fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
            self._fd = None
        self._encoding = getattr(stream, "encoding", None) or "utf-8"
        self._errors = getattr(stream, "errors", None) or "strict"
        self._state = threading.Condition(threading.Lock())  # guards the two below
        self._short = 0  # short lines being written
        self._long = False  # a long line waits or is being written: new short ones wait
        self._alone = threading.Lock()  # held by a line written alone: long, or to no file
        self._writing = threading.local()  # `now`: this thread is in `write`

    def write(self, line: str) -> None:
        """Write `line` (its end of line included); raises what writing raises."""
        if getattr(self._writing, "now", False):  # a signal handler's, amid this thread's
            self._put(line)
            return
        self._writing.now = True
        try:
            self._write(line)
        finally:
            self._writing.now = False

    def _put(self, line: str) -> None:
        """`line` written as it is, minding no other line."""
        if self._fd is None:
            self._stream.write(line)
            self._stream.flush()
        else:
            _write_all(self._fd, self._encoded(line))

    def _encoded(self, line: str) -> bytes:
        return line.encode(self._encoding, self._errors)

    def _write(self, line: str) -> None:
        if self._fd is None:
            with self._alone:
                self._put(line)
            return
        data = self._encoded(line)
        if len(data) > select.PIPE_BUF:
            self._write_alone(self._fd, data)
            return
        with self._state:
            while self._long:
                self._state.wait()
            self._short += 1
        try:
            _write_all(self._fd, data)
        finally:
            with self._state:
                self._short -= 1
                if self._long and not self._short:
                    self._state.notify_all()

    def _write_alone(self, fd: int, data: bytes) -> None:
        with self._alone:
            with self._state:
                self._long = True
                while self._short:
                    self._state.wait()
            try:
                _write_all(fd, data)
            finally:
                with self._state:
                    self._long = False
                    self._state.notify_all()


def _write_all(fd: int, data: bytes) -> None:
    """`data`, in one write(2) when it is at most PIPE_BUF bytes and `fd` blocks; a longer line
    goes in parts as the pipe's reader makes room (and a cut write is finished)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
