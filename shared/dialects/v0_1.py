"""A2A v0.1 JSON: `tasks/send` with client task ids and `sessionId`, parts with `type`,
artifacts with `index`, and only the states v0.1 knew."""

from __future__ import annotations

from typing import Any

from shared.dialects import base
from shared.dialects.base import delivery_failure, timestamp, v0_push_config
from shared.dialects.v0_3 import part as v0_3_part
from shared.model import (
    Artifact,
    ArtifactUpdate,
    Message,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
)
from shared.ports import StoredPushConfig, TaskPage

# v0.1 has no rejected or auth-required: send the nearest state a v0.1 client understands.
_STATE = {TaskState.REJECTED: "failed", TaskState.AUTH_REQUIRED: "input-required"}


def message(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {
        "role": m.role.value,
        "parts": [v0_3_part(p, discriminator="type") for p in m.parts],
    }
    if m.metadata is not None:
        out["metadata"] = m.metadata
    return out


def status(s: TaskStatus) -> dict[str, Any]:
    out: dict[str, Any] = {
        "state": _STATE.get(s.state, s.state.value),
        "timestamp": timestamp(s.timestamp),
    }
    if s.message is not None:
        out["message"] = message(s.message)
    return out


def artifact(a: Artifact, index: int) -> dict[str, Any]:
    """v0.1 artifacts have no id: `index` is their place in the task's list."""
    item: dict[str, Any] = {}
    if a.name:
        item["name"] = a.name
    if a.description:
        item["description"] = a.description
    item["parts"] = [v0_3_part(p, discriminator="type") for p in a.parts]
    item["index"] = index
    if a.metadata is not None:
        item["metadata"] = a.metadata
    return item


class V01Dialect(base.V0Common):
    version = "0.1"
    name = "0.1"
    # v0.1: history comes back only when asked for (historyLength > 0).
    default_history: int | None = 0
    # v0.1 sends always answer a task: a direct reply becomes a completed task's message.
    message_results = False

    def task(self, t: Task) -> dict[str, Any]:
        out: dict[str, Any] = {"id": t.id, "sessionId": t.context_id, "status": status(t.status)}
        if t.artifacts:
            out["artifacts"] = [artifact(a, index) for index, a in enumerate(t.artifacts)]
        if t.history:
            out["history"] = [message(m) for m in t.history]
        out["metadata"] = t.metadata if t.metadata is not None else {}
        return out

    def message(self, m: Message) -> dict[str, Any]:
        return message(m)

    def send_result(self, result: Task | Message) -> dict[str, Any]:
        # The service never hands a Message to a dialect without message results.
        return self.task(result) if isinstance(result, Task) else message(result)

    def task_list(self, page: TaskPage, tasks: list[Task], page_size: int) -> dict[str, Any]:
        return base.task_list(self.task, page, tasks, page_size)

    def stream_opening(self, result: Task | Message) -> None:
        """v0.1 streams carry status and artifact events only."""
        return None

    def stream_update(self, event: StatusUpdate | ArtifactUpdate, task: Task) -> dict[str, Any]:
        out: dict[str, Any] = {"id": event.task_id}
        if isinstance(event, StatusUpdate):
            out["status"] = status(event.status)
            out["final"] = event.status.state.final
        else:
            ids = [a.artifact_id for a in task.artifacts]
            index = ids.index(event.artifact.artifact_id)
            item = artifact(event.artifact, index)
            if event.append:
                item["append"] = True
            if event.last_chunk:
                item["lastChunk"] = True
            out["artifact"] = item
        if event.metadata is not None:
            out["metadata"] = event.metadata
        return out

    def push_config(self, stored: StoredPushConfig) -> dict[str, Any]:
        """TaskPushNotificationConfig of v0.1: `id` is the task's."""
        out: dict[str, Any] = {
            "id": stored.config.task_id,
            "pushNotificationConfig": v0_push_config(stored.config, with_id=False),
        }
        failure = delivery_failure(stored)
        if failure is not None:
            out["metadata"] = failure
        return out


V01 = V01Dialect()
