"""JSON-RPC 2.0: a pure function from a request body to a response value.

Parse errors answer `id: null`; invalid requests, unknown methods and bad params get their
standard codes; batches are answered element by element as JSON-RPC 2.0 says (an empty
batch is an invalid request, notifications get no answer). A streaming method answers a
Streamed value instead: the binding sends it as server-sent events, one JSON-RPC response per
frame; anything that goes wrong before the first frame is a plain error answer. Requests
without a "jsonrpc" member (the seeds' informal form) are served and always answered. Every
A2A error goes back in the dialect of the method that was called. Nothing that a client sends
produces a traceback: an unexpected exception is logged with a reference and answered as an
internal error.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from shared import streaming
from shared.bindings import sse
from shared.dialects import decode
from shared.dialects.base import Dialect
from shared.dialects.registry import BY_NAME, METHODS, version_supported
from shared.dialects.v0_3 import V03, V03_LEGACY
from shared.dialects.v1_0 import V1
from shared.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from shared.identity import Principal
from shared.model import Task, new_id
from shared.ports import StoredTask
from shared.service import A2AService, view

log = logging.getLogger("a2a.jsonrpc")

JSON_MEDIA_TYPES = frozenset({"application/json", "application/a2a+json", "application/json-rpc"})

_NO_ID = object()  # a notification: no "id" member at all


@dataclass(frozen=True)
class Call:
    """What an operation gets: the service, the caller and the capabilities in force."""

    service: A2AService
    principal: Principal
    streams: streaming.StreamPolicy
    last_event_id: str | None = None  # the Last-Event-ID header (or its query equivalent)


@dataclass(frozen=True)
class Streamed:
    """A streaming method's answer: frames to send as events, in the method's dialect."""

    frames: streaming.Stream
    dialect: Dialect
    request_id: Any = None


STREAMING_OPERATIONS = frozenset({"stream", "subscribe"})


Operation = Callable[[Call, Mapping[str, Any], Dialect], Any]


def _send_dialect(params: Mapping[str, Any], dialect: Dialect) -> Dialect:
    if dialect is V03 and ("id" in params or "sessionId" in params):
        return V03_LEGACY  # v0.1 names on a v0.3 method, as in the seeds
    return dialect


def _send(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    dialect = _send_dialect(params, dialect)
    request = decode.send(params, dialect.default_history)
    result = call.service.send(
        call.principal.owner,
        request,
        dialect=dialect.name,
        message_results=dialect.message_results,
    )
    return dialect.send_result(result)


def _reader_dialect(dialect: Dialect, origin: str) -> Dialect:
    """v0.x `tasks/*` methods serve v0.1 and v0.3 alike: answer in the task's own v0.x dialect."""
    own = BY_NAME.get(origin, dialect)
    return own if dialect.version != "1.0" and own.version != "1.0" else dialect


