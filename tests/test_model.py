"""shared.model: frozen, slotted dataclasses built by keyword, copied with
dataclasses.replace; server-side ids are random UUIDs, drawn from the OS a block at a time,
never the same in a forked process as in its parent. (Their JSON: tests/test_model_json.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from dataclasses import FrozenInstanceError, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.model import (
    Artifact,
    ArtifactUpdate,
    Message,
    Part,
    PushAuthentication,
    PushConfig,
    Role,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
    agent_message,
    derived_id,
    new_id,
    status_update,
    utc_now,
)

TASK = Task(
    id="t-1",
    context_id="c-1",
    status=TaskStatus(state=TaskState.WORKING),
    history=(Message(message_id="m-1", role=Role.USER, parts=(Part(text="hi"),)),),
    metadata={"k": [1, {"n": None}]},
)
ALL: list[Any] = [
    Part(text="x"),
    TASK.history[0],
    TASK.status,
    Artifact(artifact_id="a", parts=(Part(text="x"),)),
    TASK,
    StatusUpdate(task_id="t", context_id="c", status=TASK.status),
    ArtifactUpdate(task_id="t", context_id="c", artifact=Artifact(artifact_id="a", parts=())),
    PushAuthentication(schemes=("Bearer",)),
    PushConfig(id="p", task_id="t", url="https://example.com"),
]


@pytest.mark.parametrize("model", ALL, ids=lambda m: type(m).__name__)
def test_models_are_frozen_slotted_and_built_by_keyword_only(model: Any) -> None:
    name = next(iter(model.__slots__))
    with pytest.raises(FrozenInstanceError):
        setattr(model, name, "changed")
    assert not hasattr(model, "__dict__")  # slotted: no dict per object
    with pytest.raises(TypeError):
        type(model)(*[getattr(model, n) for n in model.__slots__])


def test_a_copy_changes_only_what_it_names_and_leaves_the_original_alone() -> None:
    status = TaskStatus(state=TaskState.COMPLETED)
    artifacts = (Artifact(artifact_id="a", parts=()),)
    copied = replace(TASK, status=status, artifacts=artifacts)
    assert (copied.status, copied.artifacts) == (status, artifacts)
    assert (copied.id, copied.history, copied.metadata) == (TASK.id, TASK.history, TASK.metadata)
    assert (TASK.status.state, TASK.artifacts) == (TaskState.WORKING, ())
    assert copied != TASK and replace(copied, status=TASK.status, artifacts=()) == TASK
    with pytest.raises(TypeError):
        replace(TASK, not_a_field=1)  # type: ignore[call-arg]


def test_each_status_has_its_own_time_and_defaults_are_the_wire_s_empties() -> None:
    first, second = TaskStatus(state=TaskState.SUBMITTED), TaskStatus(state=TaskState.SUBMITTED)
    assert first.timestamp.microsecond % 1000 == 0  # the wire's precision: milliseconds
    assert first.timestamp.utcoffset() is not None and first.timestamp <= second.timestamp
    message = Message(message_id="m", role=Role.USER, parts=())
    assert (message.reference_task_ids, message.extensions, message.metadata) == ((), (), None)


def test_now_is_utc_to_the_millisecond_and_never_behind_the_system_clock() -> None:
    for _ in range(1000):
        before = datetime.now(UTC)
        now = utc_now()
        after = datetime.now(UTC)
        assert now.tzinfo is UTC and now.microsecond % 1000 == 0
        assert before - timedelta(microseconds=before.microsecond % 1000) <= now <= after


@pytest.mark.parametrize(
    ("part", "kind"),
    [
        (Part(text="t", data={"also": 1}), "text"),
        (Part(raw="aGk="), "raw"),
        (Part(url="https://example.com"), "url"),
        (Part(data=None), "data"),
        (Part(data=[1]), "data"),
    ],
)
def test_a_part_s_kind_is_its_first_content_field(part: Part, kind: str) -> None:
    assert part.kind == kind


def test_task_states_say_whether_they_end_a_turn_or_the_task() -> None:
    terminal = {s for s in TaskState if s.terminal}
    interrupted = {s for s in TaskState if s.interrupted}
    assert terminal == {"completed", "canceled", "failed", "rejected"}
    assert interrupted == {"input-required", "auth-required"}
    assert {s for s in TaskState if s.final} == terminal | interrupted


def test_an_agent_message_puts_its_text_first_and_needs_some_content() -> None:
    made = agent_message("a", task_id="t", context_id="c", parts=[Part(data=1)])
    assert made.parts == (Part(text="a"), Part(data=1))  # a tuple, whatever was passed
    assert (made.role, made.task_id, made.context_id) == (Role.AGENT, "t", "c")
    with pytest.raises(ValueError, match="needs text or parts"):
        agent_message(None, task_id="t", context_id="c")


def test_a_status_update_is_its_tasks_with_the_agents_message_now_or_at_a_given_time() -> None:
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))
    before = utc_now()
    said = status_update(task, TaskState.FAILED, "no")
    assert (said.task_id, said.context_id, said.status.state) == ("t", "c", TaskState.FAILED)
    message = said.status.message
    assert message is not None and message.parts == (Part(text="no"),)
    assert (message.role, message.task_id, message.context_id) == (Role.AGENT, "t", "c")
    assert said.status.timestamp >= before
    reply = agent_message("yes", task_id="t", context_id="c")
    assert status_update(task, TaskState.COMPLETED, reply).status.message is reply
    at = datetime(2026, 1, 2, tzinfo=UTC)
    plain = status_update(task, TaskState.WORKING, at=at)
    assert plain.status == TaskStatus(state=TaskState.WORKING, timestamp=at)


@given(st.uuids(), st.text(alphabet=st.characters(codec="utf-8")))
def test_a_derived_id_is_the_uuid5_of_its_name(namespace: uuid.UUID, name: str) -> None:
    """Ids derived from a name (a task's from its message, an artifact's from its task, turn
    and order) are uuid5's: a re-run turn replaces what a crashed run stored, and a resent
    message finds its task, whichever version of this code made them."""
    assert derived_id(namespace, name) == str(uuid.uuid5(namespace, name))


def test_new_ids_are_distinct_random_uuids() -> None:
    made = [new_id() for _ in range(5000)]  # more than one block of the OS's bytes
    assert len(set(made)) == len(made)
    for text in made:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 4, uuid.RFC_4122)


def test_a_forked_process_makes_other_ids_than_its_parent() -> None:
    new_id()  # the parent holds random bytes it has not handed out yet
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe and exits
        os.write(write, "".join(new_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        childs = pipe.read()
    parents = "".join(new_id() for _ in range(3))
    assert len(childs) == len(parents) == 3 * 36
    assert childs != parents


def test_the_model_its_json_fold_and_limits_import_no_pydantic() -> None:
    """pydantic's import (~85 ms) is off the cold start as far as the model goes."""
    code = (
        "import sys, shared.model, shared.model_json, shared.lifecycle, shared.limits;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"
