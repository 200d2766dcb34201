"""shared.lifecycle: the fold of events into a task changes what each event says and keeps
every other field of the task, whatever fields Task has."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from shared.lifecycle import apply, apply_all
from shared.model import (
    Artifact,
    ArtifactUpdate,
    Event,
    Message,
    Part,
    Role,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
)

QUESTION = Message(message_id="q", role=Role.AGENT, parts=(Part(text="which?"),))
# Each field an event does not fold holds a value of its own: a field the fold forgot to
# copy (a field added to Task, say) would come back as its default, or be missing.
_FOLDED = ("status", "history", "artifacts")
_KEPT: dict[str, Any] = {f.name: ("kept", f.name) for f in fields(Task) if f.name not in _FOLDED}
TASK = Task(
    status=TaskStatus(state=TaskState.INPUT_REQUIRED, message=QUESTION),
    history=(Message(message_id="m-1", role=Role.USER, parts=(Part(text="hi"),)),),
    artifacts=(Artifact(artifact_id="a", parts=(Part(text="x"),)),),
    **_KEPT,
)
ANSWER = Message(message_id="m-2", role=Role.USER, parts=(Part(text="that one"),))
WORKING = StatusUpdate(task_id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))
CHUNK = ArtifactUpdate(
    task_id="t", context_id="c", artifact=Artifact(artifact_id="a", parts=(Part(text="y"),))
)


@pytest.mark.parametrize(
    ("event", "changed"),
    [
        (ANSWER, {"history"}),
        (WORKING, {"status", "history"}),
        (CHUNK, {"artifacts"}),
        (
            ArtifactUpdate(task_id="t", context_id="c", artifact=CHUNK.artifact, append=True),
            {"artifacts"},
        ),
    ],
    ids=["message", "status", "artifact", "chunk"],
)
def test_an_event_changes_what_it_says_and_keeps_every_other_field(
    event: Event, changed: set[str]
) -> None:
    after = apply(TASK, event)
    kept = {f.name for f in fields(Task)} - changed
    assert {n: getattr(after, n) for n in kept} == {n: getattr(TASK, n) for n in kept}
    assert all(getattr(after, n) != getattr(TASK, n) for n in changed)


def test_a_status_moves_the_question_into_history_and_artifacts_merge_by_id() -> None:
    resumed = apply_all(TASK, [WORKING, ANSWER])
    assert [m.message_id for m in resumed.history] == ["m-1", "q", "m-2"]
    assert resumed.status is WORKING.status
    appended = apply(
        TASK, ArtifactUpdate(task_id="t", context_id="c", artifact=CHUNK.artifact, append=True)
    )
    assert [p.text for p in appended.artifacts[0].parts] == ["x", "y"]
    replaced: Any = apply(TASK, CHUNK)
    assert [p.text for p in replaced.artifacts[0].parts] == ["y"]
    added = apply(
        TASK,
        ArtifactUpdate(task_id="t", context_id="c", artifact=Artifact(artifact_id="b", parts=())),
    )
    assert [a.artifact_id for a in added.artifacts] == ["a", "b"]
