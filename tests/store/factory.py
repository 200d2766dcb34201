"""Tasks and events as the service makes them, for the store tests."""

from __future__ import annotations

from datetime import UTC, datetime

from shared import lifecycle
from shared.model import (
    Event,
    Message,
    Part,
    Role,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
    new_id,
)
from shared.ports import MessageKey

ALICE = "alice"
MALLORY = "mallory"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def sent(message_id: str, digest: str = "content-1") -> MessageKey:
    """A message's de-duplication key (the store treats the digest as opaque)."""
    return MessageKey(message_id, digest)


def message(text: str, task_id: str, context_id: str = "ctx") -> Message:
    return Message(
        message_id=new_id(),
        role=Role.USER,
        parts=(Part(text=text),),
        context_id=context_id,
        task_id=task_id,
    )


def status(
    task: Task, state: TaskState, at: datetime | None = None, text: str | None = None
) -> StatusUpdate:
    answer = None
    if text is not None:
        answer = Message(message_id=new_id(), role=Role.AGENT, parts=(Part(text=text),))
    stamp = at or datetime.now(UTC)
    return StatusUpdate(
        task_id=task.id,
        context_id=task.context_id,
        status=TaskStatus(state=state, message=answer, timestamp=stamp),
    )


def new_task(
    context_id: str = "ctx",
    at: datetime | None = None,
    state: TaskState = TaskState.WORKING,
    *,
    task_id: str | None = None,
    text: str = "hello",
) -> tuple[Task, list[Event]]:
    """A task as the service makes one: the fold of its first events."""
    task_id = task_id or new_id()
    start = Task(id=task_id, context_id=context_id, status=TaskStatus(state=TaskState.SUBMITTED))
    events: list[Event] = [message(text, task_id, context_id)]
    events.append(status(start, state, at))
    return lifecycle.apply_all(start, events), events
