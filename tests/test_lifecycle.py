"""shared.lifecycle: the fold of events into a task changes what each event says and keeps
every other field of the task, whatever fields Task has; appended plain text joins the
artifact's last text part, and reads back as the text its chunks made."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.lifecycle import JOIN_CHARS, apply, apply_all, joins
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
    assert [p.text for p in appended.artifacts[0].parts] == ["xy"]  # plain text joins
    replaced: Any = apply(TASK, CHUNK)
    assert [p.text for p in replaced.artifacts[0].parts] == ["y"]
    added = apply(
        TASK,
        ArtifactUpdate(task_id="t", context_id="c", artifact=Artifact(artifact_id="b", parts=())),
    )
    assert [a.artifact_id for a in added.artifacts] == ["a", "b"]


# -- appended text joins ----------------------------------------------------------------------

EMPTY = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))


def chunks_of(*chunks: tuple[Part, ...]) -> list[ArtifactUpdate]:
    """The updates of one artifact: its first chunk, then the others appended."""
    return [
        ArtifactUpdate(
            task_id="t",
            context_id="c",
            artifact=Artifact(artifact_id="a", parts=parts),
            append=index > 0,
            last_chunk=index == len(chunks) - 1,
        )
        for index, parts in enumerate(chunks)
    ]


def folded(*chunks: tuple[Part, ...]) -> tuple[Part, ...]:
    [artifact] = apply_all(EMPTY, chunks_of(*chunks)).artifacts
    return artifact.parts


# Texts short, and some long enough to fill a joined part (JOIN_CHARS), without drawing
# hundreds of thousands of characters one by one.
texts = st.text(max_size=6) | st.integers(0, JOIN_CHARS + 10).map(lambda n: "é" * n)
# Plain text, of no media type or of one (which joins text of its own media type only).
plain = st.builds(Part, text=texts, media_type=st.none() | st.just("text/markdown"))
# Parts that never join: data, a file by URL, text with metadata of its own.
other = st.one_of(
    st.builds(Part, data=st.integers() | st.text(max_size=4)),
    st.builds(Part, url=st.just("https://example.com/f"), media_type=st.just("image/png")),
    st.builds(Part, text=st.text(max_size=4), metadata=st.just({"k": 1})),
)


def is_plain(part: Part) -> bool:
    return part.text is not None and part.metadata is None


@given(st.lists(texts, min_size=1, max_size=40))
def test_text_chunks_read_back_as_their_text_in_as_few_parts_as_joining_allows(
    chunks: list[str],
) -> None:
    parts = folded(*((Part(text=text),) for text in chunks))
    assert "".join(p.text or "" for p in parts) == "".join(chunks)
    # Every part but the last is full: a chunk joined it until it held JOIN_CHARS.
    assert all(len(p.text or "") >= JOIN_CHARS for p in parts[:-1])
    assert all(p == Part(text=p.text) for p in parts)  # nothing but text


def test_500_chunks_are_one_part() -> None:
    parts = folded(*((Part(text=f"{i} "),) for i in range(500)))
    assert parts == (Part(text="".join(f"{i} " for i in range(500))),)


@given(st.lists(st.lists(plain | other, max_size=3).map(tuple), min_size=1, max_size=12))
def test_any_chunks_keep_their_text_and_every_part_that_does_not_join(
    chunks: list[tuple[Part, ...]],
) -> None:
    parts = folded(*chunks)
    made = [p for chunk in chunks for p in chunk]
    # The text, read in order, is the chunks' text in order.
    assert "".join(p.text or "" for p in parts) == "".join(p.text or "" for p in made)
    # A part that does not join is kept as it came, in its place among the others.
    assert [p for p in parts if not is_plain(p)] == [p for p in made if not is_plain(p)]
    # Only a chunk's first part joins, onto the artifact's last: one join per chunk at most.
    assert len(made) - (len(chunks) - 1) <= len(parts) <= len(made)


@pytest.mark.parametrize(
    ("last", "part", "join"),
    [
        (Part(text="a"), Part(text="b"), True),
        (
            Part(text="a", media_type="text/markdown"),
            Part(text="b", media_type="text/markdown"),
            True,
        ),
        (Part(text="a", media_type="text/markdown"), Part(text="b"), False),
        (Part(text="a", filename="a.txt"), Part(text="b"), False),
        (Part(text="a"), Part(text="b", metadata={}), False),
        (Part(text="a", metadata={"k": 1}), Part(text="b"), False),
        (Part(text="a"), Part(data="b"), False),
        (Part(data="a"), Part(text="b"), False),
        (Part(text="a"), Part(url="https://example.com/b"), False),
        (Part(text="a", raw="YQ=="), Part(text="b"), False),
        (Part(text="a" * (JOIN_CHARS - 1)), Part(text="b"), True),
        (Part(text="a" * JOIN_CHARS), Part(text="b"), False),
    ],
)
def test_what_joins(last: Part, part: Part, join: bool) -> None:
    assert joins(last, part) is join


def test_a_chunk_that_replaces_or_adds_joins_nothing() -> None:
    [first, second] = chunks_of((Part(text="a"),), (Part(text="b"),))
    replaced = apply_all(EMPTY, [first, replace(second, append=False)])
    assert replaced.artifacts[0].parts == (Part(text="b"),)
    other_artifact = replace(second, artifact=replace(second.artifact, artifact_id="b"))
    both = apply_all(EMPTY, [first, other_artifact])
    assert [a.parts for a in both.artifacts] == [(Part(text="a"),), (Part(text="b"),)]
