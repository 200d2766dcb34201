"""How events change a task: the one fold every writer and reader shares.

A task is the fold of its event log. Writers fold the events they are about to commit into
their copy; the Firestore store folds the log when a task outgrew its document. Keeping it
one pure function is what makes "re-read and decide again" safe.

Appended text joins: a chunk appended to an artifact (`append`) whose first part is plain text
(`joins`: text and nothing else, or with the same media type and filename as the part it
joins, and no metadata of its own) extends the artifact's last part when that is plain text
too, so a model's answer streamed token by token is one part, however many chunks made it.
The event log keeps each chunk as its own event (a live stream and a webhook get each one);
whatever folds the log (a commit, GetTask, a resumed stream's snapshot, a push of the task)
gets the joined part. A part stops joining once it holds JOIN_CHARS characters: the next
chunk starts a new part, so a chunk never copies more than that (joining is copying the
text: without a bound, a text of n chunks would copy n times its length).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from shared.model import (
    Artifact,
    ArtifactUpdate,
    Event,
    Message,
    Part,
    StatusUpdate,
    Task,
    TaskStatus,
)

# The most characters a joined text part takes more chunks into (256 Ki): a chunk's join then
# copies at most this much, and an artifact at A2A_MAX_ARTIFACT_BYTES's default (4 MiB) holds
# at most 16 parts of joined text, well under A2A_MAX_PARTS's 100. Measured (metered and
# folded, one core of a shared 2-core machine): a 4 MB artifact of 40,000 chunks of 100
# characters took 1.0-1.7 s with it, 89 s joined without bound (2.2 ms a chunk), 13 s not
# joined at all (each fold copies the tuple of parts).
JOIN_CHARS = 256 * 1024


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
        merged = replace(old, parts=appended(old.parts, new.parts)) if update.append else new
        return (*artifacts[:index], merged, *artifacts[index + 1 :])
    return (*artifacts, new)


def joins(last: Part, part: Part) -> bool:
    """Whether `part`, appended after `last`, becomes part of it: both plain text (a text, and
    no raw, url, data or metadata), of the same media type and filename (None alike), and
    `last` under JOIN_CHARS characters."""
    return (
        last.text is not None
        and part.text is not None
        and last.metadata is None
        and part.metadata is None
        and last.raw is None
        and part.raw is None
        and last.url is None
        and part.url is None
        and last.data is None
        and part.data is None
        and last.media_type == part.media_type
        and last.filename == part.filename
        and len(last.text) < JOIN_CHARS
    )


def appended(parts: tuple[Part, ...], chunk: tuple[Part, ...]) -> tuple[Part, ...]:
    """An artifact's `parts` after a `chunk` appended to them: the chunk's first part joins
    the last one (`joins`), its other parts follow as they are (a chunk of several parts is
    the handler's own choice of parts)."""
    if parts and chunk and joins(parts[-1], chunk[0]):
        last = parts[-1]
        # Built directly: a plain text part has no other field (`joins`).
        joined = Part(
            text=f"{last.text}{chunk[0].text}",
            media_type=last.media_type,
            filename=last.filename,
        )
        return (*parts[:-1], joined, *chunk[1:])
    return (*parts, *chunk)
