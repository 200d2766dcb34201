"""The client's A2A calls: the agent card, the protocol version and endpoint it offers, and
each operation in that version's method names and shapes.

Everything the session returns is in A2A 1.0's JSON shapes (`{"task": ...}` stream
responses, `TASK_STATE_*` states, parts with `text`/`data`/`raw`/`url`), whichever version
it spoke: a 0.3 agent's answers are converted on the way in, so the CLI renders one shape.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shared.client.transport import ClientError, Event, Transport
from shared.extensions import DELIVERY_STATUS, HEADER

CARD_PATH = "/.well-known/agent-card.json"
VERSIONS = ("1.0", "0.3")
DEFAULT_API_KEY_HEADER = "X-API-Key"
TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
INTERRUPTED = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})

_V1_METHODS = {
    "send": "SendMessage",
    "stream": "SendStreamingMessage",
    "get": "GetTask",
    "list": "ListTasks",
    "cancel": "CancelTask",
    "subscribe": "SubscribeToTask",
    "push_set": "CreateTaskPushNotificationConfig",
    "push_get": "GetTaskPushNotificationConfig",
    "push_list": "ListTaskPushNotificationConfigs",
    "push_delete": "DeleteTaskPushNotificationConfig",
}
_V03_METHODS = {
    "send": "message/send",
    "stream": "message/stream",
    "get": "tasks/get",
    "cancel": "tasks/cancel",
    "subscribe": "tasks/resubscribe",
    "push_set": "tasks/pushNotificationConfig/set",
    "push_get": "tasks/pushNotificationConfig/get",
    "push_list": "tasks/pushNotificationConfig/list",
    "push_delete": "tasks/pushNotificationConfig/delete",
}


class Session:
    """One agent, reached at `base_url`: its card, read once, picks the version and endpoint
    (`version` forces one of `VERSIONS` the card offers)."""

    def __init__(
        self,
        base_url: str,
        transport: Transport,
        *,
        version: str | None = None,
        api_key: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.transport = transport
        self._wanted = version
        self._api_key = api_key
        self._card: dict[str, Any] | None = None
        self._endpoint: tuple[str, str] | None = None

    @property
    def card(self) -> dict[str, Any]:
        if self._card is None:
            self._card = self.transport.get_json(self.base_url + CARD_PATH)
            if self._api_key is not None:
                # The key goes in the header the card names (X-API-Key unless it says).
                self.transport.headers.pop(DEFAULT_API_KEY_HEADER, None)
                self.transport.headers[api_key_header(self._card)] = self._api_key
        return self._card

    @property
    def version(self) -> str:
        return self._pick()[0]

    @property
    def url(self) -> str:
        return self._pick()[1]

    @property
    def streaming(self) -> bool:
        return bool((self.card.get("capabilities") or {}).get("streaming"))

    def _pick(self) -> tuple[str, str]:
        if self._endpoint is None:
            self._endpoint = pick_endpoint(self.card, self._wanted, self.base_url)
        return self._endpoint

    def _call(
        self, operation: str, params: dict[str, Any], headers: dict[str, str] | None = None
    ) -> Any:
        return self.transport.call(self.url, self._method(operation), params, self.version, headers)

    def _offers(self, uri: str) -> bool:
        """Whether the card lists the extension `uri`."""
        listed = (self.card.get("capabilities") or {}).get("extensions") or []
        return any(isinstance(e, dict) and e.get("uri") == uri for e in listed)

    def _method(self, operation: str) -> str:
        methods = _V1_METHODS if self.version == "1.0" else _V03_METHODS
        if operation not in methods:
            raise ClientError(
                f"{operation.replace('_', ' ')} needs A2A 1.0, and this agent is spoken to in "
                f"{self.version} (its card offers no 1.0 JSON-RPC interface)"
            )
        return methods[operation]

    # -- the operations ---------------------------------------------------------------------

    def send(
        self,
        message: dict[str, Any],
        *,
        return_immediately: bool = False,
        push: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """SendMessage: `{"task": ...}` or `{"message": ...}`."""
        params = self._send_params(message, return_immediately, push)
        result = self._call("send", params)
        return _object(result) if self.version == "1.0" else v03_response(_object(result))

    def stream(
        self, message: dict[str, Any], *, push: dict[str, Any] | None = None
    ) -> Iterator[Event]:
        """SendStreamingMessage: its events, each result a 1.0 StreamResponse."""
        params = self._send_params(message, False, push)
        method = self._method("stream")
        return self._events(self.transport.stream(self.url, method, params, self.version))

    def subscribe(self, task_id: str, last_event_id: str | None = None) -> Iterator[Event]:
        """SubscribeToTask: the task's events after `last_event_id` (all, when None)."""
        method = self._method("subscribe")
        events = self.transport.stream(
            self.url, method, {"id": task_id}, self.version, last_event_id=last_event_id
        )
        return self._events(events)

    def get(self, task_id: str, history_length: int | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"id": task_id}
        if history_length is not None:
            params["historyLength"] = history_length
        task = _object(self._call("get", params))
        return task if self.version == "1.0" else v03_task(task)

    def list_tasks(
        self,
        *,
        context_id: str | None = None,
        state: str | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
    ) -> dict[str, Any]:
        """ListTasks (1.0 only): `{"tasks": [...], "nextPageToken": ...}`."""
        params: dict[str, Any] = {}
        if context_id:
            params["contextId"] = context_id
        if state:
            params["status"] = state_name(state)
        if page_size is not None:
            params["pageSize"] = page_size
        if page_token:
            params["pageToken"] = page_token
        return _object(self._call("list", params))

    def cancel(self, task_id: str) -> dict[str, Any]:
        task = _object(self._call("cancel", {"id": task_id}))
        return task if self.version == "1.0" else v03_task(task)

    def push_add(
        self, task_id: str, url: str, *, token: str | None = None, config_id: str | None = None
    ) -> dict[str, Any]:
        """A push config on the task: the agent POSTs the task's updates to `url`."""
        config: dict[str, Any] = {"url": url}
        if token is not None:
            config["token"] = token
        if config_id is not None:
            config["id"] = config_id
        if self.version == "1.0":
            return _object(self._call("push_set", {"taskId": task_id, **config}))
        result = self._call("push_set", {"taskId": task_id, "pushNotificationConfig": config})
        return v03_push_config(_object(result))

    def push_list(self, task_id: str) -> list[dict[str, Any]]:
        """The task's configs, each with its delivery failure (`delivery_failure`) where the
        agent tells: 0.3 agents of this kit always, 1.0 ones that offer DELIVERY_STATUS."""
        if self.version == "1.0":
            configs: list[dict[str, Any]] = []
            params: dict[str, Any] = {"taskId": task_id}
            ask = {HEADER: DELIVERY_STATUS.uri} if self._offers(DELIVERY_STATUS.uri) else None
            while True:
                page = _object(self._call("push_list", params, ask))
                configs += [c for c in page.get("configs") or [] if isinstance(c, dict)]
                if not page.get("nextPageToken"):
                    return configs
                params["pageToken"] = page["nextPageToken"]
        result = self._call("push_list", {"id": task_id})
        if not isinstance(result, list):
            raise ClientError("the agent answered the push config list with no list")
        return [v03_push_config(c) for c in result if isinstance(c, dict)]

    def push_get(self, task_id: str, config_id: str) -> dict[str, Any]:
        """One config of the task; ClientError (TaskNotFoundError) when it has none by that id."""
        if self.version == "1.0":
            return _object(self._call("push_get", {"taskId": task_id, "id": config_id}))
        result = self._call("push_get", {"id": task_id, "pushNotificationConfigId": config_id})
        return v03_push_config(_object(result))

    def push_remove(self, task_id: str, config_id: str) -> None:
        """Delete the config. A2A's delete succeeds whether or not it was there: `push_get`
        first tells which."""
        if self.version == "1.0":
            self._call("push_delete", {"taskId": task_id, "id": config_id})
        else:
            self._call("push_delete", {"id": task_id, "pushNotificationConfigId": config_id})

    def _send_params(
        self, message: dict[str, Any], return_immediately: bool, push: dict[str, Any] | None
    ) -> dict[str, Any]:
        if self.version == "1.0":
            configuration: dict[str, Any] = {"returnImmediately": return_immediately}
            if push is not None:
                configuration["taskPushNotificationConfig"] = push
            return {"message": message, "configuration": configuration}
        v03: dict[str, Any] = {"blocking": not return_immediately}
        if push is not None:
            v03["pushNotificationConfig"] = push
        return {"message": to_v03_message(message), "configuration": v03}

    def _events(self, events: Iterator[Event]) -> Iterator[Event]:
        for event in events:
            result = _object(event.result)
            yield Event(event.id, result if self.version == "1.0" else v03_response(result))


