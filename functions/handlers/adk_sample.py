"""A Google ADK agent served as the handler (the `adk` extra): a small assistant with two tools,
one of which asks the user before it acts (the task waits in `input-required`).

The model is `ADK_SAMPLE_MODEL` (default gemini-2.5-flash), reached with `GOOGLE_API_KEY`
(Gemini API) or, with `GOOGLE_GENAI_USE_VERTEXAI=true`, `GOOGLE_CLOUD_PROJECT` and
`GOOGLE_CLOUD_LOCATION` (Vertex AI, the function's service account). Nothing connects to the
model before the first message: the card is served without credentials.

    make run HANDLER=functions.handlers.adk_sample
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from google.adk.agents import LlmAgent
from google.adk.tools.long_running_tool import LongRunningFunctionTool

from shared.adk import adk_handler
from shared.agent import AgentInfo, Skill

AGENT = AgentInfo(
    name="ADK sample agent",
    description="An ADK LlmAgent: tells the time, and books a meeting room once you confirm.",
)

SKILLS = [
    Skill(
        id="book-room",
        name="Book a room",
        description="Books a meeting room; asks you to confirm first.",
        tags=("adk", "multi-turn"),
        examples=("book room 4B for tomorrow 10:00",),
    )
]


def current_time() -> dict[str, str]:
    """The current date and time (UTC)."""
    return {"utc": datetime.now(UTC).isoformat(timespec="seconds")}


def confirm_booking(room: str, when: str) -> None:
    """Asks the user to confirm booking `room` at `when`; their answer is the result.

    Returns nothing: the run pauses, the task waits in input-required, and the user's next
    message is this call's response."""


root_agent = LlmAgent(
    name="assistant",
    model=os.environ.get("ADK_SAMPLE_MODEL", "gemini-2.5-flash"),
    instruction=(
        "You help with meeting rooms. Before booking, call confirm_booking and book only if "
        "the user's answer says yes. Use current_time for anything about today."
    ),
    tools=[current_time, LongRunningFunctionTool(confirm_booking)],
)

handle = adk_handler(root_agent)
