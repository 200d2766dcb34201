"""One HTTP exchange as the functions' apps see it: the `Request` the front read, the `Answer`
an app gives back.

The front (`asgi.py`) builds a Request from uvicorn's ASGI scope and the body it read, and
writes the Answer; the apps (`http.py`, `queue_target.py`) and what they call take and give
these two values and nothing else of HTTP. What the WSGI stack (gunicorn and Flask's request)
did for them before, and clients came to rely on, is kept here and in the front:

- a header is read by name in any case, its repeated lines joined with commas; a header whose
  name holds `_` is dropped (as gunicorn drops it: `X_Forwarded_Host` must not pass for
  `X-Forwarded-Host`, which chooses the card's URLs);
- the path is the decoded text uvicorn gives (its leading slashes made one, as Flask's
  `request.path` made them), the raw path the bytes as sent (`http.py` looks there for
  `%2F`);
- the query is parsed only when there is one, and a name's first value is the one read;
- the host is the Host header's (else the server's address), without the scheme's default
  port, and empty when it is not a host at all (as Flask's `request.host`).

What WSGI did not do: a Request holds what of its body came with its head, and reads the
rest only when the app asks (`Request.read`), once it knows the caller, so a request that is
refused costs no more than its head (shared.bindings.asgi).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl

from shared.observability.work import Kept, http_request
from shared.pause import Pause, Waiting

Scope = Mapping[str, Any]

# A host, an IPv4 address or a bracketed IPv6 one, and a port (the rule Flask's host kept).
_HOST = re.compile(
    r"([a-z0-9.-]+|\[[a-f0-9]*:[a-f0-9.:]+])(?::([1-9][0-9]{0,4}))?", re.ASCII | re.IGNORECASE
)
_DEFAULT_PORT = {"http": ":80", "https": ":443"}


class Headers:
    """A request's headers by lower-case name, each one's lines joined with commas."""

    __slots__ = ("_fields",)

    def __init__(self, fields: dict[str, str]) -> None:
        self._fields = fields  # lower-case names

    @classmethod
    def of(cls, lines: Iterable[tuple[bytes, bytes]]) -> Headers:
        """The headers of ASGI header lines (latin-1 text, as HTTP/1.1 carries it)."""
        # Each name's lines are gathered, then joined once: joining as they come copies the
        # value so far at each repeat, quadratic in a head of one name repeated.
        gathered: dict[str, list[str]] = {}
        for raw_name, raw_value in lines:
            name = raw_name.decode("latin-1").lower()
            if "_" in name:
                continue
            gathered.setdefault(name, []).append(raw_value.decode("latin-1"))
        return cls({name: ",".join(values) for name, values in gathered.items()})

    def get(self, name: str) -> str | None:
        """The header `name` (in any case), None when absent."""
        return self._fields.get(name.lower())

    def values(self, name: str) -> list[str]:
        """The header's values as extensions read them: one (its lines joined), or none."""
        value = self._fields.get(name.lower())
        return [] if value is None else [value]

    def declared_length(self) -> int | None:
        """The body's Content-Length, when it sends a usable one and is not chunked."""
        if self._fields.get("transfer-encoding", "").strip().lower() == "chunked":
            return None
        length = self._fields.get("content-length", "").strip()
        return int(length) if length.isascii() and length.isdigit() else None


