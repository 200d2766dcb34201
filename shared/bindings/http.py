"""The HTTP face of the `a2a` function: routes a Flask request to the card, REST or JSON-RPC.

It owns what is HTTP about A2A: the well-known card paths with caching headers, which paths
are the HTTP+JSON binding's (they win; any other POST is JSON-RPC), the body size limit,
authentication before any work, the status codes of REST answers, streamed answers as
server-sent events, the seeds' `GET /sse?taskId=` (the subscribe operation, framed as
`task_update` events), and turning every failure into the protocol's error body (never an
HTML page or a traceback).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import flask

from shared import streaming
from shared.bindings import body as front_door
from shared.bindings import jsonrpc, operations, rest, sse
from shared.bindings.console import Console
from shared.bindings.json_http import JSON, json_response
from shared.card import AgentCard
from shared.dialects.base import Dialect
from shared.dialects.registry import METHODS
from shared.dialects.v0_3 import V03
from shared.errors import (
    A2AError,
    InvalidParamsError,
    MethodNotFoundError,
    PayloadTooLargeError,
    UnauthenticatedError,
)
from shared.identity import AuthenticationError, Authenticator, Principal
from shared.push_signing import NotificationSigner
from shared.service import A2AService
from shared.settings import Settings

CARD_PATHS = frozenset(
    {"/.well-known/agent-card.json", "/.well-known/agent.json", "/.well-known/agent-card"}
)


def _rpc_error(
    error: A2AError, status: int = 200, dialect: Dialect = V03, request_id: Any = None
) -> flask.Response:
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    data = dialect.error_data(error)
    if data:
        body["data"] = data
    return json_response({"jsonrpc": "2.0", "id": request_id, "error": body}, status)


def _caller(body: bytes) -> tuple[Dialect, Any]:
    """The dialect and id of a JSON-RPC request refused before it is run (the method names
    the dialect; anything unreadable gets v0.3's shape and no id)."""
    try:
        envelope = front_door.parse(body)  # its limits: no recursion, nothing unencodable
    except A2AError:
        return V03, None
    if not isinstance(envelope, dict):
        return V03, None
    method, request_id = envelope.get("method"), envelope.get("id")
    found = METHODS.get(method) if isinstance(method, str) else None
    usable = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    return (found[1] if found else V03), (request_id if usable else None)


class _Unauthenticated(UnauthenticatedError):
    """No valid credentials, with the WWW-Authenticate challenge of the identity mode."""

    def __init__(self, detail: str, challenge: str) -> None:
        super().__init__(detail)
        self.challenge = challenge


def _rest_error(error: A2AError) -> flask.Response:
    return json_response(rest.error_body(error), error.http_status)


def _status_error(status: int, code: str, message: str) -> flask.Response:
    """A non-JSON-RPC route's error, shaped as google.rpc.Status like v1.0 REST errors."""
    return json_response({"error": {"code": status, "status": code, "message": message}}, status)


class HttpApp:
    def __init__(
        self,
        service: A2AService,
        card: AgentCard,
        authenticator: Authenticator,
        settings: Settings,
        signer: NotificationSigner | None = None,
    ) -> None:
        self.service = service
        self.card = card
        self.authenticator = authenticator
        self.settings = settings
        self.signer = signer
        # What close() lets go of: the queues the app was built with (shared.app).
        self.closers: list[Callable[[], None]] = []
        self.streams = streaming.StreamPolicy(
            keepalive=settings.stream_keepalive,
            duration=settings.stream_duration,
            idle=settings.stream_idle,
            slots=streaming.StreamSlots(settings.stream_limit, settings.owner_stream_limit),
        )
        self.console = Console() if settings.console else None  # A2A_CONSOLE

    def close(self) -> None:
        """Stop background queues (tests, and a process shutting down)."""
        for close in self.closers:
            close()

    def __call__(self, request: flask.Request) -> flask.Response:
        path = request.path.rstrip("/") or "/"
        if self.console is not None and self.console.owns(path):
            return self.console(request, path)
        if path in CARD_PATHS:
            if request.method not in ("GET", "HEAD"):
                return _status_error(405, "METHOD_NOT_ALLOWED", "the agent card is read with GET")
            return self._card(request)
        if path == "/.well-known/jwks.json":
            # The keys that verify push notification signatures (none when unsigned).
            keys = self.signer.jwks() if self.signer else {"keys": []}
            return json_response(keys, headers={"Cache-Control": "public, max-age=300"})
        if path == "/sse":
            return self._seed_sse(request)
        found = rest.match(request.method, path)
        if found is not None:
            return self._rest(request, *found)
        methods = rest.allowed(path)
        if methods:
            response = _status_error(
                405, "METHOD_NOT_ALLOWED", f"{path} takes {' or '.join(methods)}"
            )
            response.headers["Allow"] = ", ".join(methods)
            return response
        if request.method == "POST":
            # JSON-RPC at the root, and at any other path a deployment puts in front of it
            # (seed 002 posts to /api/a2a).
            return self._rpc(request)
        if path == "/":
            return _status_error(
                405,
                "METHOD_NOT_ALLOWED",
                "POST JSON-RPC requests here; the agent card is at /.well-known/agent-card.json",
            )
        return _rest_error(MethodNotFoundError(f"no route for {request.method} {request.path}"))

    def public_url(self, request: flask.Request) -> str:
        """The URL clients reach us by, also behind a proxy that sets X-Forwarded-*."""
        if self.settings.public_url:
            return self.settings.public_url
        proto = request.headers.get("X-Forwarded-Proto", request.scheme).split(",")[0].strip()
        host = request.headers.get("X-Forwarded-Host", request.host).split(",")[0].strip()
        return f"{proto}://{host}/"

    def _card(self, request: flask.Request) -> flask.Response:
        document = self.card.document(self.public_url(request))
        headers = {
            "ETag": document.etag,
            "Last-Modified": document.last_modified_header,
            "Cache-Control": f"public, max-age={self.settings.card_max_age}",
        }
        if document.not_modified(
            request.headers.get("If-None-Match"), request.headers.get("If-Modified-Since")
        ):
            return flask.Response(status=304, headers=headers)
        return flask.Response(document.body, mimetype=JSON, headers=headers)

    def _rpc(self, request: flask.Request) -> flask.Response:
        try:
            body = self._body(request)
        except PayloadTooLargeError as error:
            return _rpc_error(error, error.http_status)
        try:
            principal = self._authenticate(request)
        except UnauthenticatedError as error:
            dialect, request_id = _caller(body)
            return self._refused(_rpc_error(error, error.http_status, dialect, request_id), error)
        call = self._call(request, principal)
        answer = jsonrpc.dispatch(
            body,
            call=call,
            content_type=request.headers.get("Content-Type"),
            version=_version(request),
            max_batch=self.settings.max_batch,
        )
        if answer is None:
            return flask.Response(status=204)
        if isinstance(answer, jsonrpc.StreamAnswer):
            return sse.response(answer.events(), answer.streamed.frames)
        return json_response(answer)

    def _rest(
        self, request: flask.Request, route: rest.Route, ids: dict[str, str]
    ) -> flask.Response:
        try:
            body = self._body(request)
            principal = self._authenticate(request)
        except (PayloadTooLargeError, UnauthenticatedError) as error:
            return self._refused(_rest_error(error), error)
        call = self._call(request, principal)
        try:
            answer = rest.dispatch(
                route,
                ids,
                call=call,
                query=request.args.to_dict(),
                body=body,
                content_type=request.headers.get("Content-Type"),
                version=_version(request),
            )
        except A2AError as error:
            return _rest_error(error)
        if isinstance(answer, operations.Streamed):
            return sse.response(rest.stream_events(answer), answer.frames)
        return json_response(
            {} if answer is None else answer
        )  # a delete answers google.protobuf.Empty

    def _call(self, request: flask.Request, principal: Principal) -> operations.Call:
        """What an operation gets: the caller and, when the agent has one, its extended card
        at the URL this caller reaches us by."""
        extended = None
        if self.card.has_extended:
            extended = functools.partial(self.card.extended, self.public_url(request))
        return operations.Call(
            self.service, principal, self.streams, _last_event_id(request), extended
        )

    def _body(self, request: flask.Request) -> bytes:
        limit = self.settings.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise PayloadTooLargeError(
                f"the body has {request.content_length} bytes; the limit is {limit} "
                "(A2A_MAX_BODY_BYTES)"
            )
        body: bytes = request.stream.read(limit + 1)
        if len(body) > limit:
            raise PayloadTooLargeError(f"the body exceeds {limit} bytes")
        return body

    def _authenticate(self, request: flask.Request) -> Principal:
        try:
            return self.authenticator.authenticate(request.headers.get)
        except AuthenticationError as exc:
            raise _Unauthenticated(f"authentication required: {exc}", exc.challenge) from None

    def _refused(self, response: flask.Response, error: A2AError) -> flask.Response:
        """A request refused before any work; an unauthenticated one says what to send."""
        if isinstance(error, _Unauthenticated):
            response.headers["WWW-Authenticate"] = error.challenge
        return response

    def _seed_sse(self, request: flask.Request) -> flask.Response:
        """The seeds' `GET /sse?taskId=...`: the task's updates as `task_update` events; a
        task that has finished sends one, its end, and the stream closes."""
        if request.method != "GET":
            # Not even HEAD: a stream's headers are only sent once it holds a slot.
            response = _status_error(405, "METHOD_NOT_ALLOWED", "open the event stream with GET")
            response.headers["Allow"] = "GET"
            return response
        try:
            principal = self._authenticate(request)
        except UnauthenticatedError as error:
            return self._refused(_rpc_error(error, error.http_status), error)
        call = self._call(request, principal)
        try:
            task_id = request.args.get("taskId") or request.args.get("id")
            if not task_id:
                raise InvalidParamsError("the query needs taskId=<task id>", field="taskId")
            streamed = operations.run("watch", call, {"id": task_id}, V03)
        except A2AError as error:
            return _rpc_error(error, error.http_status)
        return sse.response(sse.task_updates(streamed.frames), streamed.frames)


def _version(request: flask.Request) -> str | None:
    """The A2A-Version the client asks for: the header, or the query parameter (S1 §3.6)."""
    return request.headers.get("A2A-Version") or request.args.get("A2A-Version")


def _last_event_id(request: flask.Request) -> str | None:
    """Where a stream resumes: the SSE header, or a query parameter for clients (browsers'
    EventSource on a new URL, curl users) that cannot set it."""
    return request.headers.get("Last-Event-ID") or request.args.get("lastEventId")
