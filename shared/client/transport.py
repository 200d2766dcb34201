"""The client's HTTP: JSON-RPC calls and server-sent event streams over httpx, every failure
turned into one `ClientError` whose message says what went wrong and what to do.

No A2A knowledge here beyond the JSON-RPC envelope and the `A2A-Version` header: the
session (`session.py`) decides methods, shapes and versions.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import httpx_sse

# JSON-RPC and A2A error codes, for a message that names the error (a2a-wire.md, section 3).
ERROR_NAMES = {
    -32700: "JSONParseError",
    -32600: "InvalidRequestError",
    -32601: "MethodNotFoundError",
    -32602: "InvalidParamsError",
    -32603: "InternalError",
    -32001: "TaskNotFoundError",
    -32002: "TaskNotCancelableError",
    -32003: "PushNotificationNotSupportedError",
    -32004: "UnsupportedOperationError",
    -32005: "ContentTypeNotSupportedError",
    -32006: "InvalidAgentResponseError",
    -32007: "ExtendedAgentCardNotConfiguredError",
    -32008: "ExtensionSupportRequiredError",
    -32009: "VersionNotSupportedError",
}
# Seconds to connect, and to wait for the next bytes of an answer or a stream (the server
# sends keep-alive comments every 15 s by default, so a silent minute means it is gone).
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 330.0  # a blocking send may take the function's whole timeout (300 s)


class ClientError(Exception):
    """A call failed; the message is one line fit for a terminal (what, and the fix).
    `code` is the JSON-RPC error code or the HTTP status; `retryable` says the agent may
    answer a second try (it could not be reached, or failed on its side)."""

    def __init__(self, message: str, *, code: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable


class StreamInterrupted(ClientError):
    """A stream ended without its end (the connection dropped): resubscribe to go on."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


@dataclass(frozen=True)
class Event:
    """One event of a stream: its `id:` (the server's sequence number) and its JSON-RPC result."""

    id: str | None
    result: dict[str, Any]


