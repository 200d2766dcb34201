"""shared.spare_threads: background functions run at once, on threads that are reused."""

from __future__ import annotations

import logging
import threading

import pytest

from shared import spare_threads
from tests.conftest import wait_until


def test_each_function_runs_on_another_thread_and_threads_are_reused() -> None:
    used: list[threading.Thread] = []  # kept alive: a thread's identity is not reused
    for _ in range(30):
        done = threading.Event()

        def record(done: threading.Event = done) -> None:
            used.append(threading.current_thread())
            done.set()

        spare_threads.run(record)
        assert done.wait(5)
    assert threading.current_thread() not in used
    assert all(t.daemon for t in used)
    # One after the other: the thread that ran the last function, or a new one when that
    # had not yet counted itself idle (it needs the GIL to return): never one per function.
    assert len({id(t) for t in used}) <= len(used) // 3


def test_functions_that_wait_on_each_other_run_at_the_same_time() -> None:
    first, second, both = threading.Event(), threading.Event(), threading.Barrier(3)

    def meet(mine: threading.Event, theirs: threading.Event) -> None:
        mine.set()
        assert theirs.wait(5)
        both.wait(5)

    spare_threads.run(meet, first, second)
    spare_threads.run(meet, second, first)
    both.wait(5)  # a BrokenBarrierError if either function did not run meanwhile


def test_a_failing_function_is_logged_and_its_thread_serves_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def fail() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="a2a.threads"):
        spare_threads.run(fail)
        wait_until(lambda: "boom" in caplog.text, 5, lambda: caplog.text)
    assert "background function fail failed" in caplog.text
    done = threading.Event()
    spare_threads.run(done.set)
    assert done.wait(5)


def test_after_a_burst_at_most_max_idle_threads_stay() -> None:
    release = threading.Event()
    started = threading.Semaphore(0)

    def spare() -> int:
        return sum(t.name == "spare" for t in threading.enumerate())

    others = spare()  # busy with other tests' functions, or idle

    def hold() -> None:
        started.release()
        release.wait(10)

    burst = spare_threads.MAX_IDLE + 8
    for _ in range(burst):
        spare_threads.run(hold)
    for _ in range(burst):
        assert started.acquire(timeout=5)
    release.set()
    bound = spare_threads.MAX_IDLE + others
    wait_until(lambda: spare() <= bound, 5, lambda: f"{spare()} threads stay; at most {bound}")
