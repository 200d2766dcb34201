"""A2A 1.0's HTTP+JSON (REST) binding: a method and a path to an operation of the table.

It owns the binding's route table (S1 §11.3, wire reference section 6), how a request's path
ids, query string and ProtoJSON body become the operation's 1.0 params (the params of the
matching 1.0 JSON-RPC method), and the binding's error body (`google.rpc.Status` with an
ErrorInfo). The operations are shared.bindings.operations', run in the 1.0 dialect: a REST
answer is the result the JSON-RPC method would carry, and a stream sends each frame's bare
StreamResponse. Nothing that a client sends produces a traceback: an unexpected exception is
logged with a reference and answered as an internal error.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from shared import json_body
from shared.bindings import sse
from shared.bindings.json_http import A2A_JSON, content_type_error
from shared.bindings.operations import Call, Streamed, run
from shared.dialects.base import Dialect
from shared.dialects.registry import require_version
from shared.dialects.v1_0 import V1, bad_request, error_info
from shared.errors import A2AError, InternalError, InvalidParamsError
from shared.frozen import frozen
from shared.model import new_id
from shared.observability.context import note
from shared.pause import Waiting, begun, resolved

log = logging.getLogger("a2a.rest")
# What the binding's answers and errors say they are (1.0.1, S1 §11.1); streams stay SSE.
MEDIA_TYPE = A2A_JSON


@frozen
class Route:
    """A route of the table: a method and a path template to an operation."""

    method: str
    template: str  # `{name}` is a path segment that becomes `params[name]`
    operation: str  # a name in shared.bindings.operations.OPERATIONS
    pattern: re.Pattern[str]


def route(method: str, template: str, operation: str) -> Route:
    """A route of a binding's table (this one's, or v0.3's in shared.bindings.rest_v0_3)."""
    # An id is one segment without the `:verb` suffix (ids are server-generated: no `:` or `/`).
    pieces = re.split(r"\{(\w+)\}", template)
    regex = "".join(
        re.escape(piece) if i % 2 == 0 else f"(?P<{piece}>[^/:]+)" for i, piece in enumerate(pieces)
    )
    return Route(method, template, operation, re.compile(regex + r"\Z"))


# The placeholders are named after the 1.0 params they fill (GetTask's `id`, a push config's
# `taskId` and `id`), so the path ids drop into the params as they are.
ROUTES = (
    route("POST", "/message:send", "send"),
    route("POST", "/message:stream", "stream"),
    route("GET", "/tasks", "list"),
    route("GET", "/tasks/{id}", "get"),
    route("POST", "/tasks/{id}:cancel", "cancel"),
    # S1 says POST, the proto's HTTP annotation GET: the SDK accepts both, and so do we.
    route("POST", "/tasks/{id}:subscribe", "subscribe"),
    route("GET", "/tasks/{id}:subscribe", "subscribe"),
    route("POST", "/tasks/{taskId}/pushNotificationConfigs", "push_set"),
    route("GET", "/tasks/{taskId}/pushNotificationConfigs", "push_list"),
    route("GET", "/tasks/{taskId}/pushNotificationConfigs/{id}", "push_get"),
    route("DELETE", "/tasks/{taskId}/pushNotificationConfigs/{id}", "push_delete"),
    route("GET", "/extendedAgentCard", "extended_card"),
)


def match(
    method: str, path: str, routes: tuple[Route, ...] = ROUTES
) -> tuple[Route, dict[str, str]] | None:
    """The route for a request, with the ids its path carries (None: not a REST request)."""
    for one in routes:
        found = one.pattern.match(path)
        if found and one.method == method:
            return one, found.groupdict()
    return None


def allowed(path: str, routes: tuple[Route, ...] = ROUTES) -> list[str]:
    """The methods a REST path takes (empty: not a REST path)."""
    return [one.method for one in routes if one.pattern.match(path)]


def dispatch(
    route: Route,
    ids: Mapping[str, str],
    *,
    call: Call,
    query: Mapping[str, str],
    body: bytes,
    content_type: str | None,
    version: str | None,
) -> Any:
    """The operation's answer: a result (None for a delete), or Streamed frames.

    Raises A2AError for anything wrong, including an InternalError for a failure of ours."""
    require_version(version)
    return run_route(route, call, _params(ids, query, body, content_type), V1)


def run_route(route: Route, call: Call, params: Mapping[str, Any], dialect: Dialect) -> Any:
    """The route's operation in the dialect; a failure of ours is an InternalError with a
    reference to the logged traceback."""
    return begun(_guarded(route, lambda: resolved(run(route.operation, call, params, dialect))))


def _guarded(route: Route, work: Callable[[], Waiting[Any]]) -> Waiting[Any]:
    """`work()`'s value; a failure of ours, all the way through, is an InternalError with a
    reference to the logged traceback."""
    try:
        return (yield from work())
    except A2AError:
        raise
    except Exception:
        reference = new_id()[:8]
        log.exception("%s %s failed (reference %s)", route.method, route.template, reference)
        note(reference=reference)  # on the request's log line too
        raise InternalError(f"reference {reference}") from None


def _params(
    ids: Mapping[str, str], query: Mapping[str, str], body: bytes, content_type: str | None
) -> dict[str, Any]:
    """The JSON-RPC params: the query (its keys are the params' camelCase names; the decoders
    read ProtoJSON's decimal strings and `true`/`false`), then the body, then the path ids,
    which name the resource and so win over anything the body says."""
    params: dict[str, Any] = dict(query)
    params.update(body_object(body, content_type))
    params.update(ids)
    return params


def body_object(body: bytes, content_type: str | None) -> dict[str, Any]:
    """A REST request's JSON object body, through the front door (empty: no body)."""
    if not body.strip():
        return {}
    unsupported = content_type_error(content_type)
    if unsupported is not None:  # before parsing: a text/plain body need not be JSON
        raise unsupported
    payload = json_body.parse(body)  # raises the parse or invalid-request error
    if not isinstance(payload, dict):
        raise InvalidParamsError("the body must be a JSON object", field="body")
    return payload


def error_body(error: A2AError) -> dict[str, Any]:
    """The binding's error: google.rpc.Status, its details an ErrorInfo (and a BadRequest
    naming the field at fault, when there is one)."""
    details = [error_info(error)]
    violation = bad_request(error)
    if violation is not None:
        details.append(violation)
    status = {
        "code": error.http_status,
        "status": error.grpc_status,
        "message": error.message,
        "details": details,
    }
    return {"error": status}


def stream_events(streamed: Streamed) -> sse.Events:
    """A REST stream's server-sent events: each frame the bare StreamResponse."""
    return sse.frame_events(streamed.frames, streamed.dialect, lambda result: result, error_body)
