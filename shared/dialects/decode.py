"""Reading request parameters of any A2A version into canonical requests (shared.requests).

One lenient reader serves every dialect, because real clients mix them: v0.1 parts with
`type`, v0.3 parts with `kind`, v1.0 parts with no discriminator, v0.x enum strings sent to
v1.0 methods, snake_case ProtoJSON names, and the seeds' informal forms (a message's parts
under `data`, `params.taskId` as the task selector, a v0.1 `params.id` on `message/send`).
Whatever cannot be read raises InvalidParamsError naming the wire field. Where the service may
refuse a request attribute that more than one wire field can carry (a send's task id), the
reader also says which field it came from (WireFields), so the error names what was sent.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from shared import ids
from shared.errors import InvalidParamsError
from shared.limits import (
    DEFAULT_LIMITS,
    MAX_PUSH_SCHEME_CHARS,
    MAX_PUSH_SCHEMES,
    Limits,
    check_message,
    check_metadata,
    check_parts,
    check_push_secret,
    check_push_url_text,
)
from shared.model import (
    Message,
    Part,
    PushAuthentication,
    PushConfig,
    Role,
    TaskState,
    new_id,
)
from shared.requests import (
    CancelRequest,
    DeletePushConfigRequest,
    GetPushConfigRequest,
    InlinePushConfig,
    ListPushConfigsRequest,
    ListTasksRequest,
    MessagesRequest,
    SendRequest,
    SetPushConfigRequest,
    SubscribeRequest,
    TaskSelector,
)

# A canonical request attribute (as the service names it in errors) -> the wire field read.
WireFields = dict[str, str]

# A client's message is the user's, whatever role it names. The official a2a-python server
# (DefaultRequestHandler, TaskManager.update_with_message) accepts a ROLE_AGENT message and
# keeps it as sent; we accept it too, so the clients that send it keep working (an agent
# calling another often names itself `agent`), but store it as the user's: kept as sent, a
# handler (and the ADK adapter's rebuilt session) would read the client's words as its own.
_ROLES = {"user": Role.USER, "role_user": Role.USER, "agent": Role.USER, "role_agent": Role.USER}

_STATES: dict[str, TaskState] = {s.value: s for s in TaskState}
_STATES.update({f"task_state_{s.value.replace('-', '_')}": s for s in TaskState})
_STATES["task_state_cancelled"] = TaskState.CANCELED  # the v0.3 proto's spelling
_STATES["cancelled"] = TaskState.CANCELED


def _get(obj: Mapping[str, Any], *names: str) -> Any:
    """The first of `names` present in `obj` (camelCase first, then its aliases)."""
    for name in names:
        if name in obj:
            return obj[name]
    return None


def _str(value: Any, field: str, *, required: bool = False) -> str | None:
    if value is None:
        if required:
            raise InvalidParamsError(f"'{field}' is required", field=field)
        return None
    if not isinstance(value, str):
        raise InvalidParamsError(f"'{field}' must be a string", field=field)
    return value


def _id(value: Any, field: str, *, blank_absent: bool = False) -> str | None:
    """An id a client chose, by the one id rule (shared.ids); None when absent (and, with
    `blank_absent`, when empty: where an empty string always meant "none given")."""
    text = _str(value, field)
    if text is None or (blank_absent and not text):
        return None
    problem = ids.problem(text)
    if problem is not None:
        raise InvalidParamsError(f"'{field}' {problem}", field=field)
    return text


def _ids(value: Any, field: str) -> tuple[str, ...]:
    """A list of ids, each by the one id rule."""
    return tuple(_id(v, f"{field}[{i}]") or "" for i, v in enumerate(_strings(value, field)))


def _object(value: Any, field: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidParamsError(f"'{field}' must be an object", field=field)
    return value


def _int(value: Any, field: str, *, low: int | None = None, high: int | None = None) -> int | None:
    """An integer, also as ProtoJSON's decimal string, within [low, high] when given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidParamsError(f"'{field}' must be an integer", field=field)
    try:
        number = int(value)
    except ValueError:
        raise InvalidParamsError(f"'{field}' must be an integer", field=field) from None
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = f"from {low}" + (f" to {high}" if high is not None else " up")
        raise InvalidParamsError(f"'{field}' must be {bounds}, got {number}", field=field)
    return number


