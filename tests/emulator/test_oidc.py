"""The emulator's OIDC-shaped tokens against the worker's verifier (shared.tasks_auth): what
the launcher mints passes, and what verification refuses."""

from __future__ import annotations

import time

import pytest

from emulator.oidc import make_token
from shared.tasks_auth import EmulatorTokens, TokenRefused, bearer

SA = "worker@demo.iam.gserviceaccount.com"


def test_a_signed_token_passes_with_its_secret() -> None:
    token = make_token(SA, "https://w", "s3cret")
    claims = EmulatorTokens("s3cret", SA).verify(token, "https://w")
    assert claims["email"] == claims["sub"] == SA
    assert claims["iss"] == "https://accounts.google.com"
    assert claims["emulator"] is True


@pytest.mark.parametrize(
    ("secret", "email", "audience", "issued"),
    [
        ("other", SA, "https://w", 0),  # wrong secret
        ("s3cret", SA, "https://elsewhere", 0),
        ("s3cret", "someone@else", "https://w", 0),
        ("s3cret", SA, "https://w", -(3600 + 61)),  # expired, beyond the minute of leeway
    ],
)
def test_verification_refuses(secret: str, email: str, audience: str, issued: int) -> None:
    token = make_token(SA, "https://w", "s3cret", now=time.time() + issued)
    with pytest.raises(TokenRefused):
        EmulatorTokens(secret, email).verify(token, audience)


def test_an_expired_token_passes_within_the_leeway() -> None:
    token = make_token(SA, "https://w", "s3cret", now=time.time() - 3600 - 30)
    assert EmulatorTokens("s3cret", SA).verify(token, "https://w")["sub"] == SA


def test_an_unsigned_token_never_passes() -> None:
    token = make_token(SA, "https://w", None)
    assert token.endswith(".")
    with pytest.raises(TokenRefused, match="alg 'none'"):
        EmulatorTokens("s3cret", SA).verify(token, "https://w")


def test_bearer_header_parsing() -> None:
    assert bearer("Bearer abc") == "abc"
    with pytest.raises(TokenRefused):
        bearer("Basic abc")
    with pytest.raises(TokenRefused):
        bearer(None)