def pick_endpoint(card: dict[str, Any], wanted: str | None, base_url: str) -> tuple[str, str]:
    """(version, JSON-RPC URL): the first 1.0 JSON-RPC interface of the card, else its 0.3
    one; `wanted` insists on one version."""
    offered: list[tuple[str, str]] = []
    for interface in card.get("supportedInterfaces") or []:
        if not isinstance(interface, dict) or interface.get("protocolBinding") != "JSONRPC":
            continue
        version = _major_minor(interface.get("protocolVersion"))
        if version in VERSIONS and isinstance(interface.get("url"), str):
            offered.append((version, interface["url"]))
    # A 0.3 card: protocolVersion, url and preferredTransport (JSON-RPC unless it says).
    if _major_minor(card.get("protocolVersion")) == "0.3" and isinstance(card.get("url"), str):
        if card.get("preferredTransport", "JSONRPC") == "JSONRPC":
            offered.append(("0.3", card["url"]))
        for extra in card.get("additionalInterfaces") or []:
            if isinstance(extra, dict) and extra.get("transport") == "JSONRPC":
                offered.append(("0.3", str(extra.get("url"))))
    if not offered:
        raise ClientError(
            f"the agent card at {base_url}{CARD_PATH} offers no JSON-RPC interface in A2A "
            f"{' or '.join(VERSIONS)}: this client cannot talk to it"
        )
    for preference in (wanted,) if wanted else VERSIONS:
        for version, url in offered:
            if version == preference:
                return version, url
    names = ", ".join(sorted({v for v, _ in offered}))
    raise ClientError(f"the agent offers A2A {names}, not {wanted}: drop --protocol or pick one")


