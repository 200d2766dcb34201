"""The client's A2A calls: the agent card (from the reference the caller gave), the interface
picked from it, and each operation in that interface's version's method names and shapes.

The card reference is a bare host or origin (the well-known path is appended), a full card
URL (used as it is) or a local file. The interface is the card's first JSON-RPC one in A2A
1.0 (its `supportedInterfaces` are in the agent's order of preference), or the first of the
caller's `--transport` order the card offers; 0.3 only when the caller asks for it
(`--a2a-version 0.3`: the A2A CLI specification, section 13.2, puts nothing below 1.0 without
an explicit opt-in). Credentials are trusted to the card's own origin (`transport.py`).

Everything the session returns is in A2A 1.0's JSON shapes (`{"task": ...}` stream
responses, `TASK_STATE_*` states, parts with `text`/`data`/`raw`/`url`), whichever version
it spoke: a 0.3 agent's answers are converted on the way in, so the CLI renders one shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.client.errors import CARD_INVALID, CARD_NOT_FOUND, INTERNAL, ClientError
from shared.client.shapes import items, mapping, objects
from shared.client.transport import Event, Transport, origin
from shared.extensions import DELIVERY_STATUS, HEADER

CARD_PATH = "/.well-known/agent-card.json"
VERSIONS = ("1.0", "0.3")
DEFAULT_VERSION = "1.0"
# The bindings this client speaks, and the names `--transport` accepts for each binding.
SUPPORTED_BINDINGS = ("JSONRPC",)
BINDING_NAMES = {"JSONRPC": "JSONRPC", "JSON-RPC": "JSONRPC", "HTTP+JSON": "HTTP+JSON"}
BINDING_NAMES |= {"REST": "HTTP+JSON", "GRPC": "GRPC"}
DEFAULT_API_KEY_HEADER = "X-API-Key"
MAX_CARD_FILE_BYTES = 1024 * 1024  # a local card file: cards are a few KB
TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
INTERRUPTED = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})

# A header a card may name for the API key: a plain name, never one that means something
# else to HTTP, a proxy, a browser or A2A (a card must not make the client put the key in a
# Cookie, an Authorization of its choosing, a Host or a forwarding header).
_HEADER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
_REFUSED_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "authorization",
        "connection",
        "cookie",
        "expect",
        "forwarded",
        "host",
        "keep-alive",
        "last-event-id",
        "origin",
        "range",
        "referer",
        "set-cookie",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "via",
    }
)
_REFUSED_PREFIXES = ("a2a-", "access-control-", "content-", "proxy-", "sec-", "x-forwarded-")

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


@dataclass(frozen=True)
class CardSource:
    """Where the card is: a URL (`url`) or a local file (`path`)."""

    url: str | None = None
    path: Path | None = None

    @property
    def origin(self) -> str | None:
        """The origin the card comes from: the one its credentials are trusted to."""
        return origin(self.url) if self.url else None

    def __str__(self) -> str:
        return self.url or str(self.path)


def card_source(reference: str) -> CardSource:
    """The A2A CLI specification's card reference (section 7.2): a `file://` URL, a path
    that exists or is written as one (`/`, `./`, `../`, `~`), an http(s) URL (the well-known
    path appended when it has no path of its own), or a bare host (https, http for a
    loopback one)."""
    if reference.startswith("file://"):
        return CardSource(path=Path(reference.removeprefix("file://")))
    if "://" in reference:
        scheme, rest = reference.split("://", 1)
        if "/" not in rest.rstrip("/"):
            return CardSource(url=f"{scheme}://{rest.rstrip('/')}{CARD_PATH}")
        return CardSource(url=reference)
    if Path(reference).exists() or reference.startswith(("/", "./", "../", "~")):
        return CardSource(path=Path(reference).expanduser())
    host = reference.split("/", 1)[0].rsplit(":", 1)[0].strip("[]")
    loopback = host in ("localhost", "::1") or host.startswith("127.")
    return card_source(f"{'http' if loopback else 'https'}://{reference}")


@dataclass(frozen=True)
class Interface:
    """One AgentInterface of the card: binding, version (major.minor), URL, tenant."""

    binding: str
    version: str
    url: str
    tenant: str | None = None

    def __str__(self) -> str:
        return f"{self.binding} {self.version} {self.url}"


class Session:
    """One agent, from its card reference: the card, read once, picks the interface
    (`version` and `transports`, the caller's preferences, narrow the choice); `trusted`
    names origins beyond the card's own that may receive the credentials."""

    def __init__(
        self,
        reference: str,
        transport: Transport,
        *,
        version: str | None = None,
        transports: Sequence[str] = (),
        api_key: str | None = None,
        trusted: Iterable[str] = (),
    ) -> None:
        self.source = card_source(reference)
        self.transport = transport
        self._wanted = version
        self._transports = list(transports)
        self._api_key = api_key
        self._card: dict[str, Any] | None = None
        self._interface: Interface | None = None
        transport.trusted |= {o for o in (self.source.origin, *trusted) if o}

    @property
    def card(self) -> dict[str, Any]:
        if self._card is None:
            self._card = self._read_card()
            if self._api_key is not None:
                # The key goes in the header the card names (X-API-Key unless it says).
                self.transport.credentials.pop(DEFAULT_API_KEY_HEADER, None)
                self.transport.credentials[api_key_header(self._card)] = self._api_key
        return self._card

    def _read_card(self) -> dict[str, Any]:
        if self.source.path is not None:
            path = self.source.path
            try:
                with path.open("rb") as file:
                    text = file.read(MAX_CARD_FILE_BYTES + 1)
            except OSError as exc:
                raise ClientError(
                    f"cannot read the card {path}: {exc.strerror or exc}",
                    error=CARD_NOT_FOUND,
                    hint="--agent-card takes a host, a card URL or a card file",
                ) from None
            if len(text) > MAX_CARD_FILE_BYTES:
                raise ClientError(
                    f"the card {path} is over {MAX_CARD_FILE_BYTES} bytes", error=CARD_INVALID
                )
            try:
                card = json.loads(text)
            except ValueError as exc:
                raise ClientError(
                    f"the card {path} is not JSON: {exc}", error=CARD_INVALID
                ) from None
        else:
            url = str(self.source.url)
            try:
                card = self.transport.get_json(url, self._wanted or DEFAULT_VERSION)
            except ClientError as exc:
                if exc.code == 404:
                    raise ClientError(
                        f"no agent card at {url} (HTTP 404)",
                        error=CARD_NOT_FOUND,
                        hint="give the agent's origin (http://host:port) or its card's full URL",
                        code=404,
                    ) from None
                if exc.error == INTERNAL and exc.code is None:  # not JSON, not an object
                    raise ClientError(str(exc), error=CARD_INVALID) from None
                raise
        if not isinstance(card, dict) or not isinstance(card.get("name"), str):
            raise ClientError(
                f"the card at {self.source} is not an agent card (no name)", error=CARD_INVALID
            )
        return card

    @property
    def interface(self) -> Interface:
        if self._interface is None:
            self._interface = pick_interface(
                self.card, self._wanted, self._transports, str(self.source)
            )
        return self._interface

    @property
    def version(self) -> str:
        return self.interface.version

    @property
    def url(self) -> str:
        return self.interface.url

    @property
    def streaming(self) -> bool:
        return bool(mapping(self.card.get("capabilities")).get("streaming"))

    def _call(
        self, operation: str, params: dict[str, Any], headers: dict[str, str] | None = None
    ) -> Any:
        method = self._method(operation)
        return self.transport.call(self.url, method, self._routed(params), self.version, headers)

    def _routed(self, params: dict[str, Any]) -> dict[str, Any]:
        """The request with the interface's tenant, exactly as the card declares it, when it
        declares one (A2A 1.0 section 8.3.2)."""
        tenant = self.interface.tenant
        return {**params, "tenant": tenant} if tenant is not None else params

    def _offers(self, uri: str) -> bool:
        """Whether the card lists the extension `uri`."""
        listed = items(mapping(self.card.get("capabilities")).get("extensions"))
        return any(isinstance(e, dict) and e.get("uri") == uri for e in listed)

    def _method(self, operation: str) -> str:
        methods = _V1_METHODS if self.version == "1.0" else _V03_METHODS
        if operation not in methods:
            raise ClientError(
                f"{operation.replace('_', ' ')} needs A2A 1.0, and this agent is spoken to in "
                f"{self.version} (--a2a-version)",
                error="UnsupportedOperationError",
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
        params = self._routed(self._send_params(message, False, push))
        method = self._method("stream")
        return self._events(self.transport.stream(self.url, method, params, self.version))

    def subscribe(self, task_id: str, last_event_id: str | None = None) -> Iterator[Event]:
        """SubscribeToTask: the task's events after `last_event_id` (all, when None)."""
        method = self._method("subscribe")
        events = self.transport.stream(
            self.url,
            method,
            self._routed({"id": task_id}),
            self.version,
            last_event_id=last_event_id,
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
                configs += objects(page.get("configs"))
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


def pick_interface(
    card: dict[str, Any], wanted: str | None, transports: Sequence[str], where: str
) -> Interface:
    """The interface to speak: among the card's interfaces this client speaks, in `wanted`
    (else 1.0), the first of the caller's `transports` order, else the card's first."""
    offered = card_interfaces(card)
    allowed = (wanted,) if wanted else (DEFAULT_VERSION,)
    usable = [i for i in offered if i.binding in SUPPORTED_BINDINGS and i.version in allowed]
    if not usable:
        spoken = sorted({i.version for i in offered if i.binding in SUPPORTED_BINDINGS})
        if spoken:
            raise ClientError(
                f"the agent card at {where} offers A2A {', '.join(spoken)} over JSON-RPC, "
                f"not {allowed[0]}",
                error="VersionNotSupportedError",
                hint=(
                    "--a2a-version 0.3 speaks the legacy version (never chosen unless asked)"
                    if "0.3" in spoken
                    else f"--a2a-version {spoken[-1]}"
                ),
            )
        raise ClientError(
            f"the agent card at {where} offers no JSON-RPC interface in A2A "
            f"{' or '.join(VERSIONS)}: this client speaks JSON-RPC only",
            error=CARD_INVALID if not offered else INTERNAL,
        )
    for preference in transports:
        for interface in usable:
            if interface.binding == preference:
                return interface
    return usable[0]


def card_interfaces(card: dict[str, Any]) -> list[Interface]:
    """The card's interfaces in its order: 1.0's `supportedInterfaces`, then a 0.3 card's
    `url` (its `preferredTransport`) and `additionalInterfaces`; only http(s) URLs."""
    found: list[Interface] = []
    for entry in items(card.get("supportedInterfaces")):
        if not isinstance(entry, dict):
            continue
        binding = BINDING_NAMES.get(str(entry.get("protocolBinding")).upper())
        version = _major_minor(entry.get("protocolVersion"))
        tenant = entry.get("tenant")
        if binding and version and origin(str(entry.get("url"))):
            tenant = tenant if isinstance(tenant, str) else None
            found.append(Interface(binding, version, str(entry["url"]), tenant))
    if _major_minor(card.get("protocolVersion")) == "0.3" and origin(str(card.get("url"))):
        preferred = BINDING_NAMES.get(str(card.get("preferredTransport", "JSONRPC")).upper())
        if preferred:
            found.append(Interface(preferred, "0.3", str(card["url"])))
        for extra in items(card.get("additionalInterfaces")):
            if isinstance(extra, dict) and origin(str(extra.get("url"))):
                binding = BINDING_NAMES.get(str(extra.get("transport")).upper())
                if binding:
                    found.append(Interface(binding, "0.3", str(extra["url"])))
    return list(dict.fromkeys(found))  # a hybrid card lists its 0.3 interfaces twice


def api_key_header(card: dict[str, Any]) -> str:
    """The header an API key goes in: the card's apiKey scheme's, else X-API-Key; a scheme
    that puts it in a cookie, the query or a header with another meaning is refused."""
    for scheme in mapping(card.get("securitySchemes")).values():
        if not isinstance(scheme, dict):
            continue
        v1 = scheme.get("apiKeySecurityScheme")
        if isinstance(v1, dict):
            return _checked_header(v1.get("name"), v1.get("location", "header"))
        if scheme.get("type") == "apiKey":
            return _checked_header(scheme.get("name"), scheme.get("in", "header"))
    return DEFAULT_API_KEY_HEADER


def _checked_header(name: object, location: object) -> str:
    shown = json.dumps(name)[:80]
    if str(location).lower() != "header":
        problem = f"in the {json.dumps(location)[:20]} {shown}, not in a header"
    elif not isinstance(name, str) or not _HEADER_NAME.match(name):
        problem = f"in the header {shown}, which is no plain header name"
    elif name.lower() in _REFUSED_HEADERS or name.lower().startswith(_REFUSED_PREFIXES):
        problem = f"in the header {shown}, which means something else to HTTP"
    else:
        return name
    raise ClientError(
        f"the card asks for the API key {problem}: this client puts a key only in a plain "
        "header of its own name (X-API-Key, X-Goog-Api-Key, ...)",
        error=CARD_INVALID,
        hint="if you trust this agent with the key there, send it yourself: --svc-param NAME:KEY",
    )


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
    out["artifacts"] = [_v03_artifact(a) for a in items(task.get("artifacts"))]
    out["history"] = [v03_message(m) for m in objects(task.get("history"))]
    return out


def v03_message(message: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in message.items() if k not in ("kind", "role", "parts")}
    out["role"] = "ROLE_AGENT" if message.get("role") == "agent" else "ROLE_USER"
    out["parts"] = [_v03_part(p) for p in objects(message.get("parts"))]
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
    parts = [_v03_part(p) for p in objects(artifact.get("parts"))]
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
