"""What every dialect provides: encoders from the canonical model to its wire JSON."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from shared.errors import A2AError
from shared.model import Artifact, ArtifactUpdate, Message, Part, PushConfig, StatusUpdate, Task
from shared.ports import StoredPushConfig, TaskPage


class Dialect(Protocol):
    #: the version this dialect speaks ("1.0", "0.3", "0.1")
    version: str
    #: this variant's name, stored with a task so v0.x readers get the task's own dialect
    name: str
    #: the history a reader gets when it sends no historyLength (None: all of it)
    default_history: int | None
    #: whether a send may answer with a bare message instead of a task
    message_results: bool

    def task(self, task: Task) -> dict[str, Any]: ...

    def message(self, message: Message) -> dict[str, Any]: ...

    def send_result(self, result: Task | Message) -> dict[str, Any]: ...

    def task_list(self, page: TaskPage, tasks: list[Task], page_size: int) -> dict[str, Any]: ...

    def error_data(self, error: A2AError) -> Any: ...

    def push_config(self, stored: StoredPushConfig) -> dict[str, Any]:
        """A config as its owner reads it back (with its delivery failure, where the version
        has room for it)."""
        ...

    def push_configs(self, configs: list[StoredPushConfig], next_page_token: str) -> Any: ...

    def stream_opening(self, result: Task | Message) -> dict[str, Any] | None:
        """The `result` of a stream's first frame (None: this version sends none)."""
        ...

    def stream_update(self, event: StatusUpdate | ArtifactUpdate, task: Task) -> dict[str, Any]:
        """The `result` of a frame for one event; `task` is the task after it."""
        ...


def timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and `Z`, as the v1.0 spec recommends."""
    if moment.tzinfo is not UTC:  # every stored time is UTC already: no conversion
        moment = moment.astimezone(UTC)
    # isoformat cuts to milliseconds as the wire has them, ending "+00:00" for UTC.
    return moment.isoformat(timespec="milliseconds")[:-6] + "Z"


def v0_error_data(error: A2AError) -> dict[str, Any] | None:
    """v0.x: `data` is free-form; we put the field at fault and the detail there."""
    return error.info() or None


def v0_push_config(config: PushConfig, *, with_id: bool) -> dict[str, Any]:
    """The v0.x PushNotificationConfig object (v0.1 had no config ids)."""
    out: dict[str, Any] = {"id": config.id} if with_id else {}
    out["url"] = config.url
    if config.token is not None:
        out["token"] = config.token
    if config.authentication is not None:
        auth: dict[str, Any] = {"schemes": list(config.authentication.schemes)}
        if config.authentication.credentials is not None:
            auth["credentials"] = config.authentication.credentials
        out["authentication"] = auth
    return out


def delivery_failure(stored: StoredPushConfig) -> dict[str, Any] | None:
    """The v0.x `metadata` of a config whose deliveries failed at the queue's last attempt:
    `lastError` and `failedAt` (v0.x objects take fields beyond their schema's; the v1.0
    TaskPushNotificationConfig has no field for it: a 1.0 answer carries it only under the
    kit's extension, shared.extensions.DELIVERY_STATUS)."""
    if stored.failed_at is None:
        return None
    return {"lastError": stored.last_error or "", "failedAt": timestamp(stored.failed_at)}


def artifact(a: Artifact, part: Callable[[Part], dict[str, Any]]) -> dict[str, Any]:
    """An Artifact in v0.3 and v1.0 alike, its parts in the version's own form."""
    out: dict[str, Any] = {"artifactId": a.artifact_id}
    if a.name:
        out["name"] = a.name
    if a.description:
        out["description"] = a.description
    out["parts"] = [part(p) for p in a.parts]
    if a.extensions:
        out["extensions"] = list(a.extensions)
    if a.metadata is not None:
        out["metadata"] = a.metadata
    return out


def message_tail(m: Message, out: dict[str, Any]) -> dict[str, Any]:
    """The Message members v0.3 and v1.0 name alike, added to `out` when set."""
    if m.context_id:
        out["contextId"] = m.context_id
    if m.task_id:
        out["taskId"] = m.task_id
    if m.reference_task_ids:
        out["referenceTaskIds"] = list(m.reference_task_ids)
    if m.extensions:
        out["extensions"] = list(m.extensions)
    if m.metadata is not None:
        out["metadata"] = m.metadata
    return out


def task_list(
    encode: Callable[[Task], dict[str, Any]], page: TaskPage, tasks: list[Task], page_size: int
) -> dict[str, Any]:
    """A ListTasks result, its tasks in the version's own form (same members in every one)."""
    return {
        "tasks": [encode(t) for t in tasks],
        "nextPageToken": page.next_page_token,
        "pageSize": page_size,
        "totalSize": page.total_size,
    }


class V0Common:
    """What the v0.x dialects answer alike: free-form error data, push config lists as
    arrays of the version's TaskPushNotificationConfig."""

    def push_config(self, stored: StoredPushConfig) -> dict[str, Any]:
        raise NotImplementedError

    def error_data(self, error: A2AError) -> Any:
        return v0_error_data(error)

    def push_configs(self, configs: list[StoredPushConfig], next_page_token: str) -> Any:
        return [self.push_config(c) for c in configs]
