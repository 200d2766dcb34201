"""The canonical A2A model: the v1.0 semantics as frozen, slotted dataclasses.

Every dialect decodes into these types and encodes from them; the service, the runtime and
the stores speak nothing else. Field names are Python's; wire names belong to the dialects.

Built by keyword only, and checking nothing (a blocking send builds a few dozen): a client's
values are checked by the front door (`dialects/decode.py`) before any is built, a handler's
where its output enters a turn, by encoding them (`model_json.encode`, which
`limits.servable` runs). Their JSON, stored and canonical, is `model_json.py`'s.
Frozen: a task is changed by folding events into a copy (`dataclasses.replace`), never in
place, so a snapshot handed to a caller or a store can't change under it.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from shared.frozen import frozen

if TYPE_CHECKING:
    from uuid import UUID

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
    return _uuid_text(drawn, 4)


def derived_id(namespace: UUID, name: str) -> str:
    """The identifier derived from `name`: str(uuid.uuid5(namespace, name)), the same for the
    same name in every version, made without the UUID object (its int round trip and its
    formatting were most of its cost)."""
    return _uuid_text(bytearray(hashlib.sha1(namespace.bytes + name.encode()).digest()[:16]), 5)


def _uuid_text(raw: bytearray, version: int) -> str:
    """16 bytes as a UUID of `version` (and RFC 4122's variant), in its usual text."""
    raw[6] = raw[6] & 0x0F | version << 4
    raw[8] = raw[8] & 0x3F | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc_now() -> datetime:
    """Now, to the millisecond: the wire's precision, so a timestamp a client read back
    compares equal to the stored one (ListTasks' statusTimestampAfter relies on it)."""
    # The epoch plus whole milliseconds, in integers (exact at any date): a third of what
    # datetime.now(UTC).replace(microsecond=...) costs, read a few times a send.
    return _EPOCH + timedelta(milliseconds=time.time_ns() // 1_000_000)


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
        """Terminal or interrupted: a turn ends at this state, and so does a stream (v0.x
        `final: true`)."""
        return self.terminal or self.interrupted


_TERMINAL = frozenset(
    {TaskState.COMPLETED, TaskState.CANCELED, TaskState.FAILED, TaskState.REJECTED}
)
_INTERRUPTED = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})


class Role(StrEnum):
    USER = "user"
    AGENT = "agent"


@frozen(slots=True, kw_only=True)
class Part:
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


@frozen(slots=True, kw_only=True)
class Message:
    """A message of a conversation: the user's, or the agent's in a task."""

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


@frozen(slots=True, kw_only=True)
class TaskStatus:
    """Where a task stands: its state, the agent's message with it, and since when."""

    state: TaskState
    message: Message | None = None
    timestamp: datetime = field(default_factory=utc_now)


@frozen(slots=True, kw_only=True)
class Artifact:
    """An output of a task, in parts."""

    artifact_id: str
    parts: tuple[Part, ...]
    name: str | None = None
    description: str | None = None
    extensions: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None


@frozen(slots=True, kw_only=True)
class Task:
    """A unit of work: its status, its conversation (history) and its outputs (artifacts)."""

    id: str
    context_id: str
    status: TaskStatus
    history: tuple[Message, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    metadata: dict[str, Any] | None = None


@frozen(slots=True, kw_only=True)
class StatusUpdate:
    """The task moved to a new status (the v0.x `final` flag is derived, not stored)."""

    task_id: str
    context_id: str
    status: TaskStatus
    metadata: dict[str, Any] | None = None


def status_update(
    task: Task,
    state: TaskState,
    message: Message | str | None = None,
    *,
    at: datetime | None = None,
) -> StatusUpdate:
    """`task` moving to `state` now (or `at`), with the agent's message (a text: made one)."""
    if isinstance(message, str):
        message = agent_message(message, task_id=task.id, context_id=task.context_id)
    status = TaskStatus(state=state, message=message, timestamp=at or utc_now())
    return StatusUpdate(task_id=task.id, context_id=task.context_id, status=status)


@frozen(slots=True, kw_only=True)
class ArtifactUpdate:
    """An artifact was added, replaced, or (with `append`) extended by a chunk."""

    task_id: str
    context_id: str
    artifact: Artifact
    append: bool = False
    last_chunk: bool = False
    metadata: dict[str, Any] | None = None


@frozen(slots=True, kw_only=True)
class PushAuthentication:
    """How the agent authenticates to a webhook: `Authorization: <scheme> <credentials>`."""

    schemes: tuple[str, ...]  # v0.x lists several; v1.0 has one (the first here)
    credentials: str | None = None


@frozen(slots=True, kw_only=True)
class PushConfig:
    """Where and how to notify a client of a task's events."""

    id: str
    task_id: str
    url: str
    token: str | None = None  # sent back as X-A2A-Notification-Token
    authentication: PushAuthentication | None = None


# What the event log holds: a message entering history, a status change, an artifact change.
Event = Message | StatusUpdate | ArtifactUpdate


def notifiable(events: Sequence[Event]) -> bool:
    """Whether a commit's events are news for a push config: a status or an artifact (a
    message joining the history is not)."""
    return any(isinstance(event, StatusUpdate | ArtifactUpdate) for event in events)
