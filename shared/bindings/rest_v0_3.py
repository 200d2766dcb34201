"""A2A 0.3's HTTP+JSON (REST) binding: the `/v1/...` paths, in v0.3's ProtoJSON.

It owns v0.3's route table (the v0.3 spec's REST section and the HTTP annotations of its
`a2a.v1` proto, as the official 0.3 SDKs serve and call them), how a request's path ids,
query and ProtoJSON body (`message.content`, `fileWithUri`, `{"data": {"data": ...}}`,
`configuration.pushNotification`, a push config as `CreateTaskPushNotificationConfigRequest`
or as the bare `TaskPushNotificationConfig`) become the params of the matching v0.3
JSON-RPC method, and the binding's error body. The operations are
shared.bindings.operations', answered in v0.3's ProtoJSON (shared.dialects.v0_3.V03_PROTO);
a stream sends each frame's bare StreamResponse.

v0.3 left the REST error format open: an error is `{"code", "message", "data"}` with the
A2A error's JSON-RPC code (what the official JS client maps to its error types) and the HTTP
status of the 1.0 binding's table (shared/errors.py). As in the proto, an absent
`configuration.blocking` is false: the official clients send `true` when they wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.bindings import rest, sse
from shared.bindings.json_http import JSON
from shared.bindings.operations import Call, Streamed
from shared.dialects.registry import require_version
from shared.dialects.v0_3 import V03_PROTO
from shared.errors import A2AError, InvalidParamsError, VersionNotSupportedError

PREFIX = "/v1"  # every v0.3 path starts here; no 1.0 path does
# v0.3's HTTP+JSON says application/json; a2a+json is 1.0.1's (a 0.3 client asked for 0.3).
MEDIA_TYPE = JSON

# The placeholders are named after the v0.3 JSON-RPC params they fill (tasks/get's `id`,
# tasks/pushNotificationConfig/get's `pushNotificationConfigId`).
ROUTES = (
    rest.route("POST", "/v1/message:send", "send"),
    rest.route("POST", "/v1/message:stream", "stream"),
    rest.route("GET", "/v1/tasks/{id}", "get"),
    rest.route("POST", "/v1/tasks/{id}:cancel", "cancel"),
    # The proto says GET, the spec's table POST: the official clients use one each.
    rest.route("GET", "/v1/tasks/{id}:subscribe", "subscribe"),
    rest.route("POST", "/v1/tasks/{id}:subscribe", "subscribe"),
    rest.route("POST", "/v1/tasks/{id}/pushNotificationConfigs", "push_set"),
    rest.route("GET", "/v1/tasks/{id}/pushNotificationConfigs", "push_list"),
    rest.route(
        "GET", "/v1/tasks/{id}/pushNotificationConfigs/{pushNotificationConfigId}", "push_get"
    ),
    rest.route(
        "DELETE", "/v1/tasks/{id}/pushNotificationConfigs/{pushNotificationConfigId}", "push_delete"
    ),
    # The authenticated extended card (the public one is at /.well-known/agent-card.json).
    rest.route("GET", "/v1/card", "extended_card"),
)


def match(method: str, path: str) -> tuple[rest.Route, dict[str, str]] | None:
    """The route for a request, with the ids its path carries (None: not a v0.3 route)."""
    return rest.match(method, path, ROUTES)


def allowed(path: str) -> list[str]:
    """The methods a v0.3 path takes (empty: no such path)."""
    return rest.allowed(path, ROUTES)


def dispatch(
    route: rest.Route,
    ids: Mapping[str, str],
    *,
    call: Call,
    query: Mapping[str, str],
    body: bytes,
    content_type: str | None,
    version: str | None,
) -> Any:
    """The operation's answer in v0.3 ProtoJSON: a result (None for a delete), or Streamed
    frames. Raises A2AError for anything wrong."""
    require_version(version)
    if version and version.strip().startswith("1."):
        raise VersionNotSupportedError(
            f"A2A-Version {version} asks for 1.0, but the {PREFIX}/ paths speak 0.3: call the "
            f"1.0 paths without {PREFIX} (POST /message:send), or send A2A-Version: 0.3",
            metadata={"requestedVersion": version, "supportedVersions": "0.3"},
        )
    payload = rest.body_object(body, content_type)
    params = _params(route.operation, payload, query)
    params.update(ids)  # the path names the resource: it wins over anything the body says
    return rest.run_route(route, call, params, V03_PROTO)


def _params(operation: str, body: dict[str, Any], query: Mapping[str, str]) -> dict[str, Any]:
    """The v0.3 JSON-RPC params of a ProtoJSON request."""
    if operation in ("send", "stream"):
        return _send_params(body)
    if operation == "push_set":
        return _push_set_params(body)
    if operation == "get":
        return {k: v for k, v in query.items() if k in ("historyLength", "history_length")}
    return {}  # the rest is named by the path; a body (the proto's `name`) says it again


def _send_params(body: dict[str, Any]) -> dict[str, Any]:
    """A SendMessageRequest: `message` (the proto's `request`), `configuration`, `metadata`."""
    params: dict[str, Any] = {"message": _message(body.get("message", body.get("request")))}
    config = body.get("configuration")
    if config is None:
        config = {}
    if isinstance(config, dict):
        config = dict(config)
        push = config.pop("pushNotification", config.pop("push_notification", None))
        if push is not None:
            config["pushNotificationConfig"] = push
        config.setdefault("blocking", False)  # proto3: absent is false
    params["configuration"] = config
    if "metadata" in body:
        params["metadata"] = body["metadata"]
    return params


def _message(message: Any) -> Any:
    """A proto Message as v0.3 JSON reads it: its `content` parts in v0.3's part forms (the
    rest, `ROLE_USER` included, the reader takes as it is)."""
    if not isinstance(message, dict):
        return message  # the reader names what is missing
    content = message.get("content")
    if not isinstance(content, list):
        return message
    return {**message, "content": [_part(p, i) for i, p in enumerate(content)]}


def _part(part: Any, index: int) -> Any:
    """A proto Part (text, FilePart, DataPart) as v0.3 JSON's part."""
    if not isinstance(part, dict):
        return part
    out = dict(part)
    file = part.get("file")
    if isinstance(file, dict):
        named = {
            "uri": file.get("fileWithUri", file.get("file_with_uri")),
            "bytes": file.get("fileWithBytes", file.get("file_with_bytes")),
            "mimeType": file.get("mimeType", file.get("mime_type")),
            "name": file.get("name"),
        }
        out["file"] = {k: v for k, v in named.items() if v is not None}
    if "data" in part:
        data = part["data"]
        if (
            not isinstance(data, dict)
            or set(data) != {"data"}
            or not isinstance(data["data"], dict)
        ):
            field = f"message.content[{index}].data"
            raise InvalidParamsError(
                f"'{field}' must be a DataPart, an object with one member `data` holding an "
                'object: {"data": {"data": {...}}}',
                field=field,
            )
        out["data"] = data["data"]
    return out


def _push_set_params(body: dict[str, Any]) -> dict[str, Any]:
    """tasks/pushNotificationConfig/set's params (the task id comes from the path): the body
    is a CreateTaskPushNotificationConfigRequest (`parent`, `configId`, `config`, as the
    Python SDK sends) or the TaskPushNotificationConfig itself (`name`,
    `pushNotificationConfig`: the proto's HTTP body, as the JS SDK sends)."""
    wrapper = body.get("config")
    config = wrapper if isinstance(wrapper, dict) else body
    push = config.get("pushNotificationConfig", config.get("push_notification_config"))
    if not isinstance(push, dict):
        return {"pushNotificationConfig": push}  # the reader names what is missing
    named = config.get("name")
    config_id = (
        push.get("id")
        or body.get("configId")
        or body.get("config_id")
        or (named.rsplit("/", 1)[-1] if isinstance(named, str) and "/" in named else None)
    )
    return {"pushNotificationConfig": {**push, "id": config_id} if config_id else push}


def error_body(error: A2AError) -> dict[str, Any]:
    """The binding's error: the A2A error's code and message, and its detail in `data`."""
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    data = V03_PROTO.error_data(error)
    if data:
        body["data"] = data
    return body


def stream_events(streamed: Streamed) -> sse.Events:
    """A stream's server-sent events: each frame the bare StreamResponse."""
    return sse.frame_events(streamed.frames, streamed.dialect, lambda result: result, error_body)