def _get(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    selector = decode.task_selector(params, None)
    stored = call.service.get(call.principal.owner, selector.task_id, None)
    dialect = _reader_dialect(dialect, stored.dialect)
    history = selector.history_length
    return dialect.task(view(stored.task, dialect.default_history if history is None else history))


def _cancel(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    selector = decode.task_selector(params, None)
    stored = call.service.cancel(call.principal.owner, selector.task_id)
    dialect = _reader_dialect(dialect, stored.dialect)
    return dialect.task(view(stored.task, dialect.default_history))


def _list(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    request = decode.list_tasks(params)
    page, tasks = call.service.list(call.principal.owner, request)
    return dialect.task_list(page, tasks, request.page_size)


def _messages(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    selector = decode.task_selector(params, None)
    return [
        dialect.message(m) for m in call.service.messages(call.principal.owner, selector.task_id)
    ]


def _stream(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Streamed:
    dialect = _send_dialect(params, dialect)
    request = decode.send(params, dialect.default_history)
    service, owner, policy = call.service, call.principal.owner, call.streams

    def open_stream() -> streaming.Stream:
        begun = service.start_stream(owner, request, dialect=dialect.name)
        if isinstance(begun, StoredTask):  # the message joined a running task: follow it
            return streaming.follow(service.store, owner, begun, None, policy)
        return streaming.inline(begun, service.store, owner, policy)

    return Streamed(policy.slots.open(open_stream), dialect)


def _subscribe(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Streamed:
    selector = decode.task_selector(params, None)
    resume = decode.resume_point(params, call.last_event_id)
    service, owner, policy = call.service, call.principal.owner, call.streams
    stored = service.follow(owner, selector.task_id, resume)
    frames = policy.slots.open(
        lambda: streaming.follow(service.store, owner, stored, resume, policy)
    )
    return Streamed(frames, _reader_dialect(dialect, stored.dialect))


def stream_events(streamed: Streamed) -> Iterator[str]:
    """The server-sent events of a Streamed answer, each frame a JSON-RPC response."""
    dialect, request_id = streamed.dialect, streamed.request_id
    return frame_events(
        streamed,
        lambda result: {"jsonrpc": "2.0", "id": request_id, "result": result},
        lambda error: _error(request_id, error, dialect),
    )


def frame_events(
    streamed: Streamed,
    wrap: Callable[[dict[str, Any]], Any],
    fail: Callable[[A2AError], Any],
) -> Iterator[str]:
    """The server-sent events of a Streamed answer: each frame's result in the dialect,
    as `wrap` puts it on the wire (the REST binding sends it bare).

    A failure after the first frame can only end the stream: it ends with an `error` event
    carrying `fail`'s body. Closing this iterator (the client went away) closes the stream
    and frees its slot."""
    dialect = streamed.dialect
    try:
        for frame in streamed.frames:
            if frame is None:
                yield sse.comment("keep-alive")
                continue
            if isinstance(frame.item, Task):
                result = dialect.stream_opening(frame.item)
            else:
                result = dialect.stream_update(frame.item, frame.task)
            if result is not None:
                yield sse.event(wrap(result), seq=frame.seq)
    except Exception:
        reference = new_id()[:8]
        log.exception("a stream failed (reference %s)", reference)
        yield sse.event(fail(InternalError(f"reference {reference}")), name="error")
    finally:
        streamed.frames.close()


def _push_task(params: Mapping[str, Any], dialect: Dialect) -> str:
    if dialect.version == "1.0":
        return decode.identifier(params, "taskId", "task_id")
    return decode.identifier(params, "id", "taskId")  # v0.3 set names it taskId


def _push_set(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    call.service.require_push()  # before reading params: unsupported is the answer
    if dialect.version == "1.0":  # the config itself is the params
        task_id = _push_task(params, dialect)
        config = decode.push_config(params, "params", task_id=task_id, default_id=new_id())
    else:  # {taskId (v0.3) or id (v0.1), pushNotificationConfig}; one config per task by default
        task_id = decode.identifier(params, "taskId", "id")
        field = "params.pushNotificationConfig"
        raw = params.get("pushNotificationConfig")
        config = decode.push_config(raw, field, task_id=task_id, default_id=task_id)
    stored = call.service.set_push_config(call.principal.owner, config, dialect.name)
    return dialect.push_config(stored.config)


def _push_get(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    call.service.require_push()  # before reading params: unsupported is the answer
    task_id = _push_task(params, dialect)
    config_id: str | None = None
    if dialect.version == "1.0":
        config_id = decode.identifier(params, "id")
    elif params.get("pushNotificationConfigId"):
        config_id = decode.identifier(params, "pushNotificationConfigId")
    config = call.service.get_push_config(call.principal.owner, task_id, config_id)
    return dialect.push_config(config)


def _push_list(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    call.service.require_push()  # before reading params: unsupported is the answer
    configs = call.service.list_push_configs(call.principal.owner, _push_task(params, dialect))
    if dialect.version != "1.0":
        return dialect.push_configs(configs, "")
    size, offset = decode.page(params)
    more = len(configs) > offset + size
    return dialect.push_configs(configs[offset : offset + size], str(offset + size) if more else "")


def _push_delete(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    call.service.require_push()  # before reading params: unsupported is the answer
    task_id = _push_task(params, dialect)
    name = "id" if dialect.version == "1.0" else "pushNotificationConfigId"
    config_id = decode.identifier(params, name)
    call.service.delete_push_config(call.principal.owner, task_id, config_id)
    return None


def _push_verbless(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    """The seeds' `tasks/pushNotificationConfig`: a set when it carries a config, else a get."""
    if "pushNotificationConfig" in params or "url" in params:
        return _push_set(call, params, dialect)
    return _push_get(call, params, dialect)


def _extended_card(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    raise UnsupportedOperationError("this agent has no extended agent card")


OPERATIONS: dict[str, Operation] = {
    "send": _send,
    "get": _get,
    "cancel": _cancel,
    "list": _list,
    "messages": _messages,
    "stream": _stream,
    "subscribe": _subscribe,
    "push_set": _push_set,
    "push_get": _push_get,
    "push_list": _push_list,
    "push_delete": _push_delete,
    "push_verbless": _push_verbless,
    "extended_card": _extended_card,
}


def _error(request_id: Any, error: A2AError, dialect: Dialect) -> dict[str, Any]:
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    data = dialect.error_data(error)
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def _usable_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


def _id_if_any(body: bytes) -> Any:
    """The request id, when the body happens to be a JSON-RPC request; else None."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    request_id = payload.get("id") if isinstance(payload, dict) else None
    return request_id if _usable_id(request_id) else None


def media_type(content_type: str | None) -> str | None:
    return content_type.split(";", 1)[0].strip().lower() if content_type else None


def content_type_error(content_type: str | None) -> ContentTypeNotSupportedError | None:
    """The error for a body that is declared as something other than JSON (none is JSON)."""
    media = media_type(content_type)
    if media is None or media in JSON_MEDIA_TYPES:
        return None
    return ContentTypeNotSupportedError(
        f"send Content-Type: application/json, not {media}", metadata={"contentType": media}
    )


def require_version(version: str | None) -> None:
    """Refuse an A2A-Version header naming a version we don't speak (none: the method says)."""
    if version and not version_supported(version):
        raise VersionNotSupportedError(
            f"A2A-Version {version} is not supported; this agent speaks 1.0 and 0.3",
            metadata={"requestedVersion": version, "supportedVersions": "1.0,0.3"},
        )


def dispatch(
    body: bytes,
    *,
    call: Call,
    content_type: str | None = None,
    version: str | None = None,
) -> Any:
    """The response value for one HTTP body; None when nothing is to be sent back."""
    header_dialect: Dialect = V1 if (version or "").startswith("1.") else V03
    unsupported = content_type_error(content_type)
    if unsupported is not None:
        # Checked before parsing: a body sent as text/plain need not be JSON at all.
        return _error(_id_if_any(body), unsupported, header_dialect)
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        return _error(None, JSONParseError(f"the body is not JSON ({exc})"), header_dialect)
    if isinstance(payload, list):
        if not payload:
            return _error(None, InvalidRequestError("the batch is empty"), header_dialect)
        answers = [_one(item, call, version, header_dialect, batch=True) for item in payload]
        return [a for a in answers if a is not None] or None
    return _one(payload, call, version, header_dialect)


def _one(
    request: Any, call: Call, version: str | None, header_dialect: Dialect, *, batch: bool = False
) -> Any:
    """The response to one request object, or None for a notification."""
    if not isinstance(request, dict):
        return _error(None, InvalidRequestError("a request must be a JSON object"), header_dialect)
    request_id = request.get("id", _NO_ID)
    answer_id = None if request_id is _NO_ID or not _usable_id(request_id) else request_id
    method = request.get("method")
    # A request with no "jsonrpc" member at all is the seeds' informal form (seed 000's
    # streaming examples): it is served, and always answered, since its client cannot know
    # JSON-RPC 2.0 notifications. A wrong value is still an invalid request.
    informal = "jsonrpc" not in request
    if not informal and request.get("jsonrpc") != "2.0":
        problem = "'jsonrpc' must be \"2.0\""
    elif not _usable_id(request.get("id")):
        problem = "'id' must be a string, a number or null"
    elif not isinstance(method, str) or not method:
        problem = "'method' must be a non-empty string"
    else:
        return _call(
            method,
            request=request,
            answer_id=answer_id,
            notification=request_id is _NO_ID and not informal,
            batch=batch,
            call=call,
            version=version,
        )
    return _error(answer_id, InvalidRequestError(problem), header_dialect)


def _call(
    method: str,
    *,
    request: dict[str, Any],
    answer_id: Any,
    notification: bool,
    batch: bool,
    call: Call,
    version: str | None,
) -> Any:
    header_dialect: Dialect = V1 if (version or "").startswith("1.") else V03
    found = METHODS.get(method)
    if found is None:
        not_found = MethodNotFoundError(f"no method {method!r}", metadata={"method": method})
        return _error(answer_id, not_found, header_dialect)
    operation_name, dialect = found
    try:
        require_version(version)
    except VersionNotSupportedError as error:
        return _error(answer_id, error, dialect)
    params = request.get("params", {})
    if operation_name in STREAMING_OPERATIONS:
        if notification:
            return None  # nobody would read the stream: don't start one
        if batch:
            problem = InvalidRequestError(f"{method} streams its answer and cannot be batched")
            return _error(answer_id, problem, dialect)
    try:
        if not isinstance(params, dict):
            raise InvalidParamsError("'params' must be an object", field="params")
        result = OPERATIONS[operation_name](call, params, dialect)
    except A2AError as error:
        answer: dict[str, Any] | None = _error(answer_id, error, dialect)
    except Exception:
        reference = new_id()[:8]
        log.exception("%s failed (reference %s)", method, reference)
        answer = _error(answer_id, InternalError(f"reference {reference}"), dialect)
    else:
        if isinstance(result, Streamed):
            return replace(result, request_id=answer_id)
        answer = {"jsonrpc": "2.0", "id": answer_id, "result": result}
    return None if notification else answer
