"""The emulator's OIDC-shaped tokens: signed, unsigned, and what verification refuses."""

from __future__ import annotations

import pytest

from emulator.oidc import TokenError, bearer_token, make_token, verify_token

SA = "worker@demo.iam.gserviceaccount.com"


def test_signed_token_round_trip() -> None:
    token = make_token(SA, "https://w", "s3cret", now=1000)
    claims = verify_token(token, "s3cret", audience="https://w", email=SA, now=1001)
    assert claims["email"] == claims["sub"] == SA
    assert claims["iss"] == "https://accounts.google.com"


@pytest.mark.parametrize(
    ("secret", "kwargs"),
    [
        ("other", {}),  # wrong secret
        ("s3cret", {"audience": "https://elsewhere"}),
        ("s3cret", {"email": "someone@else"}),
        ("s3cret", {"now": 1000 + 3600 + 61}),  # expired
    ],
)
def test_verification_refuses(secret: str, kwargs: dict[str, object]) -> None:
    token = make_token(SA, "https://w", "s3cret", now=1000)
    kwargs.setdefault("now", 1001)
    with pytest.raises(TokenError):
        verify_token(token, secret, **kwargs)  # type: ignore[arg-type]


def test_unsigned_token_only_passes_without_a_secret() -> None:
    token = make_token(SA, "https://w", None)
    assert token.endswith(".")
    assert verify_token(token, None)["aud"] == "https://w"
    with pytest.raises(TokenError):
        verify_token(token, "s3cret")  # a worker with a secret never accepts "none"


def test_bearer_header_parsing() -> None:
    assert bearer_token("Bearer abc") == "abc"
    with pytest.raises(TokenError):
        bearer_token("Basic abc")
    with pytest.raises(TokenError):
        bearer_token(None)
