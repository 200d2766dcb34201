"""A2A v0.2/v0.3 JSON: `kind` discriminators, lowercase states, bare results.

The `legacy` variant answers clients that sent the v0.1 names (`params.id`, `sessionId`) to
v0.3 methods, as the seeds do: it adds `sessionId` beside `contextId` so they find it.

`V03_PROTO` is v0.3's other form, the ProtoJSON of its `a2a.v1` proto that its HTTP+JSON
binding speaks (shared.bindings.rest_v0_3): no `kind`, `TASK_STATE_*` (with `CANCELLED`)
and `ROLE_*` enums, a message's parts in `content`, file parts as `fileWithUri` or
`fileWithBytes`, data parts as `{"data": {"data": {...}}}`, results and stream frames
wrapped (`task`, `message`, `statusUpdate`, `artifactUpdate`), push configs named
`tasks/{id}/pushNotificationConfigs/{configId}`. The proto has no `referenceTaskIds`.
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
    PushConfig,
    StatusUpdate,
    Task,
    TaskState,
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


# The v0.3 proto's TaskState: v1.0's names, but CANCELLED.
_PROTO_STATE = {s: "TASK_STATE_" + s.value.upper().replace("-", "_") for s in TaskState}
_PROTO_STATE[TaskState.CANCELED] = "TASK_STATE_CANCELLED"
_PROTO_STATE[TaskState.UNKNOWN] = "TASK_STATE_UNSPECIFIED"


def proto_part(p: Part) -> dict[str, Any]:
    out: dict[str, Any]
    if p.text is not None:
        out = {"text": p.text}
    elif p.raw is not None or p.url is not None:
        file: dict[str, Any] = (
            {"fileWithBytes": p.raw} if p.raw is not None else {"fileWithUri": p.url}
        )
        if p.media_type:
            file["mimeType"] = p.media_type
        if p.filename:
            file["name"] = p.filename
        out = {"file": file}
    else:
        out = {"data": {"data": data(p.data)}}  # a DataPart holds a Struct: an object
    if p.metadata is not None:
        out["metadata"] = p.metadata
    return out


def proto_message(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"messageId": m.message_id}
    if m.context_id:
        out["contextId"] = m.context_id
    if m.task_id:
        out["taskId"] = m.task_id
    out["role"] = "ROLE_USER" if m.role == "user" else "ROLE_AGENT"
    out["content"] = [proto_part(p) for p in m.parts]
    if m.metadata is not None:
        out["metadata"] = m.metadata
    if m.extensions:
        out["extensions"] = list(m.extensions)
    return out


def proto_status(s: TaskStatus) -> dict[str, Any]:
    out: dict[str, Any] = {"state": _PROTO_STATE[s.state], "timestamp": timestamp(s.timestamp)}
    if s.message is not None:
        out["message"] = proto_message(s.message)
    return out


def push_config_name(config: PushConfig) -> str:
    """The resource name the v0.3 proto gives a push config."""
    return f"tasks/{config.task_id}/pushNotificationConfigs/{config.id}"


class V03ProtoDialect(base.V0Common):
    """v0.3's ProtoJSON. Its name is v0.3's: what it stores (tasks, push configs) is read back,
    and delivered to webhooks, as v0.3 JSON-RPC's."""

    version = "0.3"
    name = "0.3"
    default_history: int | None = None
    message_results = True

    def task(self, t: Task) -> dict[str, Any]:
        out: dict[str, Any] = {"id": t.id, "contextId": t.context_id}
        out["status"] = proto_status(t.status)
        if t.artifacts:
            out["artifacts"] = [base.artifact(a, proto_part) for a in t.artifacts]
        if t.history:
            out["history"] = [proto_message(m) for m in t.history]
        if t.metadata is not None:
            out["metadata"] = t.metadata
        return out

    def message(self, m: Message) -> dict[str, Any]:
        return proto_message(m)

    def send_result(self, result: Task | Message) -> dict[str, Any]:
        """A SendMessageResponse (and a stream's first StreamResponse)."""
        if isinstance(result, Task):
            return {"task": self.task(result)}
        return {"message": proto_message(result)}

    def task_list(self, page: TaskPage, tasks: list[Task], page_size: int) -> dict[str, Any]:
        return base.task_list(self.task, page, tasks, page_size)

    def stream_opening(self, result: Task | Message) -> dict[str, Any]:
        return self.send_result(result)

    def stream_update(self, event: StatusUpdate | ArtifactUpdate, task: Task) -> dict[str, Any]:
        out: dict[str, Any] = {"taskId": event.task_id, "contextId": event.context_id}
        if isinstance(event, StatusUpdate):
            out["status"] = proto_status(event.status)
            out["final"] = event.status.state.final
        else:
            out["artifact"] = base.artifact(event.artifact, proto_part)
            out["append"] = event.append
            out["lastChunk"] = event.last_chunk
        if event.metadata is not None:
            out["metadata"] = event.metadata
        key = "statusUpdate" if isinstance(event, StatusUpdate) else "artifactUpdate"
        return {key: out}

    def push_config(self, stored: StoredPushConfig) -> dict[str, Any]:
        # The v0.3 proto's TaskPushNotificationConfig has no metadata: a delivery failure
        # shows in the v0.3 JSON-RPC answers only.
        return {
            "name": push_config_name(stored.config),
            "pushNotificationConfig": v0_push_config(stored.config, with_id=True),
        }

    def push_configs(self, configs: list[StoredPushConfig], next_page_token: str) -> Any:
        """A ListTaskPushNotificationConfigResponse."""
        return {"configs": [self.push_config(c) for c in configs]}


V03_PROTO = V03ProtoDialect()
