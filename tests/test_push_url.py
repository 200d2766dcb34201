"""The webhook URL rules: what is refused when a config is set (no DNS) and at each delivery
(one resolution, every address public), and refusals that never name an internal address."""

from __future__ import annotations

import pytest

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
