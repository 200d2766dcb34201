"""shared.model: its models' copies behave as pydantic's own (`model_copy` is rewritten for
speed: the fold of every event into a task makes one); server-side ids are random UUIDs,
drawn from the OS a block at a time, never the same in a forked process as in its parent."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from shared.model import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
    new_id,
)

TASK = Task(
    id="t-1",
    context_id="c-1",
    status=TaskStatus(state=TaskState.WORKING),
    history=(Message(message_id="m-1", role=Role.USER, parts=(Part(text="hi"),)),),
    metadata={"k": [1, {"n": None}]},
)


def same(ours: BaseModel, theirs: BaseModel) -> None:
    assert ours == theirs
    assert type(ours) is type(theirs)
    assert ours.model_fields_set == theirs.model_fields_set
    assert ours.__pydantic_extra__ == theirs.__pydantic_extra__
    assert ours.model_dump() == theirs.model_dump()


@given(
    state=st.sampled_from(list(TaskState)),
    artifact_ids=st.lists(st.text(min_size=1), max_size=3),
    metadata=st.none() | st.dictionaries(st.text(), st.integers() | st.text(), max_size=3),
)
def test_a_copy_with_updates_is_pydantic_s(
    state: TaskState, artifact_ids: list[str], metadata: dict[str, Any] | None
) -> None:
    update: dict[str, Any] = {
        "status": TaskStatus(state=state),
        "artifacts": tuple(Artifact(artifact_id=i, parts=(Part(text=i),)) for i in artifact_ids),
        "metadata": metadata,
    }
    same(TASK.model_copy(update=update), BaseModel.model_copy(TASK, update=update))


@pytest.mark.parametrize("deep", [False, True])
def test_a_plain_copy_is_pydantic_s_and_leaves_the_original_alone(deep: bool) -> None:
    copied = TASK.model_copy(deep=deep)
    same(copied, BaseModel.model_copy(TASK, deep=deep))
    assert copied.__dict__ is not TASK.__dict__
    assert copied.model_fields_set is not TASK.model_fields_set
    copied2 = TASK.model_copy(update={"id": "t-2"})
    assert (TASK.id, copied2.id) == ("t-1", "t-2")
    assert "id" in copied2.model_fields_set


def test_a_copy_stays_frozen() -> None:
    copied = TASK.model_copy(update={"id": "t-2"})
    with pytest.raises(ValidationError):
        copied.id = "t-3"  # type: ignore[misc]


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
