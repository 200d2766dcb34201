"""The canonical A2A model: the v1.0 semantics as pydantic v2 models.

Every dialect decodes into these types and encodes from them; the service, the runtime and
the stores speak nothing else. Field names are Python's; wire names belong to the dialects.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

# Random bytes for server-side ids, drawn from the OS a block at a time: each os.urandom call
# lets go of the GIL, and under concurrent requests getting it back costs a thread up to a
# switch interval (5 ms): with uuid4's call per id, a blocking send waited on it four times.
# No lock either (waiting on a held one lets go of the GIL too): a list's pop and extend are
# atomic, and two threads that find it empty at once both refill it.
_RANDOM_BLOCK = 4096
_random: list[bytes] = []


def _forget_random() -> None:
    # A forked process (gunicorn's worker) must not hand out the ids its parent's bytes make.
    _random.clear()


os.register_at_fork(after_in_child=_forget_random)


def new_id() -> str:
    """A fresh server-side identifier (task, context, message or artifact): a random UUID
    (version 4, 122 bits from the OS's CSPRNG, as uuid.uuid4 makes it)."""
    try:
        drawn = bytearray(_random.pop())
    except IndexError:
        block = os.urandom(_RANDOM_BLOCK)
        _random.extend([block[i : i + 16] for i in range(16, _RANDOM_BLOCK, 16)])
        drawn = bytearray(block[:16])
    drawn[6] = drawn[6] & 0x0F | 0x40  # the version, 4
    drawn[8] = drawn[8] & 0x3F | 0x80  # the variant, RFC 4122's
    h = drawn.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def utc_now() -> datetime:
    """Now, to the millisecond: the wire's precision, so a timestamp a client read back
    compares equal to the stored one (ListTasks' statusTimestampAfter relies on it)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


class _Model(BaseModel):
    # Frozen: a task is changed by folding events into a copy, never in place, so a snapshot
    # handed to a caller or a store can't change under it.
    model_config = ConfigDict(frozen=True, extra="forbid")

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's shallow copy, without its four generic `copy.copy` calls: every event
        folded into a task is one (a blocking send makes five). These models have no extra
        fields (extra="forbid") and no private attributes, so there is nothing else to copy."""
        if deep:
            return super().model_copy(update=update, deep=True)
        copied = self.__class__.__new__(self.__class__)
        values = self.__dict__.copy()
        fields_set = self.__pydantic_fields_set__.copy()
        if update:
            values.update(update)
            fields_set.update(update)
        object.__setattr__(copied, "__dict__", values)
        object.__setattr__(copied, "__pydantic_fields_set__", fields_set)
        object.__setattr__(copied, "__pydantic_extra__", None)
        object.__setattr__(copied, "__pydantic_private__", None)
        return copied


class TaskState(StrEnum):
    SUBMITTED = "submitted"
    WORKING = "working"
    INPUT_REQUIRED = "input-required"
    AUTH_REQUIRED = "auth-required"
    COMPLETED = "completed"
    CANCELED = "canceled"
    FAILED = "failed"
    REJECTED = "rejected"
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL

    @property
    def interrupted(self) -> bool:
        return self in _INTERRUPTED

    @property
    def final(self) -> bool:
        """Whether a stream ends at a change to this state (v0.x `final: true`)."""
        return self.terminal or self.interrupted


_TERMINAL = frozenset(
    {TaskState.COMPLETED, TaskState.CANCELED, TaskState.FAILED, TaskState.REJECTED}
)
_INTERRUPTED = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})


class Role(StrEnum):
    USER = "user"
    AGENT = "agent"


class Part(_Model):
    """One piece of content: text, raw bytes (base64), a URL, or any JSON value as data.

    `raw` holds the base64 text as received: it is passed through untouched (no decode and
    re-encode on the hot path) and decoded only when a handler asks for bytes.
    """

    text: str | None = None
    raw: str | None = None
    url: str | None = None
    data: Any = None
    filename: str | None = None
    media_type: str | None = None
    metadata: dict[str, Any] | None = None

    @property
    def kind(self) -> Literal["text", "raw", "url", "data"]:
        if self.text is not None:
            return "text"
        if self.raw is not None:
            return "raw"
        if self.url is not None:
            return "url"
        return "data"


class Message(_Model):
    message_id: str
    role: Role
    parts: tuple[Part, ...]
    context_id: str | None = None
    task_id: str | None = None
    reference_task_ids: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None


def agent_message(
    text: str | None, *, task_id: str, context_id: str, parts: Sequence[Part] = ()
) -> Message:
    """A new message from the agent in a task: `text` as its first part, then `parts`."""
    all_parts = ((Part(text=text),) if text is not None else ()) + tuple(parts)
    if not all_parts:
        raise ValueError("a message needs text or parts")
    return Message(
        message_id=new_id(),
        role=Role.AGENT,
        parts=all_parts,
        task_id=task_id,
        context_id=context_id,
    )


class TaskStatus(_Model):
    state: TaskState
    message: Message | None = None
    timestamp: datetime = Field(default_factory=utc_now)


class Artifact(_Model):
    artifact_id: str
    parts: tuple[Part, ...]
    name: str | None = None
    description: str | None = None
    extensions: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None


class Task(_Model):
    id: str
    context_id: str
    status: TaskStatus
    history: tuple[Message, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    metadata: dict[str, Any] | None = None


class StatusUpdate(_Model):
    """The task moved to a new status (the v0.x `final` flag is derived, not stored)."""

    task_id: str
    context_id: str
    status: TaskStatus
    metadata: dict[str, Any] | None = None


class ArtifactUpdate(_Model):
    """An artifact was added, replaced, or (with `append`) extended by a chunk."""

    task_id: str
    context_id: str
    artifact: Artifact
    append: bool = False
    last_chunk: bool = False
    metadata: dict[str, Any] | None = None


class PushAuthentication(_Model):
    """How the agent authenticates to a webhook: `Authorization: <scheme> <credentials>`."""

    schemes: tuple[str, ...]  # v0.x lists several; v1.0 has one (the first here)
    credentials: str | None = None


class PushConfig(_Model):
    """Where and how to notify a client of a task's events."""

    id: str
    task_id: str
    url: str
    token: str | None = None  # sent back as X-A2A-Notification-Token
    authentication: PushAuthentication | None = None


# What the event log holds: a message entering history, a status change, an artifact change.
Event = Message | StatusUpdate | ArtifactUpdate
