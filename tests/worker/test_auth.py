"""Only Cloud Tasks may call the worker: tokens are checked before any work is done."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import requests
from google.auth import crypt, jwt

from emulator.cloud_tasks import TasksEmulator
from emulator.oidc import make_token
from shared.bindings.queue_target import QueueTargetApp
from shared.bindings.wire import Answer, BodyRefused, Headers, Request
from shared.jobs import Outcome
from shared.ports import Delivery
from shared.tasks_auth import EmulatorTokens, GoogleTokens, TokenRefused
from tests.conftest import SA
from tests.worker.conftest import Emulated

AUDIENCE = "https://worker-abc-uc.a.run.app"


def call(worker_url: str, authorization: str | None, body: Any) -> requests.Response:
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    return requests.post(worker_url, data=json.dumps(body), headers=headers, timeout=10)


@pytest.mark.emulator
def test_the_worker_refuses_every_call_but_cloud_tasks(
    emulated: Emulated, tasks_emulator: TasksEmulator
) -> None:
    url = f"{emulated.worker.url}/"
    secret = tasks_emulator.secret
    assert secret
    job = {"taskId": "no-such-task", "owner": "anonymous", "turn": 1, "messageId": "m"}
    refused = {
        "no token": None,
        "not a bearer token": f"Basic {make_token(SA, url, secret)}",
        "bad signature": f"Bearer {make_token(SA, url, 'another secret')}",
        "unsigned": f"Bearer {make_token(SA, url, None)}",
        "wrong audience": f"Bearer {make_token(SA, 'http://elsewhere.example/', secret)}",
        "wrong account": f"Bearer {make_token('mallory@example.com', url, secret)}",
        "expired": f"Bearer {make_token(SA, url, secret, now=time.time() - 7200)}",
    }
    for case, authorization in refused.items():
        # A malformed body too: authentication comes before reading it.
        for body in (job, "not a job"):
            answer = call(url, authorization, body)
            assert answer.status_code == 401, case
            assert "only Cloud Tasks may call the worker" in answer.json()["error"], case
            assert "Traceback" not in answer.text
    valid = f"Bearer {make_token(SA, url, secret)}"
    assert call(url, valid, "not a job").status_code == 400
    answer = call(url, valid, job)
    assert (answer.status_code, answer.json()) == (200, {"outcome": "nothing to do"})


def test_emulator_tokens_are_checked_with_the_shared_secret() -> None:
    tokens = EmulatorTokens("s3cret", SA)
    claims = tokens.verify(make_token(SA, AUDIENCE, "s3cret"), AUDIENCE + "/")
    assert claims["email"] == SA
    for token, audience in [
        (make_token(SA, AUDIENCE, "other"), AUDIENCE),
        (make_token(SA, AUDIENCE, "s3cret"), "https://other.example"),
        ("a.b", AUDIENCE),
        ("!!.??.%%", AUDIENCE),
    ]:
        with pytest.raises(TokenRefused):
            tokens.verify(token, audience)


class GoogleKeys:
    """An RSA key standing in for Google's: signs ID tokens, serves its 'certificates'."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.signer = crypt.RSASigner.from_string(private, key_id="k1")  # type: ignore[no-untyped-call]
        self.certs = {"k1": public.decode()}
        self.fetches = 0

    def fetch(self) -> Mapping[str, str]:
        self.fetches += 1
        return self.certs

    def token(self, **claims: Any) -> str:
        now = int(time.time())
        payload = {
            "iss": "https://accounts.google.com",
            "aud": AUDIENCE,
            "sub": "1234",
            "email": SA,
            "email_verified": True,
            "iat": now,
            "exp": now + 3600,
            **claims,
        }
        token: bytes = jwt.encode(self.signer, payload)  # type: ignore[no-untyped-call]
        return token.decode()


def test_google_id_tokens_are_checked_for_the_account_and_the_audience() -> None:
    keys = GoogleKeys()
    tokens = GoogleTokens(SA, fetch_certs=keys.fetch)
    assert tokens.verify(keys.token(), AUDIENCE)["email"] == SA
    assert tokens.verify(keys.token(iss="accounts.google.com"), AUDIENCE)
    refused: list[dict[str, Any]] = [
        {"aud": "https://elsewhere.example"},
        {"email": "mallory@example.com"},
        {"email_verified": False},
        {"iss": "https://evil.example"},
        {"exp": int(time.time()) - 7200, "iat": int(time.time()) - 10800},
    ]
    for claims in refused:
        with pytest.raises(TokenRefused):
            tokens.verify(keys.token(**claims), AUDIENCE)
    with pytest.raises(TokenRefused):
        tokens.verify(make_token(SA, AUDIENCE, "s3cret"), AUDIENCE)  # HS256: not Google's
    assert keys.fetches == 1  # the certificates are cached


def test_a_target_reads_the_rest_of_a_body_only_once_the_token_is_good() -> None:
    """The body past what came with the head is read only for Cloud Tasks; one that does
    not come in time is a 408 naming the setting, one with no room a 503 with Retry-After."""
    secret = "the emulator's secret"
    jobs: list[dict[str, Any]] = []

    def target(payload: dict[str, Any], delivery: Delivery) -> Outcome:
        jobs.append(payload)
        return Outcome.RAN

    app = QueueTargetApp("worker", target, EmulatorTokens(secret, SA), url=AUDIENCE, max_attempts=3)
    reads: list[str] = []

    def post(authorization: str, rest: Callable[[], bytes]) -> Answer:
        def counted() -> bytes:
            reads.append(authorization)
            return rest()

        headers = Headers.of([(b"authorization", authorization.encode())])
        scope = {"method": "POST", "path": "/", "headers": [], "server": ("w", 443)}
        return app(Request(scope, headers, b'{"task', counted))

    whole = b'{"taskId": "t"}'
    refused = post(f"Bearer {make_token(SA, AUDIENCE, 'another secret')}", lambda: whole)
    assert refused.status == 401 and reads == [] and jobs == []
    good = f"Bearer {make_token(SA, AUDIENCE, secret)}"
    assert post(good, lambda: whole).status == 200 and jobs == [{"taskId": "t"}]
    assert reads == [good]

    def late() -> bytes:
        raise BodyRefused(408, "the body did not come (A2A_BODY_READ_SECONDS)")

    def no_room() -> bytes:
        raise BodyRefused(503, "no room (A2A_MAX_BUFFERED_BYTES)", 1)

    answer = post(good, late)
    assert answer.status == 408 and b"A2A_BODY_READ_SECONDS" in answer.body
    answer = post(good, no_room)
    assert (answer.status, answer.headers["Retry-After"]) == (503, "1")
    assert b"A2A_MAX_BUFFERED_BYTES" in answer.body
