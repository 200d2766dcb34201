"""A2A v1.0 JSON: ProtoJSON names, TASK_STATE_*/ROLE_* enums, part oneofs, wrapped results,
and errors carrying a list of google.rpc details."""

from __future__ import annotations

from typing import Any

from shared.dialects import base
from shared.dialects.base import timestamp
from shared.errors import A2AError
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

_STATE = {s: "TASK_STATE_" + s.value.upper().replace("-", "_") for s in TaskState}
_STATE[TaskState.UNKNOWN] = "TASK_STATE_UNSPECIFIED"


def part(p: Part) -> dict[str, Any]:
    out: dict[str, Any] = {p.kind: getattr(p, p.kind)}
    if p.filename:
        out["filename"] = p.filename
    if p.media_type:
        out["mediaType"] = p.media_type
    if p.metadata is not None:
        out["metadata"] = p.metadata
    return out


def message(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {
        "messageId": m.message_id,
        "role": "ROLE_USER" if m.role == "user" else "ROLE_AGENT",
        "parts": [part(p) for p in m.parts],
    }
    return base.message_tail(m, out)


def status(s: TaskStatus) -> dict[str, Any]:
    out: dict[str, Any] = {"state": _STATE[s.state], "timestamp": timestamp(s.timestamp)}
    if s.message is not None:
        out["message"] = message(s.message)
    return out


def artifact(a: Artifact) -> dict[str, Any]:
    return base.artifact(a, part)


def task(t: Task) -> dict[str, Any]:
    out: dict[str, Any] = {"id": t.id, "contextId": t.context_id, "status": status(t.status)}
    # ProtoJSON leaves out empty repeated fields.
    if t.artifacts:
        out["artifacts"] = [artifact(a) for a in t.artifacts]
    if t.history:
        out["history"] = [message(m) for m in t.history]
    if t.metadata is not None:
        out["metadata"] = t.metadata
    return out


def push_config(config: PushConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"id": config.id, "taskId": config.task_id, "url": config.url}
    if config.token is not None:
        out["token"] = config.token
    if config.authentication is not None:
        auth: dict[str, Any] = {"scheme": config.authentication.schemes[0]}
        if config.authentication.credentials is not None:
            auth["credentials"] = config.authentication.credentials
        out["authentication"] = auth
    return out


class V1Dialect:
    version = "1.0"
    name = "1.0"
    default_history: int | None = None
    message_results = True

    def task(self, t: Task) -> dict[str, Any]:
        return task(t)

    def message(self, m: Message) -> dict[str, Any]:
        return message(m)

    def send_result(self, result: Task | Message) -> dict[str, Any]:
        return {"task": task(result)} if isinstance(result, Task) else {"message": message(result)}

    def task_list(self, page: TaskPage, tasks: list[Task], page_size: int) -> dict[str, Any]:
        return base.task_list(task, page, tasks, page_size)

    def push_config(self, stored: StoredPushConfig) -> dict[str, Any]:
        return push_config(stored.config)

    def push_configs(self, configs: list[StoredPushConfig], next_page_token: str) -> Any:
        return {
            "configs": [push_config(c.config) for c in configs],
            "nextPageToken": next_page_token,
        }

    def stream_opening(self, result: Task | Message) -> dict[str, Any]:
        return self.send_result(result)

    def stream_update(self, event: StatusUpdate | ArtifactUpdate, task: Task) -> dict[str, Any]:
        """A StreamResponse: `statusUpdate` (no `final` in 1.0) or `artifactUpdate`."""
        out: dict[str, Any] = {"taskId": event.task_id, "contextId": event.context_id}
        if isinstance(event, StatusUpdate):
            out["status"] = status(event.status)
        else:
            out["artifact"] = artifact(event.artifact)
            # ProtoJSON leaves out false booleans.
            if event.append:
                out["append"] = True
            if event.last_chunk:
                out["lastChunk"] = True
        if event.metadata is not None:
            out["metadata"] = event.metadata
        return {"statusUpdate" if isinstance(event, StatusUpdate) else "artifactUpdate": out}

    def error_data(self, error: A2AError) -> Any:
        """An ErrorInfo for A2A errors, a BadRequest naming the field for invalid params."""
        if error.code > -32100:  # the A2A range, -32001 and up
            return [error_info(error)]
        found = bad_request(error)
        return [found] if found else None


def error_info(error: A2AError) -> dict[str, Any]:
    """The google.rpc.ErrorInfo detail of an error."""
    metadata = {k: str(v) for k, v in error.metadata.items()}
    if error.detail:
        metadata.setdefault("detail", error.detail)
    return {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": error.reason,
        "domain": "a2a-protocol.org",
        "metadata": metadata,
    }


def bad_request(error: A2AError) -> dict[str, Any] | None:
    """The google.rpc.BadRequest detail naming the field at fault, when there is one."""
    if not error.field:
        return None
    return {
        "@type": "type.googleapis.com/google.rpc.BadRequest",
        "fieldViolations": [{"field": error.field, "description": error.detail or ""}],
    }


V1 = V1Dialect()