def api_key_header(card: dict[str, Any]) -> str:
    """The header an API key goes in: the card's apiKey scheme's, else X-API-Key."""
    for scheme in (card.get("securitySchemes") or {}).values():
        if not isinstance(scheme, dict):
            continue
        v1 = scheme.get("apiKeySecurityScheme")
        if isinstance(v1, dict) and isinstance(v1.get("name"), str):
            return str(v1["name"])
        if scheme.get("type") == "apiKey" and isinstance(scheme.get("name"), str):
            return str(scheme["name"])
    return DEFAULT_API_KEY_HEADER


def state_name(state: str) -> str:
    """`input-required`, `INPUT_REQUIRED` or `TASK_STATE_INPUT_REQUIRED`: the 1.0 name."""
    name = state.strip().upper().replace("-", "_")
    if name == "CANCELLED":
        name = "CANCELED"
    return name if name.startswith("TASK_STATE_") else f"TASK_STATE_{name}"


def _major_minor(value: object) -> str | None:
    return ".".join(value.split(".")[:2]) if isinstance(value, str) else None


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ClientError(f"the agent answered with {type(value).__name__}, not an object")
    return value


# -- 0.3 shapes, to and from 1.0's ----------------------------------------------------------


def to_v03_message(message: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in message.items() if k not in ("role", "parts")}
    out["kind"] = "message"
    out["role"] = "agent" if message.get("role") == "ROLE_AGENT" else "user"
    out["parts"] = [_to_v03_part(p) for p in message.get("parts", [])]
    return out


