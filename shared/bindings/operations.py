"""The one operation table every binding runs: JSON-RPC, REST and the seeds' legacy routes.

An operation takes a call (the service, the caller, the stream policy), the params as the
binding read them and the dialect to answer in. It decodes the params into the operation's
canonical request (shared.dialects.decode), runs it on the service for the caller's owner,
and encodes the result in the dialect; a streaming operation answers Streamed frames, which
the binding frames as server-sent events (shared.bindings.sse). The service names the request
attribute at fault in its errors; `run` puts the wire field the caller used there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field, replace
from typing import Any

from shared import streaming
from shared.dialects import decode
from shared.dialects.base import Dialect, delivery_failure
from shared.dialects.decode import WireFields
from shared.dialects.registry import BY_NAME, METHODS
from shared.dialects.v0_3 import V03, V03_LEGACY
from shared.dialects.v1_0 import V1
from shared.errors import A2AError, UnauthenticatedError, UnsupportedOperationError
from shared.extensions import DELIVERY_STATUS, Activation
from shared.frozen import frozen
from shared.identity import Principal
from shared.observability.context import note
from shared.pause import Waiting, begun
from shared.ports import StoredPushConfig
from shared.requests import SendRequest
from shared.service import A2AService
from shared.service.base import view


@frozen
class Call:
    """What an operation gets: the service, the caller and the capabilities in force."""

    service: A2AService
    principal: Principal
    streams: streaming.StreamPolicy
    last_event_id: str | None = None  # the Last-Event-ID header (or its query equivalent)
    # The authenticated extended card for this request's URL (None: the agent has none).
    extended_card: Callable[[str], dict[str, Any]] | None = None  # takes the version
    # The agent's extensions this request activates (its A2A-Extensions header).
    extensions: Activation = field(default_factory=Activation)
    streaming: bool = True  # A2A_STREAMING: whether stream and subscribe are served


@frozen
class Streamed:
    """A streaming operation's answer: frames to send as events, in the answer's dialect."""

    frames: streaming.Stream
    dialect: Dialect


Operation = Callable[[Call, Mapping[str, Any], Dialect], Any]

# The wire field each request attribute the service names in errors was always reported as
# (whichever version's member carried it); a send says where its ids came from.
_WIRE_FIELDS: WireFields = {
    "task_id": "params.id",
    "config_id": "params.id",
    "page_token": "params.pageToken",
    "push_config.url": "pushNotificationConfig.url",
}


def _on_wire(error: A2AError, fields: Mapping[str, str]) -> None:
    """Name the error's field as the caller sent it (a wire field is left as it is)."""
    if error.field is not None and error.field in fields:
        error.field = fields[error.field]


def _send_dialect(params: Mapping[str, Any], dialect: Dialect) -> Dialect:
    if dialect is V03 and ("id" in params or "sessionId" in params):
        return V03_LEGACY  # v0.1 names on a v0.3 method, as in the seeds
    return dialect


def _reader_dialect(dialect: Dialect, origin: str) -> Dialect:
    """v0.x `tasks/*` methods serve v0.1 and v0.3 alike: answer in the task's own v0.x dialect
    (a binding's own form, v0.3 HTTP+JSON's ProtoJSON, is not a registered dialect: it stays),
    which is the version its client speaks."""
    if BY_NAME.get(dialect.name) is not dialect:
        return dialect
    own = BY_NAME.get(origin, dialect)
    if own is dialect or dialect.version == "1.0" or own.version == "1.0":
        return dialect
    note(dialect=own.version)  # the line names the version answered: a 0.1 client's tasks/get
    return own


def _require_streaming(call: Call) -> None:
    if not call.streaming:
        raise UnsupportedOperationError(
            "this agent does not stream (A2A_STREAMING=false; its card says streaming: false): "
            "send without streaming and read the task, or register a push notification config"
        )


def _message_request(
    call: Call, params: Mapping[str, Any], dialect: Dialect
) -> tuple[SendRequest, WireFields]:
    """A send's request, refused when it leaves out a required extension, its message
    recording the extensions its request activated."""
    call.extensions.require(dialect.version)
    request, fields = decode.send(params, dialect.default_history, call.service.limits)
    message = call.extensions.record(request.message)
    if message is request.message:  # no extension activated: the request as decoded
        return request, fields
    return replace(request, message=message), fields


