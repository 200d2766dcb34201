"""The HTTP face of the `a2a` function: routes a request to the card, REST or JSON-RPC.

It owns what is HTTP about A2A: the well-known card paths with caching headers, which paths
are the HTTP+JSON bindings' (1.0's, and 0.3's under `/v1/`: they win; any other POST is
JSON-RPC), the path prefix (A2A_PUBLIC_URL's path, taken off the paths that carry it, so
a deployment behind a path still routes; a path no route takes with a `.` or `..` segment or
an encoded slash is refused, not served as JSON-RPC), what an agent without credentials
refuses (shared.bindings.local_only: other hosts' names, other pages), the body size limit,
authentication before any work (the body is read past what came with the head only once
the caller is known, and a refused one is never parsed: a 401 to JSON-RPC has no id), the
status codes of REST answers, streamed answers as
server-sent events, the seeds' `GET /sse?taskId=` (the subscribe operation, framed as
`task_update` events), and turning every failure into the protocol's error body (never an
HTML page or a traceback).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from shared import extensions, streaming
from shared.bindings import jsonrpc, operations, rest, rest_v0_3, sse
from shared.bindings.console import Console
from shared.bindings.json_http import JSON, content_type_error, json_response
from shared.bindings.local_only import LocalOnly
from shared.bindings.wire import Answer, BodyRefused, Request, http_log, logged_when_answered
from shared.card import AgentCard
from shared.card_signing import JWKS_PATH
from shared.dialects.base import Dialect
from shared.dialects.v0_3 import V03
from shared.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    PayloadTooLargeError,
    UnauthenticatedError,
)
from shared.identity import AuthenticationError, Authenticator, Principal
from shared.observability.context import CLOUD_TRACE, TRACEPARENT, answered, note, owner_tag
from shared.observability.work import Kept, unit
from shared.pause import Later, Pause, Waiting
from shared.push_signing import NotificationSigner
from shared.service import A2AService
from shared.settings import Settings
from shared.signing_keys import jwks
from shared.stream_slots import StreamSlots

CARD_PATHS = frozenset(
    {"/.well-known/agent-card.json", "/.well-known/agent.json", "/.well-known/agent-card"}
)


def _rpc_error(
    error: A2AError, status: int = 200, dialect: Dialect = V03, request_id: Any = None
) -> Answer:
    answered(error.code, error.reason, error.http_status)
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    data = dialect.error_data(error)
    if data:
        body["data"] = data
    return json_response({"jsonrpc": "2.0", "id": request_id, "error": body}, status)


class _Unauthenticated(UnauthenticatedError):
    """No valid credentials, with the WWW-Authenticate challenge of the identity mode."""

    def __init__(self, detail: str, challenge: str) -> None:
        super().__init__(detail)
        self.challenge = challenge


class _BodyLate(InvalidRequestError):
    """The body did not come within A2A_BODY_READ_SECONDS."""

    http_status = 408
    grpc_status = "DEADLINE_EXCEEDED"


class _NoRoom(A2AError):
    """The instance holds as many body bytes as A2A_MAX_BUFFERED_BYTES lets it: retry in
    `retry_after` seconds (JSON-RPC's server-error range, as a stream over its limit)."""

    code = -32000
    default_message = "No room for the request's body"
    reason = "RESOURCE_EXHAUSTED"
    http_status = 503
    grpc_status = "UNAVAILABLE"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class RestBinding(Protocol):
    """What a version's HTTP+JSON binding module provides (shared.bindings.rest, rest_v0_3)."""

    MEDIA_TYPE: str  # its answers' and errors' Content-Type

    def match(self, method: str, path: str) -> tuple[rest.Route, dict[str, str]] | None: ...

    def allowed(self, path: str) -> list[str]: ...

    def dispatch(
        self,
        route: rest.Route,
        ids: Mapping[str, str],
        *,
        call: operations.Call,
        query: Mapping[str, str],
        body: bytes,
        content_type: str | None,
        version: str | None,
    ) -> Any: ...

    def error_body(self, error: A2AError) -> dict[str, Any]: ...

    def stream_events(self, streamed: operations.Streamed) -> sse.Events: ...


def _rest_error(error: A2AError, binding: RestBinding = rest) -> Answer:
    answered(error.code, error.reason, error.http_status)
    return json_response(binding.error_body(error), error.http_status, None, binding.MEDIA_TYPE)


def _shown(path: str, limit: int = 200) -> str:
    """A path as an error names it: a long one is cut (an answer must not echo 1 MB back)."""
    return path if len(path) <= limit else path[:limit] + "..."


def _path_problem(request: Request) -> str | None:
    """Why a path is no A2A path at all: a `.` or `..` segment, or an encoded slash (ids never
    hold one), which only the raw path shows."""
    if any(segment in (".", "..") for segment in request.path.split("/")):
        return "the path has a '.' or '..' segment: send the path as the agent card names it"
    if "%2f" in request.raw_path.lower():
        return "the path has an encoded slash (%2F): no A2A path or id holds one"
    return None


def _status_error(status: int, code: str, message: str, media_type: str = JSON) -> Answer:
    """A non-JSON-RPC route's error, shaped as google.rpc.Status like v1.0 REST errors."""
    body = {"error": {"code": status, "status": code, "message": message}}
    return json_response(body, status, None, media_type)


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
        # Served under a path (https://host/agents/x): requests may carry it, or a proxy may
        # have taken it off; either way the routes below are matched without it.
        self.prefix = urlsplit(settings.public_url).path.rstrip("/") if settings.public_url else ""
        self.authenticator = authenticator
        self.settings = settings
        self.signer = signer
        # What close() lets go of: the queues the app was built with (shared.app).
        self.closers: list[Callable[[], None]] = []
        self.streams = streaming.StreamPolicy(
            keepalive=settings.stream_keepalive,
            duration=settings.stream_duration,
            idle=settings.stream_idle,
            slots=StreamSlots(settings.stream_limit, settings.owner_stream_limit),
        )
        self.console = Console() if settings.console else None  # A2A_CONSOLE
        # An agent that asks no credentials serves only this machine (shared.bindings.local_only).
        self.local_only = LocalOnly(settings.public_url) if settings.auth == "none" else None

    def close(self) -> None:
        """Stop background queues (tests, and a process shutting down)."""
        for close in self.closers:
            close()

    def __call__(self, request: Request) -> Answer:
        """The answer, and the request's one log line (shared.observability): written as
        the answer is handed back, or, for a stream, when the stream ends."""
        opened = unit(
            "request",
            traceparent=request.headers.get(TRACEPARENT),
            cloud_trace=request.headers.get(CLOUD_TRACE),
        )
        with opened as record:
            response = self._route(request)
            if response.later is not None:  # it waits for a turn: its line, once answered
                return Answer(later=logged_when_answered(request, response.later, opened.keep()))
            record.fields["httpRequest"] = http_log(request, response.status)
            if response.chunks is not None:  # streamed: an event stream (sse.response)
                record.fields["openStreams"] = self.streams.slots.held
                response = _logged_at_end(response, response.chunks, opened.keep())
        return response

    def _route(self, request: Request) -> Answer:
        path = self._route_path(request.path)
        if self.local_only is not None:
            refused = self.local_only.refusal(request)
            if refused is not None:
                return self._not_served(request, path, refused)
        if self.console is not None and self.console.owns(path):
            return self.console(request, path)
        if path in CARD_PATHS:
            if request.method not in ("GET", "HEAD"):
                return _status_error(405, "METHOD_NOT_ALLOWED", "the agent card is read with GET")
            return self._card(request)
        if path == JWKS_PATH:
            # The keys that verify push notification and card signatures (none when unsigned).
            keys = jwks(
                self.signer.key if self.signer else None,
                self.card.signer.key if self.card.signer else None,
            )
            return json_response(keys, headers={"Cache-Control": "public, max-age=300"})
        if path == "/sse":
            return self._seed_sse(request)
        if path == "/":
            # JSON-RPC's own path, which no route of either binding takes (decided without
            # walking their tables: most requests come here).
            problem = _path_problem(request)  # `/%2F` is `/` to the router
            if problem is not None:
                return _status_error(400, "INVALID_ARGUMENT", problem)
            if request.method == "POST":
                return self._rpc(request)
            return _status_error(
                405,
                "METHOD_NOT_ALLOWED",
                "POST JSON-RPC requests here; the agent card is at /.well-known/agent-card.json",
            )
        binding: RestBinding = rest_v0_3 if path.startswith(rest_v0_3.PREFIX + "/") else rest
        found = binding.match(request.method, path)
        if found is not None:
            response = self._rest(request, binding, *found)  # an odd id: the id rule's 400
            if found[0].operation == "extended_card" and response.status == 200:
                response.headers.update(self._card_caching(shared=False))
            return response
        problem = _path_problem(request)
        if problem is not None:
            return _status_error(400, "INVALID_ARGUMENT", problem)
        methods = binding.allowed(path)
        if methods:
            takes = f"{_shown(path)} takes {' or '.join(methods)}"
            if binding is rest:
                response = _status_error(405, "METHOD_NOT_ALLOWED", takes, rest.MEDIA_TYPE)
            else:  # v0.3's error body, its code the nearest JSON-RPC has
                error_body = binding.error_body(MethodNotFoundError(takes))
                response = json_response(error_body, 405, None, binding.MEDIA_TYPE)
            response.headers["Allow"] = ", ".join(methods)
            return response
        if binding is rest_v0_3:  # no JSON-RPC under /v1/: an unknown path is not found
            return _rest_error(
                MethodNotFoundError(f"no route for {request.method} {_shown(path)}"), binding
            )
        if request.method == "POST":
            # JSON-RPC at any other path a deployment puts in front of it (seed 002 posts to
            # /api/a2a).
            return self._rpc(request)
        return _rest_error(
            MethodNotFoundError(f"no route for {request.method} {_shown(request.path)}")
        )

    def _not_served(self, request: Request, path: str, error: A2AError) -> Answer:
        """A request the local-only checks refuse, in the error shape of the binding its path
        and method are routed to (as `_route` routes them): refused as HTTP, before any
        binding reads it, so with the refusal's HTTP status (401 and 413 are answered so
        too), except a missing type's -32005, which JSON-RPC answers as it does elsewhere."""
        if path.startswith(rest_v0_3.PREFIX + "/"):
            return _rest_error(error, rest_v0_3)
        rpc = path == "/sse" or (
            request.method == "POST"
            and path not in CARD_PATHS
            and (path == "/" or rest.match(request.method, path) is None)
        )
        if rpc:
            dialect = jsonrpc.version_dialect(_version(request))
            if isinstance(error, ContentTypeNotSupportedError):
                if content_type_error(request.headers.get("Content-Type")) is not None:
                    # JSON-RPC refuses a body declared as something else itself, with the
                    # request's id when it can read one (jsonrpc.dispatch): its answer.
                    return self._rpc(request)
                # None declared: -32005 as JSON-RPC answers a declared one, with HTTP 200 (the
                # wire reference: JSON-RPC's errors are answered 200).
                return _rpc_error(error, 200, dialect)
            return _rpc_error(error, error.http_status, dialect)
        return _rest_error(error)  # the card, the console and REST 1.0: google.rpc.Status

    def _route_path(self, path: str) -> str:
        """The path the routes know: without the prefix (when it carries it) and a final `/`."""
        if self.prefix and (path == self.prefix or path.startswith(self.prefix + "/")):
            path = path[len(self.prefix) :]
        return path.rstrip("/") or "/"

    def public_url(self, request: Request) -> str:
        """The URL clients reach us by, also behind a proxy that sets X-Forwarded-*."""
        if self.settings.public_url:
            return self.settings.public_url
        headers = request.headers
        proto = (headers.get("X-Forwarded-Proto") or request.scheme).split(",")[0].strip()
        host = (headers.get("X-Forwarded-Host") or request.host).split(",")[0].strip()
        return f"{proto}://{host}/"

    def _card(self, request: Request) -> Answer:
        document = self.card.document(self.public_url(request))
        caching = self._card_caching(shared=True)
        if document.not_modified(
            request.headers.get("If-None-Match"), request.headers.get("If-Modified-Since")
        ):
            # A 304 carries no entity headers (RFC 9110 §15.4.5): not Last-Modified.
            return Answer(304, {"ETag": document.etag, **caching})
        headers = {
            "Content-Type": JSON,
            "ETag": document.etag,
            "Last-Modified": document.last_modified_header,
            **caching,
        }
        return Answer(200, headers, document.body)

    def _card_caching(self, *, shared: bool) -> dict[str, str]:
        """How a card (`shared`: the public one; else the extended one, an authenticated
        caller's, which no shared cache keeps) may be cached. Its URLs are A2A_PUBLIC_URL's;
        without one they are the request's Host and X-Forwarded-*, which a shared cache
        keyed by URL alone would serve to everyone (one forged header poisoning it): then
        only the caller's own cache keeps it (`private`: still with the max-age the TCK's
        CARD-CACHE-001 asks), and Vary says what it depends on."""
        max_age = f"max-age={self.settings.card_max_age}"
        if self.settings.public_url is None:
            return {
                "Cache-Control": f"private, {max_age}",
                "Vary": "Host, X-Forwarded-Host, X-Forwarded-Proto",
            }
        return {"Cache-Control": f"{'public' if shared else 'private'}, {max_age}"}

    def _rpc(self, request: Request) -> Answer:
        # Refused before the body is read (too large, no credentials, an unusable header, a
        # body that does not come): never parsed, so the answer has no id (JSON-RPC's null),
        # in the dialect the A2A-Version header asks for.
        try:
            self._declared(request)
            principal = self._authenticate(request)
            call = self._call(request, principal)
            body = self._body(request)
        except A2AError as error:
            dialect = jsonrpc.version_dialect(_version(request))
            return self._refused(_rpc_error(error, error.http_status, dialect), error)
        answer = jsonrpc.dispatch(
            body,
            call=call,
            content_type=request.headers.get("Content-Type"),
            version=_version(request),
            max_batch=self.settings.max_batch,
        )
        if isinstance(answer, Later):  # a blocking send's: once its turn ended
            return Answer(later=answer.then(lambda value: _echo(_rpc_answer(value), call)).rest())
        return _echo(_rpc_answer(answer), call)

    def _rest(
        self,
        request: Request,
        binding: RestBinding,
        route: rest.Route,
        ids: dict[str, str],
    ) -> Answer:
        try:  # too large, no credentials, an unusable header, a body that does not come
            self._declared(request)
            principal = self._authenticate(request)
            call = self._call(request, principal)
            body = self._body(request)
        except A2AError as error:
            return self._refused(_rest_error(error, binding), error)
        try:
            answer = binding.dispatch(
                route,
                ids,
                call=call,
                query=request.args,
                body=body,
                content_type=request.headers.get("Content-Type"),
                version=_version(request),
            )
        except A2AError as error:
            return _echo(_rest_error(error, binding), call)
        if isinstance(answer, Later):  # a blocking send's: once its turn ended
            return Answer(later=_rest_later(answer, binding, call))
        return _echo(_rest_answer(answer, binding), call)

    def _call(self, request: Request, principal: Principal) -> operations.Call:
        """What an operation gets: the caller, the extensions its request activates and, when
        the agent has one, its extended card at the URL this caller reaches us by. Raises
        InvalidRequestError for an A2A-Extensions header over its limits."""
        extended = None
        if self.card.has_extended:
            extended = functools.partial(self.card.extended, self.public_url(request))
        return operations.Call(
            self.service,
            principal,
            self.streams,
            _last_event_id(request),
            extended,
            extensions.activate(
                self.service.handler.extensions,
                request.headers.values,
                extensions.kit(self.settings.push_notifications),
            ),
            self.settings.streaming,
        )

    def _declared(self, request: Request) -> None:
        """Refuse a body whose declared length is over the limit (the front read none of it)."""
        limit = self.settings.max_body_bytes
        length = request.headers.declared_length()
        if length is not None and length > limit:
            raise PayloadTooLargeError(
                f"the body has {length} bytes; the limit is {limit} (A2A_MAX_BODY_BYTES)"
            )

    def _body(self, request: Request) -> bytes:
        """The body, read now that the caller is known (shared.bindings.asgi: at most the
        limit and one byte, within A2A_BODY_READ_SECONDS and A2A_MAX_BUFFERED_BYTES)."""
        try:
            body = request.read()
        except BodyRefused as refused:
            if refused.retry_after is not None:
                raise _NoRoom(refused.message, refused.retry_after) from None
            raise _BodyLate(refused.message) from None
        limit = self.settings.max_body_bytes
        if len(body) > limit:
            raise PayloadTooLargeError(
                f"the body exceeds {limit} bytes (A2A_MAX_BODY_BYTES): send less, or "
                "send large content as a file part by URL"
            )
        return body

    def _authenticate(self, request: Request) -> Principal:
        try:
            principal = self.authenticator.authenticate(request.headers.get)
        except AuthenticationError as exc:
            raise _Unauthenticated(f"authentication required: {exc}", exc.challenge) from None
        note(owner=owner_tag(principal.owner))
        if self.local_only is None:
            # Its body and answer count in its share of the instance's room; without
            # credentials (A2A_AUTH=none) every caller is the one owner: the instance's room.
            request.owner = principal.owner
        return principal

    def _refused(self, response: Answer, error: A2AError) -> Answer:
        """A request refused before any work; an unauthenticated one says what to send, one
        refused for want of room when to send it again."""
        if isinstance(error, _Unauthenticated):
            response.headers["WWW-Authenticate"] = error.challenge
        elif isinstance(error, _NoRoom):
            response.headers["Retry-After"] = str(error.retry_after)
        return response

    def _seed_sse(self, request: Request) -> Answer:
        """The seeds' `GET /sse?taskId=...`: the task's updates as `task_update` events; a
        task that has finished sends one, its end, and the stream closes."""
        if request.method != "GET":
            # Not even HEAD: a stream's headers are only sent once it holds a slot.
            response = _status_error(405, "METHOD_NOT_ALLOWED", "open the event stream with GET")
            response.headers["Allow"] = "GET"
            return response
        try:
            principal = self._authenticate(request)
            call = self._call(request, principal)
        except InvalidRequestError as error:
            return self._refused(_rpc_error(error, error.http_status), error)
        try:
            task_id = request.query("taskId") or request.query("id")
            if not task_id:
                raise InvalidParamsError("the query needs taskId=<task id>", field="taskId")
            streamed = operations.run("watch", call, {"id": task_id}, V03)
        except A2AError as error:
            return _rpc_error(error, error.http_status)
        return sse.response(sse.task_updates(streamed.frames), streamed.frames)


def _rpc_answer(answer: Any) -> Answer:
    """The HTTP answer of what JSON-RPC answered (None: notifications only)."""
    if answer is None:
        return Answer(204)
    if isinstance(answer, jsonrpc.StreamAnswer):
        return sse.response(answer.events(), answer.streamed.frames)
    return json_response(answer)


def _rest_answer(answer: Any, binding: RestBinding) -> Answer:
    """The HTTP answer of a REST operation's result."""
    if isinstance(answer, operations.Streamed):
        return sse.response(binding.stream_events(answer), answer.frames)
    # A delete answers google.protobuf.Empty.
    return json_response({} if answer is None else answer, media_type=binding.MEDIA_TYPE)


def _rest_later(later: Later[Any], binding: RestBinding, call: operations.Call) -> Waiting[Answer]:
    """A REST operation's answer once its turn ended: its result, or its error."""
    try:
        answer = _rest_answer((yield from later.rest()), binding)
    except A2AError as error:
        answer = _rest_error(error, binding)
    return _echo(answer, call)


def _logged_at_end(answer: Answer, chunks: Iterator[bytes | Pause], kept: Kept) -> Answer:
    """A stream whose chunks are made in its request's unit of work, and whose line is
    written once it is closed (the front closes it however it ended: the last chunk, the
    client gone, the server stopping)."""

    def close() -> None:
        try:
            answer.close()  # its events end: a streamed turn's thread is joined first
        finally:
            kept.end()

    return Answer(answer.status, answer.headers, chunks=kept.within(chunks), close=close)


def _echo(response: Answer, call: operations.Call) -> Answer:
    """The answer, with the extensions its request activated in the header(s) it used."""
    echoed = call.extensions.echo()
    if echoed:  # most requests activate none: no pass over the answer's headers
        response.headers.update(echoed)
    return response


def _version(request: Request) -> str | None:
    """The A2A-Version the client asks for: the header, or the query parameter (S1 §3.6)."""
    return request.headers.get("A2A-Version") or request.query("A2A-Version")


def _last_event_id(request: Request) -> str | None:
    """Where a stream resumes: the SSE header, or a query parameter for clients (browsers'
    EventSource on a new URL, curl users) that cannot set it."""
    return request.headers.get("Last-Event-ID") or request.query("lastEventId")
