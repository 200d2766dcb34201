"""A2A v0.2/v0.3 JSON: `kind` discriminators, lowercase states, bare results.

The `legacy` variant answers clients that sent the v0.1 names (`params.id`, `sessionId`) to
v0.3 methods, as the seeds do: it adds `sessionId` beside `contextId` so they find it.
"""

from __future__ import annotations

from typing import Any

from shared.dialects import base
from shared.dialects.base import delivery_failure, timestamp, v0_push_config
from shared.model import (
    Artifact,
    ArtifactUpdate,
    Message,
    Part,
    StatusUpdate,
    Task,
    TaskStatus,
)
from shared.ports import StoredPushConfig, TaskPage


def data(value: Any) -> dict[str, Any]:
    """A DataPart's `data`: v0.1 and v0.3 define it as an object, so a handler's (or a 1.0
    client's) list or scalar goes out as `{"value": ...}`, which their clients can parse;
    1.0 carries any JSON value as it is."""
    return value if isinstance(value, dict) else {"value": value}


def part(p: Part, discriminator: str = "kind") -> dict[str, Any]:
    out: dict[str, Any]
    if p.text is not None:
        out = {discriminator: "text", "text": p.text}
    elif p.raw is not None or p.url is not None:
        file: dict[str, Any] = {"bytes": p.raw} if p.raw is not None else {"uri": p.url}
        if p.filename:
            file["name"] = p.filename
        if p.media_type:
            file["mimeType"] = p.media_type
        out = {discriminator: "file", "file": file}
    else:
        out = {discriminator: "data", "data": data(p.data)}
    if p.metadata is not None:
        out["metadata"] = p.metadata
    return out


def message(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "message",
        "messageId": m.message_id,
        "role": m.role.value,
        "parts": [part(p) for p in m.parts],
    }
    return base.message_tail(m, out)


def status(s: TaskStatus) -> dict[str, Any]:
    out: dict[str, Any] = {"state": s.state.value, "timestamp": timestamp(s.timestamp)}
    if s.message is not None:
        out["message"] = message(s.message)
    return out


def artifact(a: Artifact) -> dict[str, Any]:
    return base.artifact(a, part)


class V03Dialect(base.V0Common):
    version = "0.3"
    default_history: int | None = None
    message_results = True

    def __init__(self, *, legacy: bool = False) -> None:
        self.legacy = legacy
        self.name = "0.3-legacy" if legacy else "0.3"

    def task(self, t: Task) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "task", "id": t.id, "contextId": t.context_id}
        if self.legacy:
            out["sessionId"] = t.context_id
        out["status"] = status(t.status)
        if t.artifacts:
            out["artifacts"] = [artifact(a) for a in t.artifacts]
        if t.history:
            out["history"] = [message(m) for m in t.history]
        out["metadata"] = t.metadata if t.metadata is not None else {}
        return out

    def message(self, m: Message) -> dict[str, Any]:
        return message(m)

    def send_result(self, result: Task | Message) -> dict[str, Any]:
        return self.task(result) if isinstance(result, Task) else message(result)

    def task_list(self, page: TaskPage, tasks: list[Task], page_size: int) -> dict[str, Any]:
        return base.task_list(self.task, page, tasks, page_size)

    def stream_opening(self, result: Task | Message) -> dict[str, Any]:
        return self.send_result(result)

    def stream_update(self, event: StatusUpdate | ArtifactUpdate, task: Task) -> dict[str, Any]:
        out: dict[str, Any]
        if isinstance(event, StatusUpdate):
            out = {
                "kind": "status-update",
                "taskId": event.task_id,
                "contextId": event.context_id,
                "status": status(event.status),
                "final": event.status.state.final,
            }
        else:
            out = {
                "kind": "artifact-update",
                "taskId": event.task_id,
                "contextId": event.context_id,
                "artifact": artifact(event.artifact),
                "append": event.append,
                "lastChunk": event.last_chunk,
            }
        if event.metadata is not None:
            out["metadata"] = event.metadata
        return out

    def push_config(self, stored: StoredPushConfig) -> dict[str, Any]:
        """A TaskPushNotificationConfig: the config wrapped with its task id."""
        out: dict[str, Any] = {
            "taskId": stored.config.task_id,
            "pushNotificationConfig": v0_push_config(stored.config, with_id=True),
        }
        failure = delivery_failure(stored)
        if failure is not None:
            out["metadata"] = failure
        return out


V03 = V03Dialect()
V03_LEGACY = V03Dialect(legacy=True)
