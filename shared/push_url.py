"""Webhook URLs a push notification may go to: the server-side request forgery guard.

A client chooses the URL the agent will POST to, so it is checked twice:

- when it is set (`check_push_url`), for what is certainly bad without asking DNS: a scheme
  other than http or https, no host, a port other than 80 and 443 (A2A_PUSH_ALLOWED_PORTS
  adds others), an address written in the URL that is not public (in any form the resolver
  reads: `127.1`, `2130706433`, an IPv6 address that embeds one), or an internal name
  (`localhost`, `metadata.google.internal`, any name under `.internal`, `.local`,
  `.localhost` or `.home.arpa`, and a name of one label such as `metadata`, which the
  resolver completes with the network's own search domains). A name that does not resolve
  now is accepted: DNS answers change, and each delivery asks anew;
- before each POST and each redirect (`resolve_push_url`): the same rules, then the host is
  resolved once, every address it resolves to must be public, and the POST connects to those
  checked addresses (shared.push_delivery), never resolving the name again, so a rebinding
  DNS answer cannot send it to loopback. A name that does not resolve, or resolves to a
  non-public address, fails that delivery, and the queue retries it like any other failure.

Loopback, private, link-local (cloud metadata lives there), site-local (`fec0::/10`),
carrier-grade NAT, multicast, reserved and unspecified addresses are refused (an IPv6 address
outside the global unicast space `2000::/3` always), also where an IPv6 address carries an IPv4
one that a host or a translator routes to (`_embedded`: IPv4-mapped and -translated,
IPv4-compatible, NAT64, 6to4, Teredo). Refusals say why, never which address a name resolved
to (that would map the internal network for the caller). Hosts named in
A2A_PUSH_ALLOWED_HOSTS are the operator's own: allowed on any address and port (tests,
development, a webhook inside the VPC).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Collection
from urllib.parse import urlsplit

from shared.frozen import frozen

DEFAULT_PORTS = {"http": 80, "https": 443}
ALLOWED_PORTS = (80, 443)

Resolver = Callable[[str, int], list[str]]


class PushURLRefused(ValueError):
    """The URL may not receive notifications; the message says why."""


@frozen
class PushTarget:
    """Where one POST goes: the URL, and the checked addresses to connect to for its host."""

    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...]


def _resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


# NAT64's well-known prefix (RFC 6052): the last 32 bits are the IPv4 address it reaches.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# The local-use NAT64 prefix (RFC 8215): a translator of the operator's own network, at a
# prefix length only it knows, so nothing under it is public.
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
_LOW32 = 0xFFFFFFFF
# IANA's global unicast space (RFC 4291 2.4): every public IPv6 address is in it. Outside it
# nothing is a webhook (the embedded forms above aside), whatever list of special ranges a
# Python version knows: 3.11's `is_global` passes fec0::/10, the site-local addresses RFC 3879
# deprecated, which routers of older networks still route inside the site.
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")


def _embedded(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries where a host or a translator routes to it:
    IPv4-mapped (::ffff:0:0/96) and -translated (::ffff:0:0:0/96, SIIT), IPv4-compatible
    (::/96), NAT64 (64:ff9b::/96), 6to4 (2002::/16, the 32 bits after the prefix) and Teredo
    (2001::/32, its client: the last 32 bits inverted)."""
    value = int(ip)
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    # (:: and ::1 are no IPv4-compatible addresses: the unspecified one and loopback.)
    if (value >> 32 == 0 and value > 1) or value >> 32 == 0xFFFF0000 or ip in _NAT64:
        return ipaddress.IPv4Address(value & _LOW32)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def _refusal(address: str) -> str | None:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _LOCAL_NAT64:
            return "a reserved or non-public address"
        embedded = _embedded(ip)
        if embedded is not None:
            reason = _refusal(str(embedded))
            if reason is not None:
                return reason
        if ip in _SITE_LOCAL:
            return "a site-local address (fec0::/10)"
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
    if isinstance(ip, ipaddress.IPv6Address) and ip not in _GLOBAL_UNICAST and ip not in _NAT64:
        return "a reserved or non-public address"  # what no list of special ranges named
    return None


