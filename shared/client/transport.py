"""The client's HTTP: JSON-RPC calls and server-sent event streams over httpx, every failure
turned into one `ClientError` whose message says what went wrong and what to do.

Credentials go only where the caller trusts them: `credentials` are added to a request only
when its URL is on one of the `trusted` origins (the origin the card came from, and those the
caller named), so a card cannot send them elsewhere by naming another endpoint. `--debug`
logs each exchange to stderr with every credential and service parameter value redacted.
No A2A knowledge here beyond the JSON-RPC envelope and the `A2A-Version` header: the
session (`session.py`) decides methods, shapes and versions.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

import httpx
import httpx_sse

from shared.client.errors import (
    AUTH_FAILED,
    CREDENTIALS_MISSING,
    INTERNAL,
    TIMEOUT,
    UNREACHABLE,
    USAGE,
    ClientError,
    StreamInterrupted,
    protocol_error,
)
from shared.client.render import printable

# Seconds to connect, and to wait for the next bytes of an answer or a stream (the server
# sends keep-alive comments every 15 s by default, so a silent minute means it is gone).
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 330.0  # a blocking send may take the function's whole timeout (300 s)
DEBUG_BODY_CHARS = 4000  # of a body in the debug log: enough to read, not a flood
REDACTED = "[redacted]"
_DEFAULT_PORTS = {"http": 80, "https": 443}
CREDENTIAL_HINT = (
    "pass --api-key KEY or --bearer TOKEN (or set A2ACLI_API_KEY / A2ACLI_BEARER), "
    "or --google for an IAM-protected agent"
)


def origin(url: str) -> str | None:
    """`scheme://host:port` of an http(s) URL, the port always written; None for others."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return None
    scheme = parsed.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parsed.host:
        return None
    host = parsed.host.lower()
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{parsed.port or _DEFAULT_PORTS[scheme]}"


@dataclass(frozen=True)
class Event:
    """One event of a stream: its `id:` (the server's sequence number) and its JSON-RPC result."""

    id: str | None
    result: dict[str, Any]


