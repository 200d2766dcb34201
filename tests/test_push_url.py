"""The webhook URL rules: what is refused when a config is set (no DNS) and at each delivery
(one resolution, every address public), and refusals that never name an internal address."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared import push_url
from shared.push_url import PushURLRefused, Resolver, check_push_url, resolve_push_url
from shared.settings import Settings, SettingsError

PUBLIC = "93.184.216.34"


def answers(table: dict[str, list[str]]) -> Resolver:
    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError("Name or service not known")
        return table[host]

    return resolve


def test_a_name_that_does_not_resolve_now_is_accepted_when_set() -> None:
    check_push_url("https://example.com/callback")  # the seeds' and the TCK's configs
    check_push_url("https://no-such-host.invalid/hook")
    check_push_url("http://hooks.example.com:80/h")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://hooks.example.com:8443/h", r"port 8443 is not a webhook port \(80, 443\)"),
        ("http://hooks.example.com:22/h", "A2A_PUSH_ALLOWED_PORTS"),
        ("http://hooks.example.com:99999/h", "port is not a number"),
        ("http://localhost/h", "loopback"),
        ("http://api.localhost/h", "loopback"),
        ("http://0.0.0.0/h", "private"),
        ("http://[fe80::1]/h", "link-local"),
        ("gopher://hooks.example.com/h", "http or https"),
    ],
)
def test_what_is_certainly_bad_is_refused_when_set(url: str, reason: str) -> None:
    with pytest.raises(PushURLRefused, match=reason):
        check_push_url(url)


def test_other_ports_and_hosts_by_setting() -> None:
    check_push_url("https://hooks.example.com:8443/h", allowed_ports=(443, 8443))
    check_push_url("http://localhost:8000/h", allowed_hosts=("localhost",))  # configured for dev
    target = resolve_push_url(
        "http://localhost:8000/h",
        allowed_hosts=("LocalHost",),
        resolve=answers({"localhost": ["127.0.0.1"]}),
    )
    assert target.addresses == ("127.0.0.1",) and target.port == 8000


def test_each_delivery_resolves_once_and_checks_every_address() -> None:
    calls: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        return {
            "hooks.example.com": [PUBLIC, PUBLIC],
            "internal.example.com": [PUBLIC, "10.0.0.5"],
        }[host]

    target = resolve_push_url("https://hooks.example.com/h?x=1", resolve=resolve)
    assert (target.scheme, target.host, target.port, target.addresses) == (
        "https",
        "hooks.example.com",
        443,
        (PUBLIC,),
    )
    assert calls == ["hooks.example.com"]
    with pytest.raises(PushURLRefused) as refused:
        resolve_push_url("https://internal.example.com/h", resolve=resolve)
    message = str(refused.value)
    assert "resolves to a private address" in message
    assert "10.0.0.5" not in message and PUBLIC not in message  # no map of the network


def test_a_name_that_does_not_resolve_fails_the_delivery() -> None:
    with pytest.raises(PushURLRefused, match=r"'gone\.example\.com' does not resolve"):
        resolve_push_url("https://gone.example.com/h", resolve=answers({}))
    with pytest.raises(PushURLRefused, match="does not resolve"):
        resolve_push_url("https://empty.example.com/h", resolve=answers({"empty.example.com": []}))


def test_the_ports_setting() -> None:
    assert Settings().push_allowed_ports == (80, 443)
    assert Settings.from_env({"A2A_PUSH_ALLOWED_PORTS": "443, 8443"}).push_allowed_ports == (
        443,
        8443,
    )
    with pytest.raises(SettingsError, match="A2A_PUSH_ALLOWED_PORTS"):
        Settings.from_env({"A2A_PUSH_ALLOWED_PORTS": "https"})


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://[::127.0.0.1]/h", "loopback"),  # IPv4-compatible
        ("http://[::ffff:127.0.0.1]/h", "loopback"),  # IPv4-mapped
        ("http://[::ffff:0:7f00:1]/h", "loopback"),  # IPv4-translated (SIIT)
        ("http://[64:ff9b::a9fe:a9fe]/h", "link-local"),  # NAT64 to the metadata server
        ("http://[64:ff9b::a00:5]/h", "private"),  # NAT64 to 10.0.0.5
        ("http://[64:ff9b:1::808:808]/h", "non-public"),  # local-use NAT64: the operator's
        ("http://[2002:7f00:1::]/h", "loopback"),  # 6to4 of 127.0.0.1
        ("http://[2002:a9fe:a9fe::1]/h", "link-local"),  # 6to4 of 169.254.169.254
        # Teredo: server 65.54.227.120, client 127.0.0.1 (the last 32 bits inverted)
        ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/h", "loopback"),
        ("http://127.1/h", "loopback"),  # inet_aton's shorthands, read without DNS
        ("http://2130706433/h", "loopback"),
        ("http://0xa9.0xfe.0xa9.0xfe/h", "link-local"),
        ("http://metadata.google.internal/computeMetadata/v1/", "internal name"),
        ("http://METADATA.google.internal./h", "internal name"),
        ("http://metadata/computeMetadata/v1/", "internal name"),
        ("http://web-1.us-central1-a.c.my-project.internal/h", "internal name"),
        ("http://printer.local/h", "internal name"),
        ("http://nas.home.arpa/h", "internal name"),
        ("http://localhost./h", "loopback"),
    ],
)
def test_embedded_ipv4_and_internal_names_are_refused_when_set_and_at_delivery(
    url: str, reason: str
) -> None:
    with pytest.raises(PushURLRefused, match=reason):
        check_push_url(url)
    with pytest.raises(PushURLRefused, match=reason):
        resolve_push_url(url, resolve=answers({}))


@pytest.mark.parametrize(
    "address",
    [
        "::127.0.0.1",
        "::ffff:0:7f00:1",
        "64:ff9b::a9fe:a9fe",
        "2002:7f00:1::",
        "2001:0:4136:e378:8000:63bf:80ff:fffe",
        "64:ff9b:1::1",
    ],
)
def test_a_name_resolving_to_an_embedded_internal_address_fails_the_delivery(
    address: str,
) -> None:
    with pytest.raises(PushURLRefused, match="resolves to a"):
        resolve_push_url(
            "https://rebind.example.com/h", resolve=answers({"rebind.example.com": [address]})
        )


def test_public_embedded_addresses_and_names_pass() -> None:
    for url in ("http://[64:ff9b::5db8:d822]/h", "http://[2002:5db8:d822::1]/h"):
        check_push_url(url)  # NAT64 and 6to4 of a public address
    check_push_url("https://hooks.slack.com/services/T0/B0/x")
    check_push_url("https://internal.example.com/h")  # only the suffix is internal
    check_push_url("http://localhost/h", allowed_hosts=("localhost",))
    check_push_url("http://metadata/h", allowed_hosts=("metadata",))  # the operator's choice


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hooks.slack.com/services/T0/B0/secret?token=s", "https://hooks.slack.com/…"),
        ("http://hooks.example.com:8080/a/b#frag", "http://hooks.example.com:8080/…"),
        ("http://[2001:db8::1]/x", "http://[2001:db8::1]/…"),
        ("http://user:pass@hooks.example.com/x", "http://hooks.example.com/…"),
        ("http://hooks.example.com:99999/x", "(a malformed URL)"),
    ],
)
def test_a_url_is_shown_without_its_path_query_or_credentials(url: str, shown: str) -> None:
    assert push_url.shown(url) == shown


@pytest.mark.parametrize("address", ["fec0::1", "fed0::5", "feff:ffff::1"])
def test_site_local_ipv6_is_refused_when_set_and_at_delivery(address: str) -> None:
    # fec0::/10 (RFC 3879 deprecated it; older networks still route it inside the site):
    # Python 3.11's is_global calls it global.
    with pytest.raises(PushURLRefused, match=r"site-local address \(fec0::/10\)"):
        check_push_url(f"http://[{address}]/h")
    with pytest.raises(PushURLRefused, match="resolves to a site-local"):
        resolve_push_url(
            "https://rebind.example.com/h", resolve=answers({"rebind.example.com": [address]})
        )


@given(st.ip_addresses(v=6))
def test_an_ipv6_address_passes_only_in_the_global_unicast_space(
    address: ipaddress.IPv6Address,
) -> None:
    # 2000::/3 is IANA's global unicast space; NAT64's well-known prefix carries a public
    # IPv4 address. Anything else (site-local, unique-local, reserved, multicast) is refused.
    global_space = address in ipaddress.IPv6Network("2000::/3")
    nat64 = address in ipaddress.IPv6Network("64:ff9b::/96")
    try:
        check_push_url(f"http://[{address}]/h")
    except PushURLRefused:
        return
    assert global_space or nat64, address


@given(st.ip_addresses(v=6, network="fec0::/10"))
def test_every_site_local_address_is_refused(address: ipaddress.IPv6Address) -> None:
    with pytest.raises(PushURLRefused, match="site-local"):
        check_push_url(f"http://[{address}]/h")
