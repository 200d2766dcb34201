"""What an agent that asks no credentials (`A2A_AUTH=none`, `make run`, `make dev`) refuses,
so that only this machine's own callers reach it.

With no credentials asked, whoever reaches the port is the owner of every task. `make run`
and `make dev` bind 127.0.0.1, but a server may be asked to listen wider (HOST=0.0.0.0), and
any client may write any Host header; and a browser on this machine reaches loopback too: any
page may POST to it a cross-site "simple request" (a form's or `fetch(..., {mode:
'no-cors'})`'s: text/plain or no Content-Type, no preflight), and a page of a DNS name its
owner rebinds to 127.0.0.1 is of the same origin as the agent and reads every answer. So the
`a2a` app (shared.bindings.http) serves such an agent only requests

- from a loopback peer: the TCP connection's own address (the ASGI scope's `client`, which
  uvicorn takes from `X-Forwarded-For` only when that peer is itself loopback, a proxy on
  this machine), not a header the client writes; except a request to A2A_PUBLIC_URL's host
  when that is no loopback name: an address its operator published (a deployed `A2A_AUTH=none`
  agent, whose peer is the platform's front end), which this check cannot tell from others;
- whose Host is a loopback name (localhost, 127.0.0.0/8, [::1], any port) or the host of
  A2A_PUBLIC_URL: a rebound name is neither;
- whose Origin, when a browser sends one, is the server's own (the scheme and the Host the
  request was sent to, or A2A_PUBLIC_URL's): the console's fetches are; another page's are not;
- that, when they are POSTs with a body (or a type), declare it JSON (shared.bindings.
  json_http's media types), which a simple request cannot.

An agent with credentials (any other A2A_AUTH) checks none of this: a page cannot send them.
"""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import urlsplit

from shared.bindings.json_http import JSON_MEDIA_TYPES, media_type
from shared.bindings.wire import Request
from shared.errors import A2AError, ContentTypeNotSupportedError, InvalidRequestError

_FIX = "set A2A_AUTH=api-key (and A2A_API_KEYS) to serve"


class NotLocalError(InvalidRequestError):
    """A request a local agent does not serve: from another host's name or another page.

    JSON-RPC -32600 (Invalid Request): the wire reference's standard code for a request that
    is not acceptable as sent, A2A having no code for "not allowed" (its v0.1 -32008
    AuthorizationFailed is a legacy meaning the reference says not to reuse). HTTP 403 and
    PERMISSION_DENIED: a well-formed request this server will not serve whoever sends it
    (not 401: no credentials would help), in google.rpc's mapping, the REST binding's error."""

    http_status = 403
    grpc_status = "PERMISSION_DENIED"


class LocalOnly:
    """The checks of a request to an agent that asks no credentials."""

    def __init__(self, public_url: str | None) -> None:
        public = urlsplit(public_url) if public_url else None
        self._public_host = (public.hostname or "") if public else ""
        self._public_origin = f"{public.scheme}://{public.netloc}".lower() if public else ""

    def refusal(self, request: Request) -> A2AError | None:
        """Why the request is refused, or None when it is served."""
        host = request.host
        name = _name(host)
        published = bool(self._public_host) and not _loopback(self._public_host)
        peer = request.remote_addr
        if not _loopback(peer) and not (published and name == self._public_host):
            return NotLocalError(
                "this agent asks no credentials (A2A_AUTH=none) and serves only connections "
                f"from this machine, not one from {_shown(peer or 'an unknown address')}: call "
                f"it from this machine, or {_FIX} other machines"
            )
        if not (_loopback(name) or (self._public_host and name == self._public_host)):
            served = "localhost, 127.0.0.1 and [::1]" + (
                f" and {self._public_host} (A2A_PUBLIC_URL)" if self._public_host else ""
            )
            return NotLocalError(
                f"this agent asks no credentials (A2A_AUTH=none) and serves only {served}, "
                f"not Host: {_shown(request.headers.get('Host') or host)}: call it by one of "
                f"those names, or {_FIX} other hosts",
                field="Host",
            )
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() not in (
            f"{request.scheme}://{host}".lower(),
            self._public_origin,
        ):
            return NotLocalError(
                f"this agent asks no credentials (A2A_AUTH=none) and serves only its own "
                f"pages (/console), not a page of Origin: {_shown(origin)}: {_FIX} other pages",
                field="Origin",
            )
        if request.method == "POST":
            media = media_type(request.headers.get("Content-Type"))
            # An empty POST without a type is served: it carries nothing to act on but its
            # path (REST's cancel and subscribe, which clients send so, the CLI's included),
            # and a page's request for it carries an Origin (browsers send one on every
            # cross-site POST, no-cors or not), refused above.
            if media is None and _no_body(request):
                return None
            if media not in JSON_MEDIA_TYPES:
                # ContentTypeNotSupported (-32005; REST's 415), as the bindings refuse a body
                # declared as something else: not acceptable as declared (or undeclared).
                sent = f"not {_shown(media)}" if media else "none was sent"
                return ContentTypeNotSupportedError(
                    "this agent asks no credentials (A2A_AUTH=none) and takes only JSON "
                    f"POSTs (a web page's form can send anything else; {sent}): send "
                    "Content-Type: application/json",
                    metadata={"contentType": media or ""},
                )
        return None


def _no_body(request: Request) -> bool:
    """Whether the request declares no body (read from the head: the rest of a body is read
    only once the caller is known): no Content-Length, or 0, and not chunked."""
    headers = request.headers
    length = (headers.get("Content-Length") or "0").strip()
    return headers.get("Transfer-Encoding") is None and length == "0"


def _name(host: str) -> str:
    """The name of a `host[:port]` (an IPv6 address keeps its brackets), in lower case."""
    if host.startswith("["):
        return host[: host.find("]") + 1].lower()
    return host.partition(":")[0].lower()


# An address is written in at most 47 characters (an IPv6 one, bracketed, with an IPv4 tail),
# a few more with a zone: a longer name is none, not parsed, not kept in the cache below.
LONGEST_ADDRESS = 64


def _loopback(name: str) -> bool:
    """Whether a host name or address (an IPv6 one bracketed or not) is this machine's
    loopback; an IPv4 address mapped into IPv6 (a dual-stack socket's peer) as the IPv4 one."""
    if name == "localhost":
        return True
    return len(name) <= LONGEST_ADDRESS and _loopback_address(name)


@functools.lru_cache(maxsize=1024)
def _loopback_address(name: str) -> bool:
    """`_loopback` of a name short enough to be an address: parsed once per name (every
    request's peer is asked; callers come again; the cache is bounded, and so are its
    names)."""
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _shown(value: str, limit: int = 100) -> str:
    """A header's value as an error names it: a long one is cut."""
    return value if len(value) <= limit else value[:limit] + "..."
