"""shared.timers: deadlines on one thread per clock, which only an earlier deadline wakes."""

from __future__ import annotations

import functools
import threading

import pytest

from shared import timers
from shared.timers import Timers, timers_of
from tests.clock import ManualClock
from tests.conftest import wait_until


class CountingClock(ManualClock):
    """A ManualClock counting the waits begun on it (the timers thread's sleeps to a
    deadline: each one after the first is a wake-up)."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    def wait(self, event: threading.Event, timeout: float) -> bool:
        self.waits += 1
        return super().wait(event, timeout)


def test_a_deadline_runs_once_the_clock_reaches_it_and_not_before() -> None:
    clock = ManualClock()
    deadlines = Timers(clock)
    first, second = threading.Event(), threading.Event()
    deadlines.call_at(clock.monotonic() + 1, first.set)
    deadlines.call_at(clock.monotonic() + 2, second.set)
    clock.advance(1)
    assert first.wait(5)
    assert not second.is_set()  # its time has not come
    clock.advance(1)
    assert second.wait(5)


def test_a_dropped_deadline_never_runs() -> None:
    clock = ManualClock()
    deadlines = Timers(clock)
    ran: list[int] = []
    done = threading.Event()
    handles = [
        deadlines.call_at(clock.monotonic() + 1, functools.partial(ran.append, i))
        for i in range(100)
    ]
    for handle in handles[1::2]:
        handle.cancel()  # half of them: the heap is compacted on the way
    handles[1].cancel()  # again: nothing
    deadlines.call_at(clock.monotonic() + 1, done.set)  # the same time, after them all
    clock.advance(1)
    assert done.wait(5)
    wait_until(lambda: len(ran) == 50, 5, lambda: f"{len(ran)} ran")
    assert sorted(ran) == list(range(0, 100, 2))
    handles[0].cancel()  # ran already: nothing


def test_later_deadlines_and_their_drops_wake_nobody() -> None:
    clock = CountingClock()
    deadlines = Timers(clock)
    fired = threading.Event()
    earliest = deadlines.call_at(clock.monotonic() + 10, fired.set)
    wait_until(lambda: clock.waits == 1, 5, lambda: f"{clock.waits} waits")
    for _ in range(100):  # short turns: each sets a later deadline and drops it
        deadlines.call_at(clock.monotonic() + 20, fired.set).cancel()
    assert clock.waits == 1  # the thread slept on, to the earliest deadline
    earlier = threading.Event()
    deadlines.call_at(clock.monotonic() + 1, earlier.set)  # earlier: wakes it
    wait_until(lambda: clock.waits == 2, 5, lambda: f"{clock.waits} waits")
    clock.advance(1)
    assert earlier.wait(5)
    assert not fired.is_set()
    earliest.cancel()  # the last one: the thread naps instead (real time, not the clock's)
    clock.advance(20)
    assert not fired.is_set()


def test_an_idle_thread_ends_and_the_next_deadline_starts_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(timers, "IDLE_SECONDS", 0.0)
    clock = ManualClock()
    deadlines = Timers(clock)

    def threads() -> int:
        return sum(t.name == "timers" for t in threading.enumerate())

    for _ in range(2):
        done = threading.Event()
        deadlines.call_at(clock.monotonic() + 1, done.set)
        clock.advance(1)
        assert done.wait(5)
        # Nothing is left to time: its thread ends, and the next call_at must start one.
        # (Its own record of a thread: other clocks' threads may come and go meanwhile.)
        wait_until(lambda: deadlines._sleeps_until is None, 5, lambda: f"{threads()} threads")


def test_one_timers_per_clock() -> None:
    one, other = ManualClock(), ManualClock()
    assert timers_of(one) is timers_of(one)
    assert timers_of(one) is not timers_of(other)