class Transport:
    """POSTs JSON-RPC to one endpoint with the caller's credentials and version header."""

    def __init__(
        self,
        headers: Mapping[str, str] | None = None,
        *,
        http: httpx.Client | None = None,
    ) -> None:
        timeout = httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT)
        self.http = http or httpx.Client(timeout=timeout, follow_redirects=False)
        self.headers = dict(headers or {})
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.http.close()

    def get_json(self, url: str) -> dict[str, Any]:
        """GET a JSON object (the agent card)."""
        with _errors(url):
            response = self.http.get(url, headers=self.headers)
        _check_status(response, url)
        return _json_object(response, url)

    def call(
        self,
        url: str,
        method: str,
        params: Any,
        version: str,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """One JSON-RPC call (with `headers` of its own on top); its result, or ClientError
        with the error's code and message."""
        body = self._body(method, params)
        with _errors(url):
            response = self.http.post(
                url, json=body, headers=self._headers(version) | dict(headers or {})
            )
        _check_status(response, url)
        return _result(_json_object(response, url), method)

    def stream(
        self,
        url: str,
        method: str,
        params: Any,
        version: str,
        *,
        last_event_id: str | None = None,
    ) -> Iterator[Event]:
        """The results of a streaming JSON-RPC call, one per event; StreamInterrupted when the
        connection drops mid-stream (the server ending the stream is a normal end)."""
        headers = self._headers(version) | {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        body = self._body(method, params)
        with (
            _errors(url),
            httpx_sse.connect_sse(self.http, "POST", url, json=body, headers=headers) as source,
        ):
            response = source.response
            if response.status_code >= 400 or "text/event-stream" not in response.headers.get(
                "content-type", ""
            ):
                response.read()
                _check_status(response, url)
                # An error before the stream started comes as a plain JSON-RPC answer.
                yield Event(None, _result(_json_object(response, url), method))
                return
            try:
                for sse in source.iter_sse():
                    if not sse.data and sse.event != "error":
                        # No data, no event (the SSE rule). httpx-sse 0.4.3 yields one for
                        # each keep-alive comment after an event with an id (its issue 35).
                        continue
                    if sse.event == "error":
                        raise ClientError(f"the stream failed: {sse.data}")
                    try:
                        answer = json.loads(sse.data)
                    except ValueError:
                        raise ClientError(f"{url} sent a stream event that is not JSON") from None
                    if not isinstance(answer, dict):
                        raise ClientError(f"{url} sent a stream event that is not an object")
                    yield Event(sse.id or None, _result(answer, method))
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.ReadTimeout) as exc:
                raise StreamInterrupted(f"the stream from {url} was cut: {exc}") from None

    def _body(self, method: str, params: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    def _headers(self, version: str) -> dict[str, str]:
        # 0.3 clients send no version header (a missing one means 0.3, a2a-wire.md, section 6).
        extra = {"A2A-Version": version} if version != "0.3" else {}
        return self.headers | {"Content-Type": "application/json"} | extra


@contextmanager
def _errors(url: str) -> Iterator[None]:
    """httpx's failures as ClientError, each saying what to check."""
    try:
        yield
    except httpx.ConnectError as exc:
        raise ClientError(
            f"cannot connect to {url} ({_reason(exc)}): is the agent running there? "
            "(`make run` or `make dev` serves one on http://localhost:8080)",
            retryable=True,
        ) from None
    except httpx.TimeoutException:
        raise ClientError(f"{url} did not answer in time", retryable=True) from None
    except httpx.InvalidURL as exc:
        raise ClientError(f"{url} is not a URL this client can call: {exc}") from None
    except httpx.UnsupportedProtocol:
        raise ClientError(f"{url}: the URL must start with http:// or https://") from None
    except httpx.HTTPError as exc:
        raise ClientError(f"the call to {url} failed: {exc}") from None


def _reason(exc: httpx.ConnectError) -> str:
    text = str(exc)
    return "connection refused" if "refused" in text.lower() else text or type(exc).__name__


def _check_status(response: httpx.Response, url: str) -> None:
    status = response.status_code
    if status < 300:
        return
    detail = _error_detail(response)
    if status == 401:
        raise ClientError(
            f"HTTP 401 from {url}: {detail or 'credentials needed'}; pass --api-key KEY, "
            "--token TOKEN or --google (an ID token from your Google credentials)",
            code=status,
        )
    if status == 403:
        raise ClientError(
            f"HTTP 403 from {url}: {detail or 'forbidden'}; these credentials may not call "
            "this agent (IAM: ask for roles/run.invoker on it)",
            code=status,
        )
    if 300 <= status < 400:
        raise ClientError(
            f"HTTP {status} from {url} (to {response.headers.get('location', '?')}): "
            "use the URL it names",
            code=status,
        )
    raise ClientError(
        f"HTTP {status} from {url}: {detail or response.reason_phrase}",
        code=status,
        retryable=status >= 500,
    )


def _error_detail(response: httpx.Response) -> str:
    """The server's own words from an error body (JSON or a short text), if any."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:200] if text and "<" not in text[:1] else ""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("message", ""))[:300]
        if isinstance(error, str):
            return error[:300]
    return ""


def _json_object(response: httpx.Response, url: str) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        raise ClientError(f"{url} answered with something that is not JSON") from None
    if not isinstance(body, dict):
        raise ClientError(f"{url} answered with JSON that is not an object")
    return body


def _result(answer: dict[str, Any], method: str) -> Any:
    error = answer.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        name = ERROR_NAMES.get(code, "error") if isinstance(code, int) else "error"
        message = str(error.get("message") or "no message")
        raise ClientError(f"{method}: {name} ({code}): {message}", code=code)
    if "result" not in answer:
        raise ClientError(f"{method}: the answer has neither result nor error")
    return answer["result"]
