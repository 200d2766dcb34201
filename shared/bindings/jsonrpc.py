"""The JSON-RPC 2.0 binding: the envelope around the operation table.

It parses a request body (shared.json_body: limits, no NaN, no lone surrogates), applies
JSON-RPC's rules and runs each request's method through shared.bindings.operations in the
method's dialect. Parse errors answer `id: null`; invalid requests, unknown methods and bad
params get their standard codes; batches are answered element by element as JSON-RPC 2.0 says
(an empty batch, or one over A2A_MAX_BATCH, is an invalid request; notifications get no
answer). A streaming method answers a StreamAnswer: the HTTP layer sends its events, one
JSON-RPC response per frame; anything that goes wrong before the first frame is a plain error
answer. Requests without a "jsonrpc" member (the seeds' informal form) are
served and always answered. Every A2A error goes back in the dialect of the method that was
called. Nothing that a client sends produces a traceback: an unexpected exception is logged
with a reference and answered as an internal error.
"""

from __future__ import annotations

import logging
from typing import Any

from shared import json_body
from shared.bindings import sse
from shared.bindings.json_http import content_type_error
from shared.bindings.operations import STREAMING, Call, Streamed, run
from shared.dialects.base import Dialect
from shared.dialects.registry import METHODS, require_version
from shared.dialects.v0_3 import V03
from shared.dialects.v1_0 import V1
from shared.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    VersionNotSupportedError,
)
from shared.frozen import frozen
from shared.model import new_id
from shared.observability.context import answered, note
from shared.pause import Later, Waiting, begun, resolved

log = logging.getLogger("a2a.jsonrpc")

_NO_ID = object()  # a notification: no "id" member at all


@frozen
class StreamAnswer:
    """A streaming method's answer: its frames, each sent as a response to `request_id`."""

    streamed: Streamed
    request_id: Any

    def events(self) -> sse.Events:
        dialect, request_id = self.streamed.dialect, self.request_id
        return sse.frame_events(
            self.streamed.frames,
            dialect,
            lambda result: {"jsonrpc": "2.0", "id": request_id, "result": result},
            lambda error: _error(request_id, error, dialect),
        )


def _error(request_id: Any, error: A2AError, dialect: Dialect) -> dict[str, Any]:
    answered(error.code, error.reason, error.http_status)  # on the request's line
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
        payload = json_body.parse(body)
    except A2AError:
        return None
    request_id = payload.get("id") if isinstance(payload, dict) else None
    return request_id if _usable_id(request_id) else None


def version_dialect(version: str | None) -> Dialect:
    """The dialect of an answer that names no method: v1.0's when the A2A-Version header
    asks for 1.x, else v0.3's."""
    return V1 if (version or "").startswith("1.") else V03


def dispatch(
    body: bytes,
    *,
    call: Call,
    content_type: str | None = None,
    version: str | None = None,
    max_batch: int = 1,
) -> Any:
    """The response value for one HTTP body; None when nothing is to be sent back.

    A batch holds at most `max_batch` requests (A2A_MAX_BATCH)."""
    header_dialect = version_dialect(version)
    unsupported = content_type_error(content_type)
    if unsupported is not None:
        # Checked before parsing: a body sent as text/plain need not be JSON at all.
        return _error(_id_if_any(body), unsupported, header_dialect)
    try:
        payload = json_body.parse(body)
    except A2AError as error:
        return _error(None, error, header_dialect)
    if isinstance(payload, list):
        if not payload:
            return _error(None, InvalidRequestError("the batch is empty"), header_dialect)
        if len(payload) > max_batch:
            # A2A defines no batches; JSON-RPC 2.0 does, and clients use them, so they are
            # served, but capped: one request must not create thousands of tasks at once.
            too_many = InvalidRequestError(
                f"the batch has {len(payload)} requests; the limit is {max_batch} "
                "(A2A_MAX_BATCH): send the rest in further requests"
            )
            return _error(None, too_many, header_dialect)
        answers = [_one(item, call, version, header_dialect, batch=True) for item in payload]
        if any(isinstance(a, Later) for a in answers):  # sends started: wait for their turns
            return begun(_gathered(answers))
        return [a for a in answers if a is not None] or None
    return _one(payload, call, version, header_dialect)


def _gathered(answers: list[Any]) -> Waiting[Any]:
    """A batch's responses once each of its sends' turns ended (they all run meanwhile)."""
    done = []
    for answer in answers:
        done.append((yield from resolved(answer)))
    return [a for a in done if a is not None] or None


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
    header_dialect = version_dialect(version)
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
    if operation_name in STREAMING:
        if notification:
            return None  # nobody would read the stream: don't start one
        if batch:
            problem = InvalidRequestError(f"{method} streams its answer and cannot be batched")
            return _error(answer_id, problem, dialect)
    answer = begun(
        _answered(method, operation_name, call, params, answer_id=answer_id, dialect=dialect)
    )
    if isinstance(answer, Later):  # a blocking send's: once its turn ended
        return answer.then(lambda value: None if notification else value)
    return None if notification else answer


def _answered(
    method: str, operation: str, call: Call, params: Any, *, answer_id: Any, dialect: Dialect
) -> Waiting[Any]:
    """The response to one call: its result, its stream, or its error (a failure of ours
    logged with a reference); a blocking send's once its turn ended."""
    try:
        if not isinstance(params, dict):
            raise InvalidParamsError("'params' must be an object", field="params")
        result = run(operation, call, params, dialect)
        if isinstance(result, Later):
            result = yield from result.rest()
    except A2AError as error:
        return _error(answer_id, error, dialect)
    except Exception:
        reference = new_id()[:8]
        log.exception("%s failed (reference %s)", method, reference)
        note(reference=reference)  # on the request's log line too
        return _error(answer_id, InternalError(f"reference {reference}"), dialect)
    if isinstance(result, Streamed):
        return StreamAnswer(result, answer_id)
    return {"jsonrpc": "2.0", "id": answer_id, "result": result}
