"""Every answer valid in its version's official schema, checked as the tests receive it.

`check(response)` looks at one answer of an in-process client (httpx) and the request that
made it: a 1.0
answer (a 1.0 JSON-RPC method, or an HTTP+JSON route) is parsed into the official SDK's
protobuf types with unknown fields rejected; a 0.3 answer is validated against the v0.3 JSON
schema (`tests/schemas/`), or, from 0.3's HTTP+JSON routes (`/v1/...`), parsed into the
SDK's v0.3 protobuf types (`a2a.compat.v0_3`) with unknown fields rejected; a 0.1 answer
(no schema is vendored for 0.1) has its data parts
checked to be objects, as 0.1 clients parse them. An event stream is checked frame by frame
as the test reads it. The `schema_checked` fixture (tests/conftest.py) applies it to every
request a test makes through an in-process client (the transport's answers).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import jsonschema
from a2a.compat.v0_3 import a2a_v0_3_pb2
from a2a.types import a2a_pb2
from google.protobuf import any_pb2, empty_pb2, json_format
from google.protobuf.message import Message as ProtoMessage
from google.rpc import code_pb2, error_details_pb2  # noqa: F401 - registers the details' types

from shared.bindings import rest, rest_v0_3
from shared.bindings.json_http import content_type_error, media_type
from shared.dialects.registry import METHODS
from tests.asgi_transport import target

# The names a google.rpc.Status's `status` may take (OK, NOT_FOUND, ...).
GRPC_CODES = frozenset(code_pb2.Code.DESCRIPTOR.values_by_name)

SCHEMA_0_3 = Path(__file__).parent / "schemas" / "a2a-v0.3.0.json"

# operation -> the 1.0 result's protobuf type (a JSON-RPC `result`, a REST body, a frame).
V1_RESULTS: dict[str, type[ProtoMessage]] = {
    "send": a2a_pb2.SendMessageResponse,
    "stream": a2a_pb2.StreamResponse,
    "subscribe": a2a_pb2.StreamResponse,
    "get": a2a_pb2.Task,
    "cancel": a2a_pb2.Task,
    "list": a2a_pb2.ListTasksResponse,
    "push_set": a2a_pb2.TaskPushNotificationConfig,
    "push_get": a2a_pb2.TaskPushNotificationConfig,
    "push_list": a2a_pb2.ListTaskPushNotificationConfigsResponse,
    "push_delete": empty_pb2.Empty,
    "extended_card": a2a_pb2.AgentCard,
}

# operation -> the v0.3 HTTP+JSON answer's protobuf type (the extended card is the JSON card).
V0_3_REST_RESULTS: dict[str, type[ProtoMessage]] = {
    "send": a2a_v0_3_pb2.SendMessageResponse,
    "stream": a2a_v0_3_pb2.StreamResponse,
    "subscribe": a2a_v0_3_pb2.StreamResponse,
    "get": a2a_v0_3_pb2.Task,
    "cancel": a2a_v0_3_pb2.Task,
    "push_set": a2a_v0_3_pb2.TaskPushNotificationConfig,
    "push_get": a2a_v0_3_pb2.TaskPushNotificationConfig,
    "push_list": a2a_v0_3_pb2.ListTaskPushNotificationConfigResponse,
    "push_delete": empty_pb2.Empty,
}

# operation -> the v0.3 schema's definition of a successful JSON-RPC answer (or frame). The
# seeds' informal methods have no definition of their own: their envelope is checked.
V0_3_SUCCESS = {
    "send": "SendMessageSuccessResponse",
    "stream": "SendStreamingMessageSuccessResponse",
    "subscribe": "SendStreamingMessageSuccessResponse",
    "get": "GetTaskSuccessResponse",
    "cancel": "CancelTaskSuccessResponse",
    "push_set": "SetTaskPushNotificationConfigSuccessResponse",
    "push_get": "GetTaskPushNotificationConfigSuccessResponse",
    "push_list": "ListTaskPushNotificationConfigSuccessResponse",
    "push_delete": "DeleteTaskPushNotificationConfigSuccessResponse",
    "extended_card": "GetAuthenticatedExtendedCardSuccessResponse",
}


@cache
def _v0_3_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SCHEMA_0_3.read_text())
    return document


@cache
def _v0_3_validator(definition: str) -> jsonschema.Draft7Validator:
    """One compiled validator per definition, for the whole session (they are costly)."""
    document = _v0_3_document()
    schema = {"$ref": f"#/definitions/{definition}", "definitions": document["definitions"]}
    return jsonschema.Draft7Validator(schema)


def check_v0_3(definition: str, value: Any) -> None:
    """`value` is valid as the v0.3 schema's `definition`; AssertionError naming where not."""
    error = jsonschema.exceptions.best_match(_v0_3_validator(definition).iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise AssertionError(f"not a valid v0.3 {definition} at /{where}: {error.message}")


def check_v1(kind: type[ProtoMessage], value: Any) -> None:
    """`value` parses as the protobuf `kind` (1.0's, or v0.3's), unknown fields rejected."""
    try:
        json_format.ParseDict(value, kind(), ignore_unknown_fields=False)
    except json_format.ParseError as error:
        package = kind.DESCRIPTOR.full_name
        raise AssertionError(f"not a valid {package}: {error}\n{value}") from None


def check_v0_1(value: Any) -> None:
    """A 0.1 answer: every data part's `data` is an object, as 0.1 clients read it."""
    if isinstance(value, dict):
        if value.get("type") == "data" and "data" in value:
            assert isinstance(value["data"], dict), (
                f"a 0.1 data part's data is not an object: {value}"
            )
        for item in value.values():
            check_v0_1(item)
    elif isinstance(value, list):
        for item in value:
            check_v0_1(item)


def _check_v1_error(error: Any) -> None:
    """A 1.0 JSON-RPC error: code and message, and `data` a list of google.rpc details."""
    assert isinstance(error, dict), error
    assert isinstance(error.get("code"), int) and isinstance(error.get("message"), str), error
    assert set(error) <= {"code", "message", "data"}, error
    if "data" in error:
        assert isinstance(error["data"], list), error
        for detail in error["data"]:
            check_v1(any_pb2.Any, detail)


# The v0.3 methods that also serve v0.1 clients, answering a v0.1 task in v0.1's shapes.
SHARED_WITH_V0_1 = ("tasks/get", "tasks/cancel", "tasks/resubscribe")


def _is_v0_1_answer(method: str | None, result: Any) -> bool:
    # Every v0.3 task, message and event has `kind` and `contextId`; v0.1 names neither.
    return (
        method in SHARED_WITH_V0_1
        and isinstance(result, dict)
        and "kind" not in result
        and "contextId" not in result
    )


def check_rpc_answer(answer: Any, method: str | None, header_version: str | None) -> None:
    """One JSON-RPC answer (or stream frame) to `method` (None: not known, the A2A-Version
    header's dialect answers)."""
    assert isinstance(answer, dict), answer
    found = METHODS.get(method) if isinstance(method, str) else None
    if found is not None:
        operation, version = found[0], found[1].version
    else:
        operation, version = None, "1.0" if (header_version or "").startswith("1.") else "0.3"
    if version == "0.1" or _is_v0_1_answer(method, answer.get("result")):
        check_v0_1(answer)
    elif version == "0.3":
        if "error" in answer:
            check_v0_3("JSONRPCErrorResponse", answer)
        else:
            check_v0_3(V0_3_SUCCESS.get(operation or "", "JSONRPCSuccessResponse"), answer)
    else:
        assert answer.get("jsonrpc") == "2.0" and "id" in answer, answer
        assert ("result" in answer) != ("error" in answer), answer
        assert set(answer) <= {"jsonrpc", "id", "result", "error"}, answer
        if "error" in answer:
            _check_v1_error(answer["error"])
        elif operation == "push_delete" and answer["result"] is None:
            pass  # Empty: the official SDK sends `"result": null` (a2a-wire.md)
        elif operation is not None:
            check_v1(V1_RESULTS[operation], answer["result"])


def check_rest_answer(answer: Any, operation: str) -> None:
    """One 1.0 HTTP+JSON body (or stream frame): the operation's result or a google.rpc
    Status in `error`."""
    assert isinstance(answer, dict), answer
    if set(answer) == {"error"} and isinstance(answer["error"], dict):
        status = answer["error"]
        assert set(status) <= {"code", "status", "message", "details"}, status
        assert isinstance(status.get("code"), int), status
        assert isinstance(status.get("message"), str), status
        assert status.get("status") in GRPC_CODES, status
        for detail in status.get("details", []):
            check_v1(any_pb2.Any, detail)
    else:
        check_v1(V1_RESULTS[operation], answer)


def check_rest_v0_3_answer(answer: Any, operation: str) -> None:
    """One v0.3 HTTP+JSON body (or stream frame): the operation's result in v0.3's ProtoJSON,
    or the binding's error (`code`, `message`, `data`)."""
    assert isinstance(answer, dict), answer
    if set(answer) == {"error"}:
        # Refused before any route (a `..` segment, a path under a prefix no route has): the
        # HTTP face's google.rpc Status, as 1.0's binding answers.
        check_rest_answer(answer, "none")
    elif "code" in answer and "message" in answer:
        assert set(answer) <= {"code", "message", "data"}, answer
        assert isinstance(answer["code"], int) and isinstance(answer["message"], str), answer
        assert isinstance(answer.get("data", {}), dict), answer
    elif operation == "extended_card":
        check_v0_3("AgentCard", answer)
    else:
        check_v1(V0_3_REST_RESULTS[operation], answer)


def rest_route(method: str, path: str) -> tuple[rest.Route, bool] | None:
    """The REST route a request reached, and whether it is v0.3's; a path prefix before the
    route (a deployment's, A2A_PUBLIC_URL's path) is skipped."""
    segments = path.rstrip("/").split("/")
    for start in range(1, len(segments)):
        tail = "/" + "/".join(segments[start:])
        v0_3 = tail.startswith(rest_v0_3.PREFIX + "/")  # as the server decides
        found = (rest_v0_3 if v0_3 else rest).match(method, tail)
        if found is not None:
            return found[0], v0_3
        if v0_3:
            return None  # a path under /v1 no route has: no shorter tail is the route
    return None


def _odd_path(raw: str, path: str) -> bool:
    """A path with a `.` or `..` segment or an encoded slash, which no route takes (the
    server refuses it rather than serve JSON-RPC there)."""
    dots = any(segment in (".", "..") for segment in path.split("/"))
    return dots or "%2f" in raw.lower()


def _frames(chunks: Iterable[bytes]) -> Iterator[tuple[bytes, list[Any]]]:
    """Each chunk as it arrives, with the JSON of the events it completes."""
    buffer = ""
    for chunk in chunks:
        buffer += chunk.decode()
        *complete, buffer = buffer.split("\n\n")
        events = []
        for block in complete:
            data = [
                line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")
            ]
            if data:
                events.append(json.loads("\n".join(data)))
        yield chunk, events


class _CheckedStream(httpx.SyncByteStream):
    """An answer's body that checks each frame as the test reads it (`each`), or the whole
    body once read (`whole`); closing it closes the answer's (the client goes away)."""

    def __init__(
        self,
        inner: httpx.SyncByteStream,
        each: Callable[[Any], None] | None = None,
        whole: Callable[[bytes], None] | None = None,
    ) -> None:
        self.inner = inner
        self.each = each
        self.whole = whole

    def __iter__(self) -> Iterator[bytes]:
        if self.each is not None:
            for chunk, events in _frames(self.inner):
                for event in events:
                    self.each(event)
                yield chunk
        else:
            read = b""
            for chunk in self.inner:
                read += chunk
                yield chunk
            if self.whole is not None:
                self.whole(read)

    def close(self) -> None:
        self.inner.close()


def _request_body(request: httpx.Request) -> Any:
    try:
        return json.loads(request.content or b"null")
    except ValueError:
        return None


def _usable_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


def _method_of(request: Any, answer: Any) -> str | None:
    """The method whose dialect answers: the request's (in a batch, the item with the answer's
    id), when its envelope is valid; None when the A2A-Version header's dialect answers (as
    shared/bindings/jsonrpc.py decides)."""
    if isinstance(request, list) and isinstance(answer, dict):
        items = [
            i for i in request if isinstance(i, dict) and "id" in i and i["id"] == answer.get("id")
        ]
        request = items[0] if items else None
    if not isinstance(request, dict):
        return None
    method = request.get("method")
    valid = (
        request.get("jsonrpc", "2.0") == "2.0"
        and _usable_id(request.get("id"))
        and isinstance(method, str)
        and method != ""
    )
    return method if valid else None


def check(response: httpx.Response) -> None:
    """Check `response` in the schema of the version that answered it (a card, the seeds'
    `GET /sse` and non-A2A paths are not A2A answers: left alone), as its body is read."""
    request = response.request
    if request.method == "HEAD":
        return  # no body to check
    header_version = request.headers.get("A2A-Version")
    media = media_type(response.headers.get("Content-Type"))
    raw = target(request).partition(b"?")[0].decode()
    path = "/" + unquote(raw).lstrip("/")  # as the server reads it (shared.bindings.wire)
    route = rest_route(request.method, path)
    if route is not None:
        operation, v0_3 = route[0].operation, route[1]

        def check_one(answer: Any) -> None:
            if v0_3:
                check_rest_v0_3_answer(answer, operation)
            else:
                check_rest_answer(answer, operation)

    elif _odd_path(raw, path):  # refused before any route: the HTTP face's google.rpc Status

        def check_one(answer: Any) -> None:
            check_rest_answer(answer, "none")

    elif "/v1/" in path:  # no JSON-RPC there: the 0.3 binding's not-found error

        def check_one(answer: Any) -> None:
            check_rest_v0_3_answer(answer, "none")

    elif request.method == "POST" and media in ("application/json", "text/event-stream"):
        # The method's dialect answers only a body that was read: not one declared as other
        # than JSON, nor one over the size limit (413); the header's dialect answers those.
        readable = (
            content_type_error(request.headers.get("Content-Type")) is None
            and response.status_code != 413
        )
        body = _request_body(request) if readable else None

        def check_one(answer: Any) -> None:
            check_rpc_answer(answer, _method_of(body, answer), header_version)

    else:
        return
    assert isinstance(response.stream, httpx.SyncByteStream)
    if media == "text/event-stream":
        response.stream = _CheckedStream(response.stream, each=check_one)
    elif media == "application/json":

        def check_whole(body: bytes) -> None:
            answer = json.loads(body)
            for one in answer if isinstance(answer, list) and route is None else [answer]:
                check_one(one)

        response.stream = _CheckedStream(response.stream, whole=check_whole)
