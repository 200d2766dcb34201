"""The canonical requests of the A2A operations: what a binding decodes a call into.

One frozen value per operation, over shared.model types and nothing of any wire: no version's
member names, no JSON. The service (shared.service) runs them; the wire codecs build them
from any version's params.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.frozen import frozen
from shared.model import Message, PushAuthentication, PushConfig, TaskState


@frozen
class InlinePushConfig:
    """A push config sent with a message: its task is known only once the send is decided."""

    url: str
    token: str | None = None
    authentication: PushAuthentication | None = None
    id: str | None = None  # None: the service names it

    def for_task(self, task_id: str, default_id: str) -> PushConfig:
        return PushConfig(
            id=self.id or default_id,
            task_id=task_id,
            url=self.url,
            token=self.token,
            authentication=self.authentication,
        )


@frozen
class SendRequest:
    """A message to start or continue a task (send and streamed send alike)."""

    message: Message
    task_id: str | None  # the task to continue, if any
    context_id: str | None  # the client's context id; a mismatch with the task is refused
    session_id: str | None  # v0.1's grouping: the context of a new task, else ignored
    create_if_missing: bool  # the client names the task it creates (v0.1)
    history_length: int | None
    blocking: bool
    metadata: dict[str, Any] | None
    push_config: InlinePushConfig | None = None


@frozen
class TaskSelector:
    """A task to read, and how much of its history (None: all of it)."""

    task_id: str
    history_length: int | None = None


@frozen
class CancelRequest:
    """Cancel a task."""

    task_id: str


@frozen
class MessagesRequest:
    """The seeds' `messages/list`: a task's whole conversation."""

    task_id: str


@frozen
class SubscribeRequest:
    """Follow a task's events: from now on, or after `after_seq` when a stream resumes."""

    task_id: str
    after_seq: int | None = None


@frozen
class ListTasksRequest:
    """A page of the owner's tasks, filtered."""

    context_id: str | None
    state: TaskState | None
    status_after: datetime | None
    page_size: int
    page_token: str | None
    history_length: int | None
    include_artifacts: bool


@frozen
class SetPushConfigRequest:
    """Create or replace a push config of a task."""

    config: PushConfig  # for its task, which must exist


@frozen
class GetPushConfigRequest:
    """Read a push config of a task."""

    task_id: str
    config_id: str | None  # None: the task's first config (v0.x reads without an id)


@frozen
class ListPushConfigsRequest:
    """List a task's push configs."""

    task_id: str


@frozen
class DeletePushConfigRequest:
    """Delete a push config of a task."""

    task_id: str
    config_id: str
