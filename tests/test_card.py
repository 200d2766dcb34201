"""The agent card: paths, fields for every client version, caching, URL behind a proxy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.extensions import DELIVERY_STATUS
from shared.identity.api_key import hashed
from tests.conftest import Client

PATHS = ["/.well-known/agent-card.json", "/.well-known/agent.json", "/.well-known/agent-card"]


@pytest.mark.parametrize("path", PATHS)
def test_card_is_served_at_every_well_known_path(client: Client, path: str) -> None:
    response = client.http.get(path)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.json()["name"] == "a2a-functions sample agent"


def test_hybrid_card_has_v1_and_v03_fields(client: Client) -> None:
    card = client.http.get(PATHS[0]).json()
    assert card["supportedInterfaces"] == [
        {"url": "http://localhost/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "http://localhost/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        {"url": "http://localhost/", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": "http://localhost/", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
    ]
    # v0.3 readers: both interfaces that speak 0.3 (their HTTP+JSON clients add /v1).
    assert card["additionalInterfaces"] == [
        {"url": "http://localhost/", "transport": "JSONRPC"},
        {"url": "http://localhost/", "transport": "HTTP+JSON"},
    ]
    assert card["url"] == "http://localhost/"
    assert card["preferredTransport"] == "JSONRPC"
    assert card["protocolVersion"] == "0.3.0"
    assert card["capabilities"] == {
        "streaming": True,
        "pushNotifications": True,
        "extensions": [  # the kit's own, with push notifications (shared.extensions)
            {
                "uri": DELIVERY_STATUS.uri,
                "description": DELIVERY_STATUS.description,
            }
        ],
    }
    skill_ids = [s["id"] for s in card["skills"]]
    assert skill_ids == ["structured-output", "phone-order", "joke", "file-report", "echo"]
    for key in ("defaultInputModes", "defaultOutputModes", "version", "description"):
        assert card[key]


def test_strict_v1_card_for_closed_schemas(make_client: Any) -> None:
    card = make_client(card_style="v1").http.get(PATHS[0]).json()
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
        .json()
    )
    assert card["name"] == "Ops bot"
    assert card["version"] == "2.1.0"
    assert card["provider"] == {"organization": "Example Corp", "url": "https://example.com"}
    assert card["documentationUrl"] == "https://example.com/docs"


def test_url_follows_the_proxy(client: Client) -> None:
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "agent.example.com, inner"}
    card = client.http.get(PATHS[0], headers=headers).json()
    assert card["url"] == "https://agent.example.com/"
    assert {i["url"] for i in card["supportedInterfaces"]} == {"https://agent.example.com/"}


def test_public_url_setting_wins(make_client: Any) -> None:
    card = make_client(public_url="https://a2a.example.com/agent").http.get(PATHS[0]).json()
    assert card["url"] == "https://a2a.example.com/agent"


def test_caching_headers_and_304(make_client: Any) -> None:
    client = make_client(public_url="https://agent.example/")
    first = client.http.get(PATHS[0])
    etag = first.headers["ETag"]
    assert etag.startswith('"')
    assert first.headers["Cache-Control"] == "public, max-age=300"
    assert "Vary" not in first.headers  # its URLs are the configured ones, whoever asks
    assert first.headers["Last-Modified"].endswith("GMT")
    again = client.http.get(PATHS[0], headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["ETag"] == etag
    assert again.headers["Cache-Control"] == "public, max-age=300"
    since = client.http.get(PATHS[0], headers={"If-Modified-Since": first.headers["Last-Modified"]})
    assert since.status_code == 304
    stale = client.http.get(PATHS[0], headers={"If-None-Match": '"other"'})
    assert stale.status_code == 200


PER_REQUEST = "Host, X-Forwarded-Host, X-Forwarded-Proto"


def test_a_card_whose_urls_come_from_the_request_is_kept_by_no_cache(client: Client) -> None:
    # No A2A_PUBLIC_URL: the URLs are the Host's and X-Forwarded-*'s, so one forged header in
    # a shared cache would send every later caller elsewhere (finding 11 of issue 25).
    forged = {"X-Forwarded-Host": "attacker.example"}
    first = client.http.get(PATHS[0], headers=forged)
    assert first.json()["url"] == "http://attacker.example/"
    assert first.headers["Cache-Control"] == "private, max-age=300"  # no shared cache
    assert first.headers["Vary"] == PER_REQUEST
    again = client.http.get(PATHS[0], headers={"If-None-Match": first.headers["ETag"], **forged})
    assert again.status_code == 304
    assert again.headers["Cache-Control"] == "private, max-age=300"
    assert again.headers["Vary"] == PER_REQUEST


def test_the_extended_card_is_never_shared_by_a_cache(make_client: Any) -> None:
    per_request = make_client(handler=MEMBERS, **MODES["api-key"])
    response = per_request.http.get("/extendedAgentCard", headers=KEY)
    assert response.status_code == 200 and "vault" in response.text
    assert response.headers["Cache-Control"] == "private, max-age=300"
    assert response.headers["Vary"] == PER_REQUEST
    configured = make_client(
        handler=MEMBERS, public_url="https://agent.example/", **MODES["api-key"]
    )
    for path in ("/extendedAgentCard", "/v1/card"):
        response = configured.http.get(path, headers=KEY)
        assert response.status_code == 200, response.content
        # The caller's own card: a browser may keep it, a shared cache may not.
        assert response.headers["Cache-Control"] == "private, max-age=300"
    refused = configured.http.get("/extendedAgentCard")
    assert refused.status_code == 401 and "Cache-Control" not in refused.headers


def test_card_changes_its_etag_with_its_content(make_client: Any) -> None:
    a = make_client().http.get(PATHS[0]).headers["ETag"]
    b = make_client(agent_name="Other").http.get(PATHS[0]).headers["ETag"]
    assert a != b


GOOGLE = "https://accounts.google.com/.well-known/openid-configuration"
AUDIENCE = "https://us-central1-demo.cloudfunctions.net/a2a"
MODES: dict[str, dict[str, Any]] = {
    "api-key": {"auth": "api-key", "api_keys": {hashed("k1"): "alice"}},
    "google": {"auth": "google", "audience": (AUDIENCE,)},
    "oidc": {
        "auth": "oidc",
        "oidc_issuer": "https://idp.example",
        "oidc_audience": "agent",
        "oidc_required_scopes": ("a2a.call",),
    },
}
# mode -> (scheme name, v1.0 member, its fields, v0.3 fields, scopes)
SCHEMES: dict[str, tuple[str, str, dict[str, str], dict[str, str], list[str]]] = {
    "api-key": (
        "apiKey",
        "apiKeySecurityScheme",
        {"location": "header", "name": "X-API-Key"},
        {"type": "apiKey", "in": "header", "name": "X-API-Key"},
        [],
    ),
    "google": (
        "google",
        "openIdConnectSecurityScheme",
        {"openIdConnectUrl": GOOGLE},
        {"type": "openIdConnect", "openIdConnectUrl": GOOGLE},
        ["openid", "email"],
    ),
    "oidc": (
        "oidc",
        "openIdConnectSecurityScheme",
        {"openIdConnectUrl": "https://idp.example/.well-known/openid-configuration"},
        {
            "type": "openIdConnect",
            "openIdConnectUrl": "https://idp.example/.well-known/openid-configuration",
        },
        ["a2a.call"],
    ),
}


@pytest.mark.parametrize("style", ["hybrid", "v1"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_card_names_the_modes_scheme_in_each_style(
    make_client: Any, mode: str, style: str
) -> None:
    card = make_client(card_style=style, **MODES[mode]).http.get(PATHS[0]).json()
    name, member, fields, v03, scopes = SCHEMES[mode]
    scheme = card["securitySchemes"][name]
    assert list(card["securitySchemes"]) == [name]
    assert scheme[member].items() >= fields.items()
    assert scheme[member]["description"]  # says what to send
    # ProtoJSON's StringList: no scopes is {} (field presence: no empty `list`).
    assert card["securityRequirements"] == [{"schemes": {name: {"list": scopes} if scopes else {}}}]
    if style == "hybrid":  # v0.3 readers find their own members beside v1.0's
        assert scheme.items() >= v03.items()
        assert card["security"] == [{name: scopes}]
    else:  # the strict v1.0 card: nothing of v0.3
        assert list(scheme) == [member]
        assert "security" not in card
    assert "extendedAgentCard" not in card["capabilities"]  # the sample has no such skills


@pytest.mark.parametrize("style", ["hybrid", "v1"])
def test_no_auth_means_no_scheme(make_client: Any, style: str) -> None:
    card = make_client(card_style=style).http.get(PATHS[0]).json()
    assert not {"securitySchemes", "securityRequirements", "security"} & card.keys()


KEY = {"X-API-Key": "k1"}
MEMBERS = "tests.handlers.members"


@pytest.mark.parametrize("style", ["hybrid", "v1"])
def test_the_public_card_announces_the_extended_card(make_client: Any, style: str) -> None:
    client = make_client(handler=MEMBERS, card_style=style, **MODES["api-key"])
    card = client.http.get(PATHS[0]).json()
    assert card["capabilities"]["extendedAgentCard"] is True
    assert card.get("supportsAuthenticatedExtendedCard") is (True if style == "hybrid" else None)
    assert [s["id"] for s in card["skills"]] == ["hello"]  # the public card keeps it private


def test_the_extended_card_adds_the_members_skills_in_every_binding(make_client: Any) -> None:
    client = make_client(handler=MEMBERS, **MODES["api-key"])
    hybrid = client.http.get(PATHS[0]).json()  # the public card (hybrid by default)
    strict = make_client(handler=MEMBERS, card_style="v1", **MODES["api-key"])
    v1 = strict.http.get(PATHS[0]).json()
    # Each version gets the card form it reads: 1.0 the strict v1.0 card, 0.3 the hybrid one.
    answers = [
        (client.result("GetExtendedAgentCard", {}, version="1.0", headers=KEY), v1),
        (client.result("agent/getAuthenticatedExtendedCard", headers=KEY), hybrid),
        (
            client.http.get("/extendedAgentCard", headers={**KEY, "A2A-Version": "1.0"}).json(),
            v1,
        ),
    ]
    for card, public in answers:
        assert [s["id"] for s in card["skills"]] == ["hello", "vault"]
        assert {k: v for k, v in card.items() if k != "skills"} == {
            k: v for k, v in public.items() if k != "skills"
        }
    # Behind a proxy, its URLs are the ones the caller used.
    proxied = client.result(
        "GetExtendedAgentCard",
        {},
        version="1.0",
        headers={**KEY, "X-Forwarded-Host": "agent.example", "X-Forwarded-Proto": "https"},
    )
    assert proxied["supportedInterfaces"][0]["url"] == "https://agent.example/"


def test_the_extended_card_is_refused_without_credentials(make_client: Any) -> None:
    client = make_client(handler=MEMBERS, **MODES["api-key"])
    for headers in ({}, {"X-API-Key": "wrong"}):
        response = client.http.get("/extendedAgentCard", headers=headers)
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == 'ApiKey header="X-API-Key"'
        assert "vault" not in response.text
        rpc = client.post({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}, headers)
        assert rpc.status_code == 401 and "vault" not in rpc.text


@pytest.mark.parametrize(
    ("handler", "settings"),
    [(MEMBERS, {}), ("functions.handlers.sample", MODES["api-key"])],
)
def test_without_auth_or_members_skills_there_is_no_extended_card(
    make_client: Any, handler: str, settings: dict[str, Any]
) -> None:
    client = make_client(handler=handler, **settings)
    card = client.http.get(PATHS[0]).json()
    assert "extendedAgentCard" not in card["capabilities"]
    assert "supportsAuthenticatedExtendedCard" not in card
    assert "vault" not in json.dumps(card)
    headers = KEY if settings else {}
    error = client.error("GetExtendedAgentCard", {}, version="1.0", headers=headers)
    assert error["code"] == -32004
    assert client.error("agent/getAuthenticatedExtendedCard", headers=headers)["code"] == -32004
    rest = client.http.get("/extendedAgentCard", headers={**headers, "A2A-Version": "1.0"})
    assert rest.status_code == 400
    assert rest.json()["error"]["details"][0]["reason"] == "UNSUPPORTED_OPERATION"
