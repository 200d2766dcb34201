"""Each identity mode through the whole `a2a` app: no credentials, bad credentials -> HTTP 401
with the mode's WWW-Authenticate on every binding (JSON-RPC in the caller's dialect, REST, SSE,
`GET /sse`); good credentials -> the caller's own tasks. The card stays public."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from shared import tasks_auth
from shared.identity.api_key import hashed
from shared.settings import Settings, SettingsError
from tests.conftest import ROOT, Client
from tests.identity.issuer import Issuer

AUDIENCE = "https://us-central1-demo.cloudfunctions.net/a2a"
KEYS = {"alice": "alice-key-" + "a" * 32, "bob": "bob-key-" + "b" * 32}


@dataclass
class Mode:
    name: str
    client: Client
    credentials: Callable[[str], dict[str, str]]  # owner -> headers
    bad: dict[str, str]  # headers of a refused caller
    challenge: str  # how the 401's WWW-Authenticate starts


@pytest.fixture(params=["api-key", "google", "oidc"])
def mode(
    request: pytest.FixtureRequest,
    make_client: Callable[..., Client],
    issuer: Issuer,
    monkeypatch: pytest.MonkeyPatch,
) -> Mode:
    if request.param == "api-key":
        client = make_client(auth="api-key", api_keys={hashed(k): o for o, k in KEYS.items()})
        return Mode(
            "api-key",
            client,
            lambda owner: {"X-API-Key": KEYS[owner]},
            {"X-API-Key": "not-a-key"},
            'ApiKey header="X-API-Key"',
        )
    if request.param == "google":
        monkeypatch.setattr(tasks_auth, "GOOGLE_CERTS_URL", issuer.url + "/certs")
        client = make_client(auth="google", audience=(AUDIENCE,))

        def google(owner: str) -> dict[str, str]:
            token = issuer.token(
                iss="accounts.google.com", aud=AUDIENCE, email=owner, email_verified=True
            )
            return {"Authorization": f"Bearer {token}"}

        expired = issuer.token(aud=AUDIENCE, email="alice", email_verified=True, exp=1)
        return Mode(
            "google", client, google, {"Authorization": f"Bearer {expired}"}, 'Bearer realm="a2a"'
        )
    client = make_client(auth="oidc", oidc_issuer=issuer.url, oidc_audience="agent")
    wrong = issuer.token(aud="someone-else")
    return Mode(
        "oidc",
        client,
        lambda owner: {"Authorization": f"Bearer {issuer.token(aud='agent', sub=owner)}"},
        {"Authorization": f"Bearer {wrong}"},
        'Bearer realm="a2a"',
    )


MESSAGE_1_0 = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
MESSAGE_0_3 = {
    "message": {
        "messageId": "m1",
        "role": "user",
        "kind": "message",
        "parts": [{"kind": "text", "text": "hi"}],
    }
}
CALLS: list[tuple[str, Any, str | None]] = [
    ("SendMessage", MESSAGE_1_0, "1.0"),
    ("SendStreamingMessage", MESSAGE_1_0, "1.0"),
    ("ListTasks", {}, "1.0"),
    ("GetExtendedAgentCard", {}, "1.0"),
    ("message/send", MESSAGE_0_3, None),
    ("message/stream", MESSAGE_0_3, None),
    ("tasks/get", {"id": "t1"}, None),
    ("agent/getAuthenticatedExtendedCard", None, None),
    (
        "tasks/send",
        {"id": "t1", "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]}},
        None,
    ),
    ("tasks/pushNotificationConfig", {"id": "t1"}, None),
    ("messages/list", {"contextId": "c"}, None),
]


def assert_refused(response: Any, mode: Mode) -> None:
    assert response.status_code == 401, response.content
    assert response.headers["WWW-Authenticate"].startswith(mode.challenge)
    assert "Traceback" not in response.text


@pytest.mark.parametrize(("method", "params", "version"), CALLS)
def test_json_rpc_without_valid_credentials_is_401_with_no_id_in_the_header_s_dialect(
    mode: Mode, method: str, params: Any, version: str | None
) -> None:
    """The body of a refused request is never parsed (it costs its head and no more): the
    401 has JSON-RPC's null id, in the dialect its A2A-Version header asks for."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": "req-7", "method": method}
    if params is not None:
        body["params"] = params
    for headers in ({}, mode.bad):
        hdrs = {**headers, **({"A2A-Version": version} if version else {})}
        response = mode.client.post(body, hdrs)
        assert_refused(response, mode)
        answer = response.json()
        assert answer["id"] is None
        error = answer["error"]
        assert error["code"] == -32600
        assert error["message"].startswith(
            "Request payload validation error: authentication required"
        )
        if version == "1.0":  # google.rpc details, or none: never v0.x's free-form object
            assert not isinstance(error.get("data"), dict)
        else:
            assert error["data"]["detail"].startswith("authentication required")


def test_an_unreadable_body_is_still_401_with_no_id(mode: Mode) -> None:
    for body in (b"{not json", b"[]", json.dumps({"id": True, "method": 5}).encode()):
        response = mode.client.post(body)
        assert_refused(response, mode)
        assert response.json()["id"] is None


