"""Issue 36, item 9: the CLI sends credentials only to the origin its card came from. A hostile
card naming another port or host as its endpoint gets no `X-API-Key` or `Authorization` there
(unless the caller names that origin), and cannot choose where the key goes (a `Cookie`, an
`Authorization`, the query)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.client.conftest import Cli
from tests.client.scripted import ScriptedAgent, card, task

KEY = "key-that-must-stay-home"
CREDENTIAL_HEADERS = ("x-api-key", "authorization", "cookie", "x-admin")


def _completing() -> Iterator[ScriptedAgent]:
    agent = ScriptedAgent()
    agent.answer("SendMessage", {"task": task("COMPLETED")})
    yield agent
    agent.close()


# The agent whose card the caller asked for, and another server (another port: another
# origin) a hostile card points at.
home = pytest.fixture(_completing, name="home")
elsewhere = pytest.fixture(_completing, name="elsewhere")


def credentials_seen(agent: ScriptedAgent) -> list[str]:
    return [
        name.lower()
        for request in agent.requests
        for name, value in request.headers.items()
        if name.lower() in CREDENTIAL_HEADERS or KEY in value or "tok-1" in value
    ]


def test_a_card_pointing_elsewhere_gets_no_credentials_there(
    home: ScriptedAgent,
    elsewhere: ScriptedAgent,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    home.serve_card(card(f"{elsewhere.url}/internal/admin"))
    cli = Cli(home.url, tmp_path, capsys, monkeypatch)
    run = cli("--api-key", KEY, "--bearer", "tok-1", "send", "hi")
    assert run.code == 0, run
    assert [r.path for r in elsewhere.requests] == ["/internal/admin"]
    assert credentials_seen(elsewhere) == []
    assert run.err.startswith(
        f"a2a: warning: the card's endpoint {elsewhere.url}/internal/admin is not on the origin "
        f"the card came from ({home.url}): no credentials are sent to it "
        f"(--send-credentials-to {elsewhere.url} sends them)"
    ), run.err
    # The card's own origin did get them (the caller sent them there).
    assert set(credentials_seen(home)) == {"x-api-key", "authorization"}
    # Asked for, they go.
    cli.ok("--api-key", KEY, "--send-credentials-to", elsewhere.url, "send", "hi")
    assert "x-api-key" in credentials_seen(elsewhere)


def test_another_host_on_the_same_port_is_another_origin(
    home: ScriptedAgent,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # localhost and 127.0.0.1 reach the same server: only the name the card came from counts.
    port = home.server.server_port
    home.serve_card(card(f"http://localhost:{port}/"))
    cli = Cli(home.url, tmp_path, capsys, monkeypatch)
    assert cli("--api-key", KEY, "send", "hi").code == 0
    posts = [r for r in home.requests if r.method == "POST"]
    assert len(posts) == 1 and "x-api-key" not in {n.lower() for n in posts[0].headers}


@pytest.mark.parametrize(
    "scheme",
    [
        {"apiKeySecurityScheme": {"name": "Cookie", "location": "header"}},
        {"apiKeySecurityScheme": {"name": "Authorization", "location": "header"}},
        {"apiKeySecurityScheme": {"name": "session", "location": "cookie"}},
        {"apiKeySecurityScheme": {"name": "key", "location": "query"}},
        {"type": "apiKey", "in": "header", "name": "Proxy-Authorization"},
    ],
)
def test_a_card_cannot_choose_where_the_key_goes(
    home: ScriptedAgent,
    scheme: dict[str, object],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    home.serve_card(card(f"{home.url}/", securitySchemes={"key": scheme}))
    cli = Cli(home.url, tmp_path, capsys, monkeypatch)
    run = cli("--api-key", KEY, "send", "hi")
    assert run.code == 1 and run.out == "", run
    assert "A2ACLI_ERR_CARD_INVALID: the card asks for the API key in" in run.err
    assert "this client puts a key only in a plain header" in run.err
    assert [r.method for r in home.requests] == ["GET"]  # the card, and nothing after it


def test_a_plain_header_the_card_names_carries_the_key(
    home: ScriptedAgent,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    scheme = {"apiKeySecurityScheme": {"name": "X-Goog-Api-Key", "location": "header"}}
    home.serve_card(card(f"{home.url}/", securitySchemes={"key": scheme}))
    Cli(home.url, tmp_path, capsys, monkeypatch).ok("--api-key", KEY, "send", "hi")
    post = next(r for r in home.requests if r.method == "POST")
    assert post.headers.get("X-Goog-Api-Key") == KEY and "X-API-Key" not in post.headers