class Transport:
    """POSTs JSON-RPC with the version header, service parameters (`headers`) and, to trusted
    origins only, the caller's `credentials`."""

    def __init__(
        self,
        headers: Mapping[str, str] | None = None,
        *,
        http: httpx.Client | None = None,
        verify: bool = True,
        debug: TextIO | None = None,
    ) -> None:
        timeout = httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT)
        self.http = http or httpx.Client(timeout=timeout, follow_redirects=False, verify=verify)
        self.headers = dict(headers or {})
        self.credentials: dict[str, str] = {}
        self.trusted: set[str] = set()
        self.deadline: float | None = None  # time.monotonic() past which --timeout expired
        self.debug = debug
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.http.close()

    def get_json(self, url: str, version: str) -> dict[str, Any]:
        """GET a JSON object (the agent card, a JWKS)."""
        headers, credentialed = self._headers(url, version)
        self._log_request("GET", url, headers, None)
        with self._errors(url):
            started = time.monotonic()
            response = self.http.get(url, headers=headers, timeout=self._timeout())
            self._log_response(response, started)
        self._check_status(response, url, credentialed)
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
        with the error's name, code and message."""
        body = self._body(method, params)
        sent, credentialed = self._headers(url, version)
        sent |= {"Content-Type": "application/json", **(headers or {})}
        self._log_request("POST", url, sent, body)
        with self._errors(url):
            started = time.monotonic()
            response = self.http.post(url, json=body, headers=sent, timeout=self._timeout())
            self._log_response(response, started)
        self._check_status(response, url, credentialed)
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
        headers, credentialed = self._headers(url, version)
        headers |= {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        body = self._body(method, params)
        self._log_request("POST", url, headers, body)
        started = time.monotonic()
        with (
            self._errors(url),
            httpx_sse.connect_sse(
                self.http, "POST", url, json=body, headers=headers, timeout=self._timeout()
            ) as source,
        ):
            response = source.response
            if response.status_code >= 400 or "text/event-stream" not in response.headers.get(
                "content-type", ""
            ):
                response.read()
                self._log_response(response, started)
                self._check_status(response, url, credentialed)
                # An error before the stream started comes as a plain JSON-RPC answer.
                yield Event(None, _result(_json_object(response, url), method))
                return
            self._log(f"< {response.status_code} event stream after {_ms(started)} ms")
            try:
                for sse in source.iter_sse():
                    if not sse.data and sse.event != "error":
                        # No data, no event (the SSE rule). httpx-sse 0.4.3 yields one for
                        # each keep-alive comment after an event with an id (its issue 35).
                        continue
                    self._log(f"< event {sse.id or '-'}: {_clip(sse.data)}")
                    if sse.event == "error":
                        raise ClientError(f"the stream failed: {sse.data}")
                    try:
                        answer = json.loads(sse.data)
                    except ValueError:
                        raise ClientError(f"{url} sent a stream event that is not JSON") from None
                    if not isinstance(answer, dict):
                        raise ClientError(f"{url} sent a stream event that is not an object")
                    yield Event(sse.id or None, _result(answer, method))
            except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
                raise StreamInterrupted(f"the stream from {url} was cut: {exc}") from None

    def _body(self, method: str, params: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    def _headers(self, url: str, version: str) -> tuple[dict[str, str], bool]:
        """The headers of a request to `url`, and whether they carry the credentials."""
        # 0.3 clients send no version header (a missing one means 0.3, a2a-wire.md, section 6).
        headers = self.headers | ({"A2A-Version": version} if version != "0.3" else {})
        credentialed = bool(self.credentials) and origin(url) in self.trusted
        return (headers | self.credentials if credentialed else headers), credentialed

    def check_deadline(self) -> None:
        """A2ACLI_ERR_TIMEOUT once --timeout has expired (a stream's events keep coming)."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise _timed_out()

    def _timeout(self) -> httpx.Timeout:
        if self.deadline is None:
            return httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT)
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _timed_out()
        return httpx.Timeout(min(READ_TIMEOUT, left), connect=min(CONNECT_TIMEOUT, left))

    @contextmanager
    def _errors(self, url: str) -> Iterator[None]:
        """httpx's failures as ClientError, each saying what to check."""
        try:
            yield
        except httpx.ConnectError as exc:
            raise ClientError(
                f"cannot connect to {url} ({_reason(exc)})",
                error=UNREACHABLE,
                hint="is the agent running there? `make run` serves one on http://localhost:8080",
                retryable=True,
            ) from None
        except httpx.TimeoutException:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise _timed_out() from None
            raise ClientError(
                f"{url} did not answer in time", error=UNREACHABLE, retryable=True
            ) from None
        except httpx.InvalidURL as exc:
            raise ClientError(
                f"{url} is not a URL this client can call: {exc}", error=USAGE
            ) from None
        except httpx.UnsupportedProtocol:
            raise ClientError(
                f"{url}: the URL must start with http:// or https://", error=USAGE
            ) from None
        except httpx.HTTPError as exc:
            raise ClientError(
                f"the call to {url} failed: {exc}", error=UNREACHABLE, retryable=True
            ) from None

    def _check_status(self, response: httpx.Response, url: str, credentialed: bool) -> None:
        status = response.status_code
        if status < 300:
            return
        detail = _error_detail(response)
        if status == 401:
            if credentialed:
                raise ClientError(
                    f"HTTP 401 from {url}: {detail or 'credentials refused'}",
                    error=AUTH_FAILED,
                    hint="check the key or token; " + CREDENTIAL_HINT,
                    code=status,
                )
            withheld = bool(self.credentials)
            raise ClientError(
                f"HTTP 401 from {url}: {detail or 'credentials needed'}",
                error=CREDENTIALS_MISSING,
                hint=(
                    f"credentials go only to {', '.join(sorted(self.trusted)) or 'no origin'} "
                    f"(the card's own); --send-credentials-to {origin(url)} sends them there too"
                )
                if withheld
                else CREDENTIAL_HINT,
                code=status,
            )
        if status == 403:
            raise ClientError(
                f"HTTP 403 from {url}: {detail or 'forbidden'}",
                error=AUTH_FAILED,
                hint="these credentials may not call this agent (IAM: ask for roles/run.invoker)",
                code=status,
            )
        if 300 <= status < 400:
            raise ClientError(
                f"HTTP {status} from {url} (to {response.headers.get('location', '?')})",
                hint="use the URL it names",
                code=status,
            )
        raise ClientError(
            f"HTTP {status} from {url}: {detail or response.reason_phrase}",
            error=INTERNAL,
            code=status,
            retryable=status >= 500,
        )

    # -- the debug log (--debug), credentials redacted -------------------------------------

    def _log(self, text: str) -> None:
        if self.debug is None:
            return
        for secret in self._secrets():
            text = text.replace(secret, REDACTED)
        print(f"a2a: debug: {text}", file=self.debug, flush=True)

    def _secrets(self) -> list[str]:
        """Every value that must not reach the log: credentials and service parameters, the
        token alone too (a `Bearer` header's), longest first."""
        values = {*self.credentials.values(), *self.headers.values()}
        values |= {v.split(" ", 1)[1] for v in values if v.startswith("Bearer ")}
        return sorted((v for v in values if v), key=len, reverse=True)

    def _log_request(self, verb: str, url: str, headers: Mapping[str, str], body: Any) -> None:
        if self.debug is None:
            return
        secret_names = {*self.credentials, *self.headers} - {"A2A-Version"}
        shown = {k: REDACTED if k in secret_names else v for k, v in headers.items()}
        self._log(f"> {verb} {url} headers {json.dumps(shown)}")
        if body is not None:
            self._log(f"> {_clip(json.dumps(body))}")

    def _log_response(self, response: httpx.Response, started: float) -> None:
        if self.debug is not None:
            self._log(f"< {response.status_code} after {_ms(started)} ms")
            self._log(f"< {_clip(response.text)}")


def _timed_out() -> ClientError:
    return ClientError(
        "--timeout expired before the task reached a terminal or interrupted state",
        error=TIMEOUT,
        hint="raise --timeout, or follow the task later with `a2a task get --wait TASK`",
    )


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _clip(text: str) -> str:
    """A body for the log: no control character reaches the terminal; cut when long."""
    shown = printable(text).replace("\n", "\\n")
    return shown if len(shown) <= DEBUG_BODY_CHARS else shown[:DEBUG_BODY_CHARS] + "..."


def _reason(exc: httpx.ConnectError) -> str:
    text = str(exc)
    return "connection refused" if "refused" in text.lower() else text or type(exc).__name__


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
        raise protocol_error(method, error)
    if "result" not in answer:
        raise ClientError(f"{method}: the answer has neither result nor error")
    return answer["result"]