def _bool(value: Any, field: str) -> bool | None:
    if value is None:
        return None
    if isinstance(value, str) and value in ("true", "false"):  # query strings
        return value == "true"
    if not isinstance(value, bool):
        raise InvalidParamsError(f"'{field}' must be true or false", field=field)
    return value


# ProtoJSON's bytes: base64 in the standard or the URL-safe alphabet, padded or not. Anything
# else stored as a part would be served back as a value no client can read.
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]*")


def _base64(value: Any, field: str) -> str | None:
    text = _str(value, field)
    if text is None:
        return None
    body = text.rstrip("=")
    padding = len(text) - len(body)
    if (
        not _BASE64.fullmatch(body)
        or len(body) % 4 == 1
        or (padding and (padding > 2 or len(text) % 4))
    ):
        raise InvalidParamsError(
            f"'{field}' is not base64: send the bytes base64-encoded (RFC 4648, the standard or"
            " the URL-safe alphabet, padding optional)",
            field=field,
        )
    return text


def _informal_bytes(value: Any, field: str) -> str | None:
    """The seeds' informal `file.data`: base64 taken as sent; any other text (the seeds send
    "<base64-encoded-content>") is the content itself, stored base64-encoded so that every
    reader gets bytes it can decode."""
    text = _str(value, field) or ""
    try:
        return _base64(text, field)
    except InvalidParamsError:
        return base64.b64encode(text.encode()).decode("ascii")


