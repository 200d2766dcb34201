"""The agent card: paths, fields for every client version, caching, URL behind a proxy."""

from __future__ import annotations

from typing import Any

import pytest

from shared.identity.api_key import hashed
from tests.conftest import Client

PATHS = ["/.well-known/agent-card.json", "/.well-known/agent.json", "/.well-known/agent-card"]


@pytest.mark.parametrize("path", PATHS)
def test_card_is_served_at_every_well_known_path(client: Client, path: str) -> None:
    response = client.http.get(path)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.get_json()["name"] == "a2a-functions sample agent"


def test_hybrid_card_has_v1_and_v03_fields(client: Client) -> None:
    card = client.http.get(PATHS[0]).get_json()
    assert card["supportedInterfaces"] == [
        {"url": "http://localhost/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "http://localhost/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        {"url": "http://localhost/", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
    ]
    # HTTP+JSON is served in its 1.0 form only: v0.3 readers are not pointed at it.
    assert card["additionalInterfaces"] == [{"url": "http://localhost/", "transport": "JSONRPC"}]
    assert card["url"] == "http://localhost/"
    assert card["preferredTransport"] == "JSONRPC"
    assert card["protocolVersion"] == "0.3.0"
    assert card["capabilities"] == {"streaming": True, "pushNotifications": True}
    skill_ids = [s["id"] for s in card["skills"]]
    assert skill_ids == ["structured-output", "phone-order", "joke", "file-report", "echo"]
    for key in ("defaultInputModes", "defaultOutputModes", "version", "description"):
        assert card[key]


def test_strict_v1_card_for_closed_schemas(make_client: Any) -> None:
    card = make_client(card_style="v1").http.get(PATHS[0]).get_json()
    allowed = {
        "capabilities", "defaultInputModes", "defaultOutputModes", "description",
        "documentationUrl", "iconUrl", "name", "provider", "securityRequirements",
        "securitySchemes", "signatures", "skills", "supportedInterfaces", "version",
    }  # fmt: skip
    assert set(card) <= allowed


def test_settings_override_the_modules_identity(make_client: Any) -> None:
    card = (
        make_client(
            agent_name="Ops bot",
            agent_version="2.1.0",
            provider_organization="Example Corp",
            provider_url="https://example.com",
            documentation_url="https://example.com/docs",
        )
        .http.get(PATHS[0])
        .get_json()
    )
    assert card["name"] == "Ops bot"
    assert card["version"] == "2.1.0"
    assert card["provider"] == {"organization": "Example Corp", "url": "https://example.com"}
    assert card["documentationUrl"] == "https://example.com/docs"


def test_url_follows_the_proxy(client: Client) -> None:
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "agent.example.com, inner"}
    card = client.http.get(PATHS[0], headers=headers).get_json()
    assert card["url"] == "https://agent.example.com/"
    assert {i["url"] for i in card["supportedInterfaces"]} == {"https://agent.example.com/"}


def test_public_url_setting_wins(make_client: Any) -> None:
    card = make_client(public_url="https://a2a.example.com/agent").http.get(PATHS[0]).get_json()
    assert card["url"] == "https://a2a.example.com/agent"


def test_caching_headers_and_304(client: Client) -> None:
    first = client.http.get(PATHS[0])
    etag = first.headers["ETag"]
    assert etag.startswith('"')
    assert "max-age=300" in first.headers["Cache-Control"]
    assert first.headers["Last-Modified"].endswith("GMT")
    again = client.http.get(PATHS[0], headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.data == b""
    assert again.headers["ETag"] == etag
    since = client.http.get(PATHS[0], headers={"If-Modified-Since": first.headers["Last-Modified"]})
    assert since.status_code == 304
    stale = client.http.get(PATHS[0], headers={"If-None-Match": '"other"'})
    assert stale.status_code == 200


def test_card_changes_its_etag_with_its_content(make_client: Any) -> None:
    a = make_client().http.get(PATHS[0]).headers["ETag"]
    b = make_client(agent_name="Other").http.get(PATHS[0]).headers["ETag"]
    assert a != b


def test_api_key_scheme_is_advertised_when_enforced(make_client: Any) -> None:
    card = (
        make_client(auth="api-key", api_keys={hashed("k1"): "alice"}).http.get(PATHS[0]).get_json()
    )
    assert card["securitySchemes"] == {
        "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}}
    }
    assert card["securityRequirements"] == [{"schemes": {"apiKey": {"list": []}}}]


def test_post_to_card_is_refused(client: Client) -> None:
    assert client.http.post(PATHS[0]).status_code == 405