@pytest.mark.parametrize(
    ("verb", "path"),
    [
        ("POST", "/message:send"),
        ("POST", "/message:stream"),
        ("GET", "/tasks"),
        ("GET", "/tasks/t1"),
        ("GET", "/tasks/t1:subscribe"),
        ("POST", "/tasks/t1/pushNotificationConfigs"),
        ("GET", "/extendedAgentCard"),
        ("GET", "/sse?taskId=t1"),
    ],
)
def test_rest_and_sse_without_valid_credentials_are_401(mode: Mode, verb: str, path: str) -> None:
    for headers in ({}, mode.bad):
        hdrs = {"Content-Type": "application/json", "A2A-Version": "1.0", **headers}
        response = mode.client.http.request(
            verb, path, content=json.dumps(MESSAGE_1_0), headers=hdrs
        )
        assert_refused(response, mode)
        # The seeds' /sse is JSON-RPC's; the rest HTTP+JSON 1.0's media type (1.0.1).
        media = "application/json" if path.startswith("/sse") else "application/a2a+json"
        assert response.headers["Content-Type"] == media


def test_the_card_stays_public(mode: Mode) -> None:
    assert mode.client.http.get("/.well-known/agent-card.json").status_code == 200


def test_each_caller_sees_only_its_own_tasks(mode: Mode) -> None:
    alice, bob = mode.credentials("alice"), mode.credentials("bob")
    sent = mode.client.result("SendMessage", MESSAGE_1_0, version="1.0", headers=alice)
    task_id = sent["task"]["id"]
    assert (
        mode.client.result("GetTask", {"id": task_id}, version="1.0", headers=alice)["id"]
        == task_id
    )
    assert (
        mode.client.error("GetTask", {"id": task_id}, version="1.0", headers=bob)["code"] == -32001
    )
    listed = mode.client.result("ListTasks", {}, version="1.0", headers=bob)
    assert listed["tasks"] == []


def test_each_mode_names_its_missing_settings() -> None:
    with pytest.raises(SettingsError, match="A2A_AUDIENCE"):
        Settings.from_env({"A2A_AUTH": "google"})
    google = {"A2A_AUTH": "google", "A2A_PUBLIC_URL": AUDIENCE, "A2A_AUDIENCE": "https://a, b"}
    assert Settings.from_env(google).google_audiences == ("https://a", "b", AUDIENCE)
    with pytest.raises(SettingsError, match="A2A_OIDC_ISSUER and A2A_OIDC_AUDIENCE"):
        Settings.from_env({"A2A_AUTH": "oidc"})
    with pytest.raises(SettingsError, match=r"A2A_OIDC_ISSUER: .*https://"):
        Settings.from_env(
            {"A2A_AUTH": "oidc", "A2A_OIDC_ISSUER": "http://idp.example", "A2A_OIDC_AUDIENCE": "a"}
        )
    scoped = Settings.from_env({"A2A_OIDC_REQUIRED_SCOPES": "a2a.call openid,profile"})
    assert scoped.oidc_required_scopes == ("a2a.call", "openid", "profile")
    with pytest.raises(SettingsError, match="A2A_AUTH"):
        Settings.from_env({"A2A_AUTH": "basic"})


def test_the_emulators_token_mode_is_refused_on_cloud_run() -> None:
    emulated = {"CLOUD_TASKS_EMULATOR_HOST": "127.0.0.1:9022", "CLOUD_TASKS_EMULATOR_SECRET": "s"}
    assert Settings.from_env(emulated).tasks_emulator_host
    with pytest.raises(SettingsError, match="CLOUD_TASKS_EMULATOR_HOST is set on Cloud Run"):
        Settings.from_env({**emulated, "K_SERVICE": "worker"})


@pytest.mark.parametrize("auth", ["none", "api-key"])
def test_building_the_app_without_tokens_loads_no_jose_or_google_auth(auth: str) -> None:
    code = (
        "import sys, json; from shared.app import build; build(); "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('jwt', 'cryptography') or m.startswith('google.auth'))))"
    )
    env = {"PATH": "", "A2A_AUTH": auth, "A2A_API_KEYS": f"alice:{hashed(KEYS['alice'])}"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_an_unverified_email_owner_is_401_with_its_reason(
    make_client: Callable[..., Client], issuer: Issuer
) -> None:
    client = make_client(
        auth="oidc", oidc_issuer=issuer.url, oidc_audience="agent", oidc_owner_claim="email"
    )
    claims: dict[str, Any] = {"aud": "agent", "email": "alice@example.com"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    version = {"A2A-Version": "1.0"}
    for verified in (False, None):
        token = issuer.token(**claims, email_verified=verified)
        response = client.post(body, {"Authorization": f"Bearer {token}", **version})
        assert response.status_code == 401
        assert 'error_description="e-mail not verified"' in response.headers["WWW-Authenticate"]
    token = issuer.token(**claims, email_verified=True)
    listed = client.result(
        "ListTasks", {}, version="1.0", headers={"Authorization": f"Bearer {token}"}
    )
    assert listed["tasks"] == []
