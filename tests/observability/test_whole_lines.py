"""Log lines written whole by many threads at once (shared.observability.lines), a unit's line
without waiting on the handler's lock."""

from __future__ import annotations

import io
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.observability import lines as module
from shared.observability import logs
from shared.observability.lines import Lines
from shared.observability.work import unit
from tests.observability.test_logs import json_only

# A line longer than a pipe holds (64 KiB on Linux): its writer has to wait for the reader
# partway through, and a short line written meanwhile would land inside it.
LONG = 100_000


@contextmanager
def pipe() -> Iterator[tuple[io.TextIOWrapper, list[bytes]]]:
    """A pipe's writing end as a text stream, and what its reader (a thread) read, once
    the block ends."""
    read_end, write_end = os.pipe()
    stream = open(write_end, "w", encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
    read: list[bytes] = []

    def reader() -> None:
        while chunk := os.read(read_end, 65536):
            read.append(chunk)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        yield stream, read
    finally:
        stream.close()
        thread.join()
        os.close(read_end)


def test_lines_of_threads_at_once_arrive_whole_through_a_pipe() -> None:
    """Eight threads, each writing short lines and lines longer than the pipe holds."""
    sent: list[str] = []
    with pipe() as (stream, read):
        lines = Lines(stream)

        def writer(number: int) -> None:
            for i in range(60):
                size = LONG if i % 15 == 0 else 40 + i
                line = f"{number}-{i}:" + "x" * size + "\n"
                sent.append(line)
                lines.write(line)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    received = b"".join(read).decode().splitlines(keepends=True)
    assert sorted(received) == sorted(sent)


def test_a_unit_s_line_is_written_while_another_thread_holds_the_handler_s_lock() -> None:
    """A unit's line (one a request) takes no lock of the handler's: a thread that logs
    never queues behind another's write."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as file, json_only():
        [handler] = logging.getLogger().handlers
        assert isinstance(handler, logs._Handler)
        handler.lines = Lines(file)
        held, done = threading.Event(), threading.Event()

        def holder() -> None:
            assert handler.lock is not None  # made by the handler's __init__
            with handler.lock:
                held.set()
                done.wait()

        def request() -> None:
            with unit("request"):
                pass

        holding = threading.Thread(target=holder)
        holding.start()
        held.wait()
        logging_one = threading.Thread(target=request)
        logging_one.start()
        logging_one.join(timeout=10)  # a bound for a failure only: it ends at once
        done.set()
        holding.join()
        assert not logging_one.is_alive(), "the line waited for the handler's lock"
        logging_one.join()
        file.seek(0)
        assert '"message":"request"' in file.read()


# Any text, and text with a lone surrogate (st.text leaves them out).
_TEXT = st.text() | st.tuples(st.text(), st.characters(categories=["Cs"]), st.text()).map("".join)


@given(text=_TEXT)
def test_any_text_is_written_as_its_stream_would_write_it(text: str) -> None:
    """Lone surrogates and all: encoded with the stream's own encoding and errors."""
    written = []
    for through_lines in (True, False):
        with tempfile.TemporaryFile() as file:
            with open(
                file.fileno(), "w", encoding="utf-8", errors="backslashreplace", closefd=False
            ) as stream:
                if through_lines:
                    Lines(stream).write(text)
                else:
                    stream.write(text)
            file.seek(0)
            written.append(file.read())
    assert written[0] == written[1]


def test_a_line_written_amid_the_same_thread_s_line_is_written_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A signal handler's line, run in the middle of its thread's own write (short or long,
    to a file or to a stream that is none), is written rather than waiting for the write it
    interrupted."""
    interrupted: list[bool] = []

    def handler() -> None:
        if not interrupted:
            interrupted.append(True)
            lines.write("the handler's\n")

    class Memory(io.StringIO):
        def write(self, text: str) -> int:
            handler()
            return super().write(text)

    real = module._write_all

    def write_all(fd: int, data: bytes) -> None:
        handler()
        real(fd, data)

    monkeypatch.setattr(module, "_write_all", write_all)
    for size in (10, LONG, None):
        interrupted.clear()
        with tempfile.TemporaryFile("w+", encoding="utf-8") as file, Memory() as memory:
            lines = Lines(memory if size is None else file)
            line = "x" * (size or 10) + "\n"
            # A daemon: stuck, it is not waited for at exit.
            outer = threading.Thread(target=lines.write, args=(line,), daemon=True)
            outer.start()
            outer.join(timeout=10)  # a bound for a failure only: it ends at once
            assert not outer.is_alive(), f"the writer of a line ({size}) waited for itself"
            file.seek(0)
            written = memory.getvalue() if size is None else file.read()
            assert written == "the handler's\n" + line