def _to_v03_part(part: dict[str, Any]) -> dict[str, Any]:
    if "text" in part:
        return {"kind": "text", "text": part["text"]}
    if "data" in part:
        data = part["data"]
        # 0.3 data is an object: other JSON goes wrapped, as this kit's agent sends it.
        return {"kind": "data", "data": data if isinstance(data, dict) else {"value": data}}
    file: dict[str, Any] = {"bytes": part["raw"]} if "raw" in part else {"uri": part.get("url")}
    if part.get("filename"):
        file["name"] = part["filename"]
    if part.get("mediaType"):
        file["mimeType"] = part["mediaType"]
    return {"kind": "file", "file": file}


def v03_response(result: dict[str, Any]) -> dict[str, Any]:
    """A 0.3 send result or stream event as a 1.0 StreamResponse."""
    kind = result.get("kind")
    if kind == "task":
        return {"task": v03_task(result)}
    if kind == "message":
        return {"message": v03_message(result)}
    if kind == "status-update":
        update = {k: result.get(k) for k in ("taskId", "contextId")}
        return {"statusUpdate": {**update, "status": _v03_status(result.get("status"))}}
    if kind == "artifact-update":
        update = {k: result.get(k) for k in ("taskId", "contextId", "append", "lastChunk")}
        artifact = _v03_artifact(result.get("artifact"))
        return {"artifactUpdate": {**update, "artifact": artifact}}
    raise ClientError(f"the agent sent a 0.3 result of unknown kind {kind!r}")


def v03_task(task: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in task.items() if k not in ("kind", "status", "artifacts", "history")}
    out["status"] = _v03_status(task.get("status"))
    out["artifacts"] = [_v03_artifact(a) for a in task.get("artifacts") or []]
    out["history"] = [v03_message(m) for m in task.get("history") or [] if isinstance(m, dict)]
    return out


def v03_message(message: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in message.items() if k not in ("kind", "role", "parts")}
    out["role"] = "ROLE_AGENT" if message.get("role") == "agent" else "ROLE_USER"
    out["parts"] = [_v03_part(p) for p in message.get("parts") or [] if isinstance(p, dict)]
    return out


def v03_push_config(config: dict[str, Any]) -> dict[str, Any]:
    """A 0.3 TaskPushNotificationConfig as 1.0's, its delivery failure (this kit's 0.3
    `metadata`) where a 1.0 answer under DELIVERY_STATUS has it."""
    inner = config.get("pushNotificationConfig")
    out = {"taskId": config.get("taskId"), **(inner if isinstance(inner, dict) else {})}
    metadata = config.get("metadata")
    if isinstance(metadata, dict) and "lastError" in metadata:
        out["metadata"] = {DELIVERY_STATUS.uri: metadata}
    return out


def delivery_failure(config: dict[str, Any]) -> dict[str, Any] | None:
    """The config's failure, once the agent gave its deliveries up: `lastError`, `failedAt`."""
    metadata = config.get("metadata")
    failure = metadata.get(DELIVERY_STATUS.uri) if isinstance(metadata, dict) else None
    return failure if isinstance(failure, dict) else None


def _v03_status(status: Any) -> dict[str, Any]:
    if not isinstance(status, dict):
        return {"state": "TASK_STATE_UNSPECIFIED"}
    out = {k: v for k, v in status.items() if k not in ("state", "message")}
    out["state"] = state_name(str(status.get("state", "unspecified")))
    if isinstance(status.get("message"), dict):
        out["message"] = v03_message(status["message"])
    return out


def _v03_artifact(artifact: Any) -> dict[str, Any]:
    if not isinstance(artifact, dict):
        return {"parts": []}
    parts = [_v03_part(p) for p in artifact.get("parts") or [] if isinstance(p, dict)]
    return {**{k: v for k, v in artifact.items() if k != "parts"}, "parts": parts}


def _v03_part(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("kind")
    if kind == "text":
        return {"text": part.get("text", "")}
    if kind == "data":
        return {"data": part.get("data")}
    file: dict[str, Any] = part["file"] if isinstance(part.get("file"), dict) else {}
    out: dict[str, Any] = {"raw": file["bytes"]} if "bytes" in file else {"url": file.get("uri")}
    if file.get("name"):
        out["filename"] = file["name"]
    if file.get("mimeType"):
        out["mediaType"] = file["mimeType"]
    return out