def _send(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    """The send's result, or, while its turn runs, `Later` (shared.pause): a blocking send
    waits for its turn without a thread."""
    dialect = _send_dialect(params, dialect)
    request, fields = _message_request(call, params, dialect)
    return begun(_sent(call, request, fields, dialect))


def _sent(call: Call, request: SendRequest, fields: WireFields, dialect: Dialect) -> Waiting[Any]:
    try:
        result = yield from call.service.sending.send(
            call.principal.owner,
            request,
            dialect=dialect.name,
            message_results=dialect.message_results,
        )
    except A2AError as error:
        _on_wire(error, {**_WIRE_FIELDS, **fields})
        raise
    return dialect.send_result(result)


def _stream(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Streamed:
    _require_streaming(call)
    dialect = _send_dialect(params, dialect)
    request, fields = _message_request(call, params, dialect)
    try:
        frames = call.service.sending.stream(
            call.principal.owner, request, dialect=dialect.name, policy=call.streams
        )
    except A2AError as error:
        _on_wire(error, {**_WIRE_FIELDS, **fields})
        raise
    return Streamed(frames, dialect)


def _get(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    selector = decode.task_selector(params, None)
    stored = call.service.tasks.get(call.principal.owner, selector)
    dialect = _reader_dialect(dialect, stored.dialect)
    if selector.history_length is None:  # the reader's default
        return dialect.task(view(stored.task, dialect.default_history))
    return dialect.task(stored.task)


def _cancel(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    stored = call.service.tasks.cancel(call.principal.owner, decode.cancel(params))
    dialect = _reader_dialect(dialect, stored.dialect)
    return dialect.task(view(stored.task, dialect.default_history))


def _list(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    request = decode.list_tasks(params)
    page, tasks = call.service.tasks.list(call.principal.owner, request)
    return dialect.task_list(page, tasks, request.page_size)


def _messages(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    messages = call.service.tasks.messages(call.principal.owner, decode.messages(params))
    return [dialect.message(m) for m in messages]


def _subscribe(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Streamed:
    _require_streaming(call)
    request = decode.subscribe(params, call.last_event_id)
    stored, frames = call.service.tasks.subscribe(call.principal.owner, request, call.streams)
    return Streamed(frames, _reader_dialect(dialect, stored.dialect))


def _watch(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Streamed:
    """The seeds' `GET /sse`: a subscription whose finished task sends its end and closes."""
    _require_streaming(call)
    request = decode.subscribe(params, call.last_event_id)
    owner = call.principal.owner
    stored, frames = call.service.tasks.subscribe(owner, request, call.streams, final_frame=True)
    return Streamed(frames, _reader_dialect(dialect, stored.dialect))


def _push_set(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    call.service.push.require()  # before reading params: unsupported is the answer
    request = decode.set_push_config(params, dialect.version)
    stored = call.service.push.set(call.principal.owner, request, dialect.name)
    return dialect.push_config(stored)


def _delivery_status(
    call: Call, dialect: Dialect, stored: StoredPushConfig, answer: dict[str, Any]
) -> dict[str, Any]:
    """A 1.0 config with its delivery failure, when the request activated the kit's
    extension for it (shared.extensions.DELIVERY_STATUS); v0.x answers carry it anyway."""
    failure = delivery_failure(stored)
    if dialect.version == "1.0" and DELIVERY_STATUS.uri in call.extensions.own and failure:
        return {**answer, "metadata": {DELIVERY_STATUS.uri: failure}}
    return answer


def _push_get(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    call.service.push.require()  # before reading params: unsupported is the answer
    request = decode.get_push_config(params, dialect.version)
    stored = call.service.push.get(call.principal.owner, request)
    return _delivery_status(call, dialect, stored, dialect.push_config(stored))


def _push_list(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    call.service.push.require()  # before reading params: unsupported is the answer
    request = decode.list_push_configs(params, dialect.version)
    configs = call.service.push.list(call.principal.owner, request)
    if dialect.version != "1.0":
        return dialect.push_configs(configs, "")
    size, offset = decode.page(params)
    more = len(configs) > offset + size
    page = configs[offset : offset + size]
    answer = dialect.push_configs(page, str(offset + size) if more else "")
    encoded = zip(page, answer["configs"], strict=True)
    answer["configs"] = [_delivery_status(call, dialect, s, c) for s, c in encoded]
    return answer


def _push_delete(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    call.service.push.require()  # before reading params: unsupported is the answer
    request = decode.delete_push_config(params, dialect.version)
    call.service.push.delete(call.principal.owner, request)
    return None


def _push_verbless(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    """The seeds' `tasks/pushNotificationConfig`: a set when it carries a config, else a get."""
    if "pushNotificationConfig" in params or "url" in params:
        return _push_set(call, params, dialect)
    return _push_get(call, params, dialect)


def _extended_card(call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    """The card with the skills only signed-in callers see, in the card form of the asking
    method's version (1.0 readers reject the hybrid card's v0.3 members, 0.3 readers the
    strict v1.0 card)."""
    if call.extended_card is None:
        raise UnsupportedOperationError(
            "this agent has no extended agent card (its card does not announce one)"
        )
    if not call.principal.authenticated:
        raise UnauthenticatedError("the extended agent card is for authenticated callers")
    return call.extended_card(dialect.version)


OPERATIONS: dict[str, Operation] = {
    "send": _send,
    "get": _get,
    "cancel": _cancel,
    "list": _list,
    "messages": _messages,
    "stream": _stream,
    "subscribe": _subscribe,
    "watch": _watch,
    "push_set": _push_set,
    "push_get": _push_get,
    "push_list": _push_list,
    "push_delete": _push_delete,
    "push_verbless": _push_verbless,
    "extended_card": _extended_card,
}

STREAMING = frozenset({"stream", "subscribe"})
# Logs name an operation by its A2A 1.0 method, whichever version the caller spoke (the
# line's `dialect` says which); operations 1.0 lacks keep their own names.
_LOGGED_NAMES = {operation: method for method, (operation, d) in METHODS.items() if d is V1}


def run(operation: str, call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    """The operation's answer in the dialect (a Streamed for a streaming one; a Later for a
    send whose turn runs: its errors are raised as it goes on); raises the A2AError that
    refuses it, its field the wire field the caller sent."""
    note(method=_LOGGED_NAMES.get(operation, operation), dialect=dialect.version)
    try:
        return OPERATIONS[operation](call, params, dialect)
    except A2AError as error:
        _on_wire(error, _WIRE_FIELDS)
        raise
