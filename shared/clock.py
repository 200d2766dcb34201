"""Time as the library reads it: a seam, so tests move time instead of sleeping.

Everything that waits or compares times (leases, heartbeats, backoff, stream deadlines,
blocking sends) asks a Clock. `SYSTEM` is the real one; tests pass a manual clock
(tests/clock.py) whose time moves only when the test says so.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Protocol

from shared.model import utc_now


class Clock(Protocol):
    def now(self) -> datetime:
        """The wall-clock time, aware UTC, to the millisecond (stored timestamps)."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never goes back (durations, deadlines)."""
        ...

    def wait(self, event: threading.Event, timeout: float) -> bool:
        """Wait until `event` is set or `timeout` seconds passed; whether it was set.
        A pause that nothing can cut short waits on an event nobody sets."""
        ...

    def loop_delay(self, seconds: float) -> float:
        """How long an event loop's timer waits before it looks at this clock again, for a
        deadline `seconds` away (a turn's windows and checks)."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return utc_now()

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, event: threading.Event, timeout: float) -> bool:
        return event.wait(max(timeout, 0.0))

    def loop_delay(self, seconds: float) -> float:
        return seconds


SYSTEM: Clock = SystemClock()
