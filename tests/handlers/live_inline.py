"""tests.handlers.live run in the request: the same handler, not LONG_RUNNING, so a blocking
send runs its turn inline (shared.service.sending) while the test follows the task."""

from __future__ import annotations

from tests.handlers.live import SKILLS, handle

__all__ = ["SKILLS", "handle"]