def _strings(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidParamsError(f"'{field}' must be a list of strings", field=field)
    return tuple(value)


def part(obj: Any, field: str) -> Part:
    """A part in any version's form."""
    if not isinstance(obj, dict):
        raise InvalidParamsError(f"'{field}' must be an object", field=field)
    kind = _get(obj, "kind", "type")
    # Each member checked as it is read, its field named only when it is there (most are not).
    metadata = obj.get("metadata")
    if metadata is not None:
        _object(metadata, f"{field}.metadata")
    filename = obj.get("filename")
    if filename is not None:
        _str(filename, f"{field}.filename")
    media_type = _get(obj, "mediaType", "media_type")
    if media_type is not None:
        _str(media_type, f"{field}.mediaType")
    common: dict[str, Any] = {"metadata": metadata, "filename": filename, "media_type": media_type}
    if kind == "file" or (kind is None and "file" in obj):
        return _file_part(obj.get("file"), f"{field}.file", common)
    if kind == "text" or (kind is None and "text" in obj):
        text = obj.get("text")
        if not isinstance(text, str):
            _str(text, f"{field}.text", required=True)  # raises: absent, or not a string
        return Part(text=text, **common)
    if kind == "data" or (kind is None and "data" in obj):
        if "data" not in obj:
            raise InvalidParamsError(f"'{field}.data' is required", field=f"{field}.data")
        return Part(data=obj["data"], **common)
    if kind is None and "raw" in obj:
        raw = _str(obj["raw"], f"{field}.raw", required=True)
        return Part(raw=_base64(raw, f"{field}.raw"), **common)
    if kind is None and "url" in obj:
        return Part(url=_str(obj["url"], f"{field}.url", required=True), **common)
    if kind is not None:
        raise InvalidParamsError(
            f"'{field}.kind' must be text, file or data, got {kind!r}", field=f"{field}.kind"
        )
    raise InvalidParamsError(f"'{field}' has none of text, raw, url, data or file", field=field)


def _file_part(file: Any, field: str, common: dict[str, Any]) -> Part:
    """A v0.x file part: `bytes` (or the seeds' `data`) inline, or `uri`."""
    obj = _object(file, field)
    if obj is None:
        raise InvalidParamsError(f"'{field}' is required", field=field)
    common = dict(common)
    common["filename"] = _str(obj.get("name"), f"{field}.name") or common["filename"]
    mime = _str(_get(obj, "mimeType", "mime_type"), f"{field}.mimeType")
    common["media_type"] = mime or common["media_type"]
    if obj.get("bytes") is not None:
        return Part(raw=_base64(obj["bytes"], f"{field}.bytes"), **common)
    if obj.get("data") is not None:
        return Part(raw=_informal_bytes(obj["data"], f"{field}.data"), **common)
    uri = _get(obj, "uri", "url")
    if uri is not None:
        return Part(url=_str(uri, f"{field}.uri"), **common)
    raise InvalidParamsError(f"'{field}' needs bytes or uri", field=field)


def message(obj: Any, field: str, limits: Limits = DEFAULT_LIMITS) -> Message:
    """A message in any version's form; a missing v0.1 messageId gets a fresh one. Refused
    over `limits` (parts counted before they are read)."""
    if not isinstance(obj, dict):
        raise InvalidParamsError(f"'{field}' is required and must be an object", field=field)
    role_value = obj.get("role")
    role = _ROLES.get(role_value.lower()) if isinstance(role_value, str) else None
    if role is None:
        _str(role_value, f"{field}.role", required=True)  # absent, or not a string
        raise InvalidParamsError(
            f"'{field}.role' must be user or agent, got {role_value!r}", field=f"{field}.role"
        )
    raw_parts = _get(obj, "parts", "content")
    parts_field = f"{field}.parts"
    if raw_parts is None and isinstance(obj.get("data"), list):
        raw_parts, parts_field = obj["data"], f"{field}.data"  # seed 003's informal form
    if not isinstance(raw_parts, list) or not raw_parts:
        raise InvalidParamsError(f"'{parts_field}' must be a non-empty list", field=parts_field)
    check_parts(len(raw_parts), limits, parts_field)
    # The optional members' fields are named only when they are there (most are not).
    message_id = _get(obj, "messageId", "message_id")
    context_id = _get(obj, "contextId", "context_id")
    task_id = _get(obj, "taskId", "task_id")
    references = _get(obj, "referenceTaskIds", "reference_task_ids")
    extensions = obj.get("extensions")
    metadata = obj.get("metadata")
    read = Message(
        message_id=(None if message_id is None else _id(message_id, f"{field}.messageId"))
        or new_id(),
        role=role,
        parts=tuple(part(p, f"{parts_field}[{i}]") for i, p in enumerate(raw_parts)),
        context_id=None if context_id is None else _id(context_id, f"{field}.contextId"),
        task_id=None if task_id is None else _id(task_id, f"{field}.taskId"),
        reference_task_ids=()
        if references is None
        else _ids(references, f"{field}.referenceTaskIds"),
        extensions=() if extensions is None else _strings(extensions, f"{field}.extensions"),
        metadata=None if metadata is None else _object(metadata, f"{field}.metadata"),
    )
    check_message(read, limits, field)
    return read


def state(value: Any, field: str) -> TaskState | None:
    if value is None or value == "":
        return None
    found = _STATES.get(str(value).lower()) if isinstance(value, str) else None
    if found is None or found is TaskState.UNKNOWN:
        raise InvalidParamsError(f"'{field}' is not a task state: {value!r}", field=field)
    return found


# The names a push config sent with a message goes by in `params.configuration`, in order.
_INLINE_PUSH = (
    "taskPushNotificationConfig",
    "task_push_notification_config",
    "pushNotificationConfig",
)


def send(
    params: Mapping[str, Any], default_history: int | None, limits: Limits = DEFAULT_LIMITS
) -> tuple[SendRequest, WireFields]:
    """The send request, and the wire fields its task and context ids came from."""
    msg = message(params.get("message"), "params.message", limits)
    config = _object(params.get("configuration"), "params.configuration") or {}
    legacy_id = _id(params.get("id"), "params.id")
    alias_id = _id(params.get("taskId"), "params.taskId")
    task_id: str | None = None
    task_field = ""
    for named, wire in (
        (msg.task_id, "params.message.taskId"),
        (alias_id, "params.taskId"),
        (legacy_id, "params.id"),
    ):
        if named is None:
            continue
        if task_id is None:
            task_id, task_field = named, wire
        elif named != task_id:
            raise InvalidParamsError(
                "the task id is given twice with different values "
                "(params.message.taskId, params.taskId, params.id)",
                field="params.message.taskId",
            )
    # v0.1's sessionId only groups tasks, and v0.1 clients echo whatever they last saw: it
    # names the context of a new task but never contradicts an existing one.
    session = _id(params.get("sessionId"), "params.sessionId")
    history = None
    if config:
        history = _int(
            _get(config, "historyLength", "history_length"),
            "params.configuration.historyLength",
            low=0,
        )
    if history is None and "historyLength" in params:  # v0.1 put historyLength beside the message
        history = _int(params["historyLength"], "params.historyLength", low=0)
    return_immediately = blocking = None
    push: dict[str, Any] | None = None
    push_field = ""
    if config:
        return_immediately = _bool(
            _get(config, "returnImmediately", "return_immediately"),
            "params.configuration.returnImmediately",
        )
        blocking = _bool(config.get("blocking"), "params.configuration.blocking")
        # Every form present is checked; the first one present is the config.
        for name in _INLINE_PUSH:
            if config.get(name) is not None:
                found = _object(config[name], f"params.configuration.{name}")
                if push is None:
                    push, push_field = found, f"params.configuration.{name}"
    if params.get("pushNotification") is not None:
        found = _object(params["pushNotification"], "params.pushNotification")
        if push is None:
            push, push_field = found, "params.pushNotification"
    metadata = params.get("metadata")
    if metadata is not None:
        check_metadata(_object(metadata, "params.metadata"), limits, "params.metadata")
    request = SendRequest(
        message=msg,
        task_id=task_id,
        context_id=msg.context_id,
        session_id=session,
        create_if_missing=legacy_id is not None and msg.task_id is None and alias_id is None,
        history_length=history if history is not None else default_history,
        blocking=not return_immediately
        if return_immediately is not None
        else blocking is not False,
        metadata=metadata,
        push_config=None if push is None else _inline_push_config(push, push_field),
    )
    fields = {"task_id": task_field} if task_id is not None else {}
    fields["context_id"] = "params.message.contextId"
    return request, fields


def task_selector(params: Mapping[str, Any], default_history: int | None) -> TaskSelector:
    """`params.id` (every version) or the seeds' `params.taskId`."""
    task_id = _id(params.get("id"), "params.id", blank_absent=True) or _id(
        params.get("taskId"), "params.taskId", blank_absent=True
    )
    if not task_id:
        raise InvalidParamsError("'params.id' is required", field="params.id")
    history = _int(_get(params, "historyLength", "history_length"), "params.historyLength", low=0)
    return TaskSelector(task_id, history if history is not None else default_history)


def cancel(params: Mapping[str, Any]) -> CancelRequest:
    """A task to cancel, named as a reader names it (a historyLength is read, not used)."""
    return CancelRequest(task_selector(params, None).task_id)


def messages(params: Mapping[str, Any]) -> MessagesRequest:
    return MessagesRequest(task_selector(params, None).task_id)


def subscribe(params: Mapping[str, Any], last_event_id: str | None) -> SubscribeRequest:
    """The task to follow and where a resumed stream starts."""
    task_id = task_selector(params, None).task_id
    return SubscribeRequest(task_id, resume_point(params, last_event_id))


def resume_point(params: Mapping[str, Any], last_event_id: str | None) -> int | None:
    """Where a resumed stream starts: after the Last-Event-ID header's sequence number, or
    `params.lastEventId` for clients that cannot set headers (None: from the start)."""
    if last_event_id is not None and last_event_id.strip():
        return _int(last_event_id.strip(), "Last-Event-ID", low=0)
    return _int(_get(params, "lastEventId", "last_event_id"), "params.lastEventId", low=0)


def list_tasks(params: Mapping[str, Any]) -> ListTasksRequest:
    after_value = _str(
        _get(params, "statusTimestampAfter", "status_timestamp_after"),
        "params.statusTimestampAfter",
    )
    after = None
    if after_value:
        try:
            after = datetime.fromisoformat(after_value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidParamsError(
                f"'params.statusTimestampAfter' is not an ISO 8601 time: {after_value!r}",
                field="params.statusTimestampAfter",
            ) from None
        if after.tzinfo is None:
            raise InvalidParamsError(
                "'params.statusTimestampAfter' needs a time zone (end it with Z)",
                field="params.statusTimestampAfter",
            )
    page_size = _int(_get(params, "pageSize", "page_size"), "params.pageSize", low=1, high=100)
    return ListTasksRequest(
        context_id=_id(
            _get(params, "contextId", "context_id"), "params.contextId", blank_absent=True
        ),
        state=state(params.get("status"), "params.status"),
        status_after=after,
        page_size=page_size or 50,
        page_token=_str(_get(params, "pageToken", "page_token"), "params.pageToken") or None,
        history_length=_int(
            _get(params, "historyLength", "history_length"), "params.historyLength", low=0
        ),
        include_artifacts=bool(
            _bool(_get(params, "includeArtifacts", "include_artifacts"), "params.includeArtifacts")
        ),
    )


def _inline_push_config(obj: Any, field: str) -> InlinePushConfig:
    """A push config in any version's form: v1.0 `authentication.scheme`, v0.x `schemes`."""
    if not isinstance(obj, dict):
        raise InvalidParamsError(f"'{field}' is required and must be an object", field=field)
    url = str(_str(obj.get("url"), f"{field}.url", required=True))
    check_push_url_text(url, f"{field}.url")
    auth = _object(obj.get("authentication"), f"{field}.authentication")
    authentication = None
    if auth is not None:
        listed = f"{field}.authentication.schemes"
        schemes = _strings(auth.get("schemes"), listed)
        if len(schemes) > MAX_PUSH_SCHEMES:
            raise InvalidParamsError(
                f"'{listed}' lists {len(schemes)} schemes, the limit {MAX_PUSH_SCHEMES}",
                field=listed,
            )
        for i, name in enumerate(schemes):
            check_push_secret(name, f"{listed}[{i}]", limit=MAX_PUSH_SCHEME_CHARS)
        scheme = _str(auth.get("scheme"), f"{field}.authentication.scheme")
        if scheme:
            check_push_secret(scheme, f"{field}.authentication.scheme", limit=MAX_PUSH_SCHEME_CHARS)
            schemes = (scheme, *schemes)
        if not schemes:
            raise InvalidParamsError(
                f"'{field}.authentication' needs a scheme", field=f"{field}.authentication"
            )
        credentials = _str(auth.get("credentials"), f"{field}.authentication.credentials")
        if credentials is not None:
            check_push_secret(credentials, f"{field}.authentication.credentials")
        authentication = PushAuthentication(schemes=schemes, credentials=credentials)
    token = _str(obj.get("token"), f"{field}.token")
    if token is not None:
        check_push_secret(token, f"{field}.token")
    return InlinePushConfig(
        url=url,
        token=token,
        authentication=authentication,
        id=_id(obj.get("id"), f"{field}.id", blank_absent=True),
    )


def push_config(obj: Any, field: str, *, task_id: str, default_id: str) -> PushConfig:
    """A push config for a task named beside it (an empty id gets `default_id`)."""
    return _inline_push_config(obj, field).for_task(task_id, default_id)


def _push_task(params: Mapping[str, Any], version: str) -> str:
    if version == "1.0":
        return identifier(params, "taskId", "task_id")
    return identifier(params, "id", "taskId")  # v0.3 set names it taskId


def set_push_config(params: Mapping[str, Any], version: str) -> SetPushConfigRequest:
    if version == "1.0":  # the config itself is the params
        task_id = _push_task(params, version)
        config = push_config(params, "params", task_id=task_id, default_id=new_id())
    else:  # {taskId (v0.3) or id (v0.1), pushNotificationConfig}; one config per task by default
        task_id = identifier(params, "taskId", "id")
        raw = params.get("pushNotificationConfig")
        field = "params.pushNotificationConfig"
        config = push_config(raw, field, task_id=task_id, default_id=task_id)
    return SetPushConfigRequest(config)


def get_push_config(params: Mapping[str, Any], version: str) -> GetPushConfigRequest:
    task_id = _push_task(params, version)
    config_id: str | None = None
    if version == "1.0":
        config_id = identifier(params, "id")
    elif params.get("pushNotificationConfigId"):
        config_id = identifier(params, "pushNotificationConfigId")
    return GetPushConfigRequest(task_id, config_id)


def list_push_configs(params: Mapping[str, Any], version: str) -> ListPushConfigsRequest:
    return ListPushConfigsRequest(_push_task(params, version))


def delete_push_config(params: Mapping[str, Any], version: str) -> DeletePushConfigRequest:
    task_id = _push_task(params, version)
    config_id = identifier(params, "id" if version == "1.0" else "pushNotificationConfigId")
    return DeletePushConfigRequest(task_id, config_id)


def identifier(params: Mapping[str, Any], *names: str) -> str:
    """A required id from the first of `names` present in the params."""
    for name in names:
        value = _id(params.get(name), f"params.{name}", blank_absent=True)
        if value:
            return value
    raise InvalidParamsError(f"'params.{names[0]}' is required", field=f"params.{names[0]}")


def page(params: Mapping[str, Any]) -> tuple[int, int]:
    """(page size, offset) of a v1.0 list of push configs; the token is the offset."""
    size = _int(_get(params, "pageSize", "page_size"), "params.pageSize", low=1, high=100) or 100
    token = _str(_get(params, "pageToken", "page_token"), "params.pageToken") or "0"
    if not token.isdigit():
        raise InvalidParamsError(
            "'params.pageToken' is not a token this server issued", field="params.pageToken"
        )
    return size, int(token)
