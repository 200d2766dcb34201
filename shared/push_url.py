"""Webhook URLs a push notification may go to: the server-side request forgery guard.

A client chooses the URL the agent will POST to, so a URL is checked when it is set and again
before each delivery (DNS may have changed): http or https only, and every address its host
resolves to must be a public one. Loopback, private, link-local (cloud metadata lives there),
carrier-grade NAT, multicast, reserved and unspecified addresses are refused, also when
IPv4-mapped in IPv6. Hosts named in a setting are allowed anyway, for tests and development.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Collection
from urllib.parse import urlsplit


class PushURLRefused(ValueError):
    """The URL may not receive notifications; the message says why."""


def _resolve(host: str, port: int | None) -> list[str]:
    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


def _refusal(address: str) -> str | None:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address (cloud metadata servers live there)"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:  # carrier-grade NAT, reserved, unspecified, documentation ranges
        return "a reserved or non-public address"
    return None


def check_push_url(
    url: str,
    *,
    allowed_hosts: Collection[str] = (),
    resolve: Callable[[str, int | None], list[str]] = _resolve,
) -> None:
    """Raise PushURLRefused unless `url` may receive push notifications.

    `resolve(host, port)` gives the host's addresses (tests pass their own: no network)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise PushURLRefused(f"the URL must be http or https, not {parts.scheme or 'none'!r}")
    host = parts.hostname
    if not host:
        raise PushURLRefused("the URL has no host")
    if host.lower() in {h.lower() for h in allowed_hosts}:
        return
    try:
        addresses = resolve(host, parts.port)
    except (OSError, UnicodeError) as exc:
        raise PushURLRefused(f"the host {host!r} does not resolve ({exc})") from None
    if not addresses:
        raise PushURLRefused(f"the host {host!r} does not resolve")
    for address in addresses:
        reason = _refusal(address)
        if reason is not None:
            raise PushURLRefused(
                f"{host!r} resolves to {address}, {reason}; allow chosen hosts with "
                "A2A_PUSH_ALLOWED_HOSTS"
            )