def _literal(host: str) -> str | None:
    """The address `host` writes, in any form the resolver reads as one: IPv6, dotted IPv4,
    and inet_aton's shorthands (`127.1`, `0x7f.1`, `2130706433`), which getaddrinfo takes
    for addresses without asking DNS."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        return None


# Names that are never a public host: RFC 6761's localhost, RFC 6762's mDNS `.local`,
# RFC 8375's home network, and `.internal` (ICANN's private-use name: Google Cloud's metadata
# server is metadata.google.internal, its VMs are <name>.<zone>.c.<project>.internal).
_INTERNAL_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa")


def _internal_name(host: str) -> bool:
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(_INTERNAL_SUFFIXES):
        return True
    # One label (`metadata`, `intranet`): the resolver tries the network's search domains,
    # so it names an internal host (on Google Cloud, `metadata` is the metadata server).
    return "." not in name


def shown(url: str) -> str:
    """What a log may say of a webhook URL: `scheme://host/…`, its port if any; the path and
    query, which often hold the webhook's secret (Slack-style URLs), are left out."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(a malformed URL)"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}/…"


def _static(
    url: str, allowed_hosts: Collection[str], allowed_ports: Collection[int]
) -> tuple[str, str, int, bool]:
    """(scheme, host, port, allowed by name) of a URL that passes every check without DNS."""
    parts = urlsplit(url)
    if parts.scheme not in DEFAULT_PORTS:
        raise PushURLRefused(f"the URL must be http or https, not {parts.scheme or 'none'!r}")
    host = parts.hostname
    if not host:
        raise PushURLRefused("the URL has no host")
    try:
        port = parts.port or DEFAULT_PORTS[parts.scheme]
    except ValueError:
        raise PushURLRefused("the URL's port is not a number from 1 to 65535") from None
    if host.lower() in {h.lower() for h in allowed_hosts}:
        return parts.scheme, host, port, True
    literal = _literal(host)
    if literal is not None:
        reason = _refusal(literal)
    elif (name := host.lower().rstrip(".")) == "localhost" or name.endswith(".localhost"):
        reason = "a loopback address"  # RFC 6761: always the machine itself
    elif _internal_name(host):
        reason = "an internal name, not a public host"
    else:
        reason = None
    if reason is not None:
        raise PushURLRefused(
            f"the URL's host is {reason}; allow chosen hosts with A2A_PUSH_ALLOWED_HOSTS"
        )
    if port not in allowed_ports:
        raise PushURLRefused(
            f"port {port} is not a webhook port ({', '.join(map(str, sorted(allowed_ports)))}); "
            "allow others with A2A_PUSH_ALLOWED_PORTS"
        )
    return parts.scheme, host, port, False


def check_push_url(
    url: str,
    *,
    allowed_hosts: Collection[str] = (),
    allowed_ports: Collection[int] = ALLOWED_PORTS,
) -> None:
    """Raise PushURLRefused when `url` can certainly never receive notifications (no DNS)."""
    _static(url, allowed_hosts, allowed_ports)


def resolve_push_url(
    url: str,
    *,
    allowed_hosts: Collection[str] = (),
    allowed_ports: Collection[int] = ALLOWED_PORTS,
    resolve: Resolver = _resolve,
) -> PushTarget:
    """The target to POST `url` to, its host resolved once and every address checked; raises
    PushURLRefused otherwise. `resolve(host, port)` gives the addresses (tests pass theirs)."""
    scheme, host, port, allowed = _static(url, allowed_hosts, allowed_ports)
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError):
        raise PushURLRefused(f"the host {host!r} does not resolve") from None
    if not addresses:
        raise PushURLRefused(f"the host {host!r} does not resolve")
    if not allowed:
        for address in addresses:
            reason = _refusal(address)
            if reason is not None:
                raise PushURLRefused(
                    f"the host {host!r} resolves to {reason}; allow chosen hosts with "
                    "A2A_PUSH_ALLOWED_HOSTS"
                )
    return PushTarget(url, scheme, host, port, tuple(dict.fromkeys(addresses)))
