"""A2A_AUTH=google: real RS256 ID tokens, checked with google-auth against certificates served
by a local stand-in for Google's certs endpoint."""

from __future__ import annotations

import time
from typing import Any

import pytest

from shared.identity import AuthenticationError, Principal
from shared.identity.google import GoogleIdTokens
from tests.clock import ManualClock
from tests.identity.issuer import Issuer

AUDIENCE = "https://us-central1-demo.cloudfunctions.net/a2a"
ALICE = "alice@example.com"


def google_token(issuer: Issuer, kid: str = "k1", **claims: Any) -> str:
    valid = {
        "iss": "https://accounts.google.com",
        "aud": AUDIENCE,
        "email": ALICE,
        "email_verified": True,
    }
    return issuer.token(kid, **{**valid, **claims})


def refusal(tokens: GoogleIdTokens, authorization: str | None) -> AuthenticationError:
    with pytest.raises(AuthenticationError) as refused:
        tokens.authenticate({"Authorization": authorization}.get)
    return refused.value


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def tokens(issuer: Issuer, clock: ManualClock) -> GoogleIdTokens:
    return GoogleIdTokens([AUDIENCE], certs_url=issuer.url + "/certs", clock=clock)


def test_a_valid_token_is_its_verified_email(issuer: Issuer, tokens: GoogleIdTokens) -> None:
    for iss in ("https://accounts.google.com", "accounts.google.com"):
        authorization = f"Bearer {google_token(issuer, iss=iss)}"
        assert tokens.authenticate({"Authorization": authorization}.get) == Principal(
            ALICE, authenticated=True
        )
    assert issuer.fetches == 1  # the certificates are cached


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, "expired"),
        ({"aud": "https://elsewhere.example"}, "wrong audience"),
        ({"iss": "https://evil.example"}, "wrong issuer"),
        ({"email_verified": False}, "e-mail not verified"),
        ({"email": None}, "no e-mail"),
    ],
)
def test_a_bad_token_is_refused_with_a_short_reason(
    issuer: Issuer, tokens: GoogleIdTokens, claims: dict[str, Any], reason: str
) -> None:
    token = google_token(issuer, **claims)
    error = refusal(tokens, f"Bearer {token}")
    assert f"({reason})" in str(error)
    assert (
        error.challenge
        == f'Bearer realm="a2a", error="invalid_token", error_description="{reason}"'
    )
    assert token not in str(error)
    assert "evil" not in str(error) and "elsewhere" not in str(error)  # no claim echoed


def test_forged_algorithms_are_refused(issuer: Issuer, tokens: GoogleIdTokens) -> None:
    claims: dict[str, Any] = {"iss": "https://accounts.google.com", "aud": AUDIENCE, "email": ALICE}
    claims |= {"email_verified": True, "exp": int(time.time()) + 600}
    for forged in (issuer.unsigned(**claims), issuer.hs256_with_public_key(**claims)):
        error = refusal(tokens, f"Bearer {forged}")
        assert "invalid_token" in error.challenge, forged


def test_an_unknown_key_is_fetched_once_then_refused(
    issuer: Issuer, tokens: GoogleIdTokens, clock: ManualClock
) -> None:
    assert tokens.authenticate({"Authorization": f"Bearer {google_token(issuer)}"}.get)
    rotated = f"Bearer {google_token(issuer, kid='k2')}"
    issuer.published = {"k1", "k2"}
    # Within a minute of the last fetch an unknown key id fetches nothing (no hammering).
    assert "unknown signing key" in str(refusal(tokens, rotated))
    assert issuer.fetches == 1
    clock.advance(61)
    assert tokens.authenticate({"Authorization": rotated}.get).owner == ALICE
    assert issuer.fetches == 2
    never = f"Bearer {google_token(issuer, kid='k2', headers={'kid': 'k9'})}"
    assert "unknown signing key" in str(refusal(tokens, never))
    assert "unknown signing key" in str(refusal(tokens, never))
    assert issuer.fetches == 2


def test_no_token_asks_for_one_without_an_error_code(tokens: GoogleIdTokens) -> None:
    for authorization in (None, ""):
        error = refusal(tokens, authorization)
        assert error.challenge == 'Bearer realm="a2a"'
        assert "gcloud auth print-identity-token" in str(error)
    for authorization in (
        "Basic YWxpY2U6cHc=",
        "Bearer",
        "Bearer not.a.jwt",
        "Bearer " + "x" * 5000,
    ):
        assert "invalid_token" in refusal(tokens, authorization).challenge
