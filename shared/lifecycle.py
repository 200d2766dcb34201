"""How events change a task: the one fold every writer and reader shares.

A task is the fold of its event log. Writers fold the events they are about to commit into
their copy; the Firestore store folds the log when a task outgrew its document. Keeping it
one pure function is what makes "re-read and decide again" safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from shared.model import Artifact, ArtifactUpdate, Event, Message, StatusUpdate, Task, TaskStatus


def apply(task: Task, event: Event) -> Task:
    """The task after one event."""
    if isinstance(event, Message):
        return _changed(task, task.status, (*task.history, event), task.artifacts)
    if isinstance(event, StatusUpdate):
        history = task.history
        # The outgoing status message becomes history, as the official SDK does, so that a
        # multi-turn conversation reads in order: question, answer, next question.
        previous = task.status.message
        if previous is not None and previous is not event.status.message:
            history = (*history, previous)
        return _changed(task, event.status, history, task.artifacts)
    return _changed(task, task.status, task.history, _merge_artifact(task.artifacts, event))


def _changed(
    task: Task, status: TaskStatus, history: tuple[Message, ...], artifacts: tuple[Artifact, ...]
) -> Task:
    """`task` with what an event changes, its other fields as they were: built directly,
    as `dataclasses.replace` would build it at twice the cost (it looks up and checks every
    field by name, and a send folds four events or more). tests/test_lifecycle.py holds
    this to Task's fields."""
    return Task(
        id=task.id,
        context_id=task.context_id,
        status=status,
        history=history,
        artifacts=artifacts,
        metadata=task.metadata,
    )


def apply_all(task: Task, events: Iterable[Event]) -> Task:
    for event in events:
        task = apply(task, event)
    return task


def _merge_artifact(
    artifacts: tuple[Artifact, ...], update: ArtifactUpdate
) -> tuple[Artifact, ...]:
    new = update.artifact
    for index, old in enumerate(artifacts):
        if old.artifact_id != new.artifact_id:
            continue
        merged = replace(old, parts=(*old.parts, *new.parts)) if update.append else new
        return (*artifacts[:index], merged, *artifacts[index + 1 :])
    return (*artifacts, new)
