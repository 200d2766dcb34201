"""The CLI tests' agent (tests.client.agent) declared long-running: every turn goes to the
worker, and a blocking send answers once A2A_BLOCKING_BUDGET_SECONDS are spent, with the task
as it stands, so a client that waits longer polls."""

from tests.client.agent import SKILLS, handle

__all__ = ["SKILLS", "handle"]
LONG_RUNNING = True
