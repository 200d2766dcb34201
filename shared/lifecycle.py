"""How events change a task: the one fold every writer and reader shares.

A task is the fold of its event log. Writers fold the events they are about to commit into
their copy; the Firestore store folds the log when a task outgrew its document. Keeping it
one pure function is what makes "re-read and decide again" safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from shared.model import Artifact, ArtifactUpdate, Event, Message, StatusUpdate, Task


def apply(task: Task, event: Event) -> Task:
    """The task after one event."""
    if isinstance(event, Message):
        return replace(task, history=(*task.history, event))
    if isinstance(event, StatusUpdate):
        history = task.history
        # The outgoing status message becomes history, as the official SDK does, so that a
        # multi-turn conversation reads in order: question, answer, next question.
        previous = task.status.message
        if previous is not None and previous is not event.status.message:
            history = (*history, previous)
        return replace(task, status=event.status, history=history)
    return replace(task, artifacts=_merge_artifact(task.artifacts, event))


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