class BodyRefused(Exception):
    """The rest of a body could not be read: it did not come in time (408) or the instance
    holds as many body bytes as it may (503, with the seconds to wait before a retry). The
    message names the setting; the app answers in its binding's shape."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


class Request:
    """A request as the front read it. `body` is what came of its body with its head (empty
    when nothing was read: its declared length is over the limit, which the app refuses by
    that length); `read()` gives it whole, reading the rest when some was left."""

    __slots__ = (
        "_args",
        "_rest",
        "body",
        "headers",
        "method",
        "owner",
        "path",
        "query_string",
        "raw_path",
        "scope",
    )

    def __init__(
        self,
        scope: Scope,
        headers: Headers,
        body: bytes,
        rest: Callable[[], bytes] | None = None,
    ) -> None:
        self.method: str = scope["method"].upper()
        self.path = "/" + scope["path"].lstrip("/")
        raw: bytes = scope.get("raw_path") or scope["path"].encode()
        self.raw_path = raw.decode("latin-1")
        self.query_string: str = scope.get("query_string", b"").decode("latin-1")
        self.headers = headers
        self.body = body
        self.scope = scope  # the scheme, server and client, read when asked
        # The caller's owner, once the app authenticated it: the front counts the rest of the
        # body and the answer in its share of the instance's room (shared.bindings.budget).
        self.owner: str | None = None
        self._args: dict[str, str] | None = None
        self._rest = rest  # the whole body, read when called (on a pool thread)

    def read(self) -> bytes:
        """The body, whole (up to one byte past the front's limit): what came with the head,
        or, when more was to come, all of it, read now. Called once the caller is known: a
        refused request's body is never read further. Raises BodyRefused."""
        if self._rest is not None:
            self.body = self._rest()
            self._rest = None
        return self.body

    @property
    def args(self) -> dict[str, str]:
        """The query's parameters, each name's first value."""
        if self._args is None:
            args: dict[str, str] = {}
            for name, value in parse_qsl(self.query_string, keep_blank_values=True):
                args.setdefault(name, value)
            self._args = args
        return self._args

    def query(self, name: str) -> str | None:
        """The query parameter `name` (its first value), None when absent; most requests have
        no query, and theirs is not parsed."""
        return self.args.get(name) if self.query_string else None

    @property
    def scheme(self) -> str:
        scheme: str = self.scope.get("scheme", "http")
        return scheme

    @property
    def host(self) -> str:
        """The host and port the request was sent to: the Host header's, else the server's
        address; without the scheme's default port; empty when it is no host."""
        host = self.headers.get("host")
        if host is None:
            server = self.scope.get("server")
            if server is None or server[1] is None:
                return ""
            name = str(server[0])
            host = (
                f"[{name}]:{server[1]}" if ":" in name and name[0] != "[" else f"{name}:{server[1]}"
            )
        host = host.removesuffix(_DEFAULT_PORT.get(self.scheme, "\0"))
        found = _HOST.fullmatch(host)
        if found is None or (found[2] is not None and int(found[2]) > 65535):
            return ""
        return host

    @property
    def remote_addr(self) -> str:
        client = self.scope.get("client")
        return str(client[0]) if client else ""


class Answer:
    """What an app answers: a status, headers, and a body whole or, streamed, its chunks made
    one at a time (between them, pauses: shared.pause), and what must run once the stream is
    done with (`close`: after its last chunk, or when the client left, or before its first
    for a HEAD), however it ends.

    The front writes the rest: the Content-Length of a body that is whole (none on a 1xx,
    204 or 304), and no body for a HEAD, whose headers are the GET's.

    An answer that waits for a turn (a blocking send) is `later`: work that pauses
    (shared.pause.Waiting) and gives the answer at its end, which the front steps on a pool
    thread and whose pauses it waits out on its loop, holding no thread; its other fields
    are unused."""

    __slots__ = ("_close", "body", "chunks", "headers", "later", "status")

    def __init__(
        self,
        status: int = 200,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        chunks: Iterator[bytes | Pause] | None = None,
        close: Callable[[], None] | None = None,
        later: Waiting[Answer] | None = None,
    ) -> None:
        self.status = status
        self.later = later
        self.headers = {} if headers is None else headers
        self.body = body
        self.chunks = chunks
        self._close = close

    def close(self) -> None:
        """Let the stream go (once; nothing for an answer that is whole)."""
        close, self._close = self._close, None
        if close is not None:
            close()


def http_log(request: Request, status: int, *, forwarded: bool = True) -> dict[str, Any]:
    """The request's `httpRequest` log field, answered with `status`; `forwarded`: the
    X-Forwarded-For it came with counts (not for Cloud Tasks' calls, from Google's network)."""
    return http_request(
        request.method,
        request.path,
        status,
        user_agent=request.headers.get("User-Agent"),
        forwarded_for=request.headers.get("X-Forwarded-For") if forwarded else None,
        remote_addr=request.remote_addr,
    )


def logged_when_answered(
    request: Request, later: Waiting[Answer], kept: Kept, *, forwarded: bool = True
) -> Waiting[Answer]:
    """Work whose steps are made in its request's unit of work, and whose line is written
    once it answers (the time it waited for its turn is the request's latency)."""
    answer = yield from kept.stepped(later)
    kept.fields["httpRequest"] = http_log(request, answer.status, forwarded=forwarded)
    kept.end(stream=False)
    return answer
