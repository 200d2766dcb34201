"""A2A_AUTH=oidc: real RS256 tokens from a local OpenID Connect issuer stand-in (discovery
document and JWKS), checked with PyJWT."""

from __future__ import annotations

import time
from typing import Any

import pytest

from shared.identity import AuthenticationError, Principal
from shared.identity.oidc import OidcTokens
from tests.clock import ManualClock
from tests.identity.issuer import Issuer

AUDIENCE = "a2a-agent"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def tokens(issuer: Issuer, clock: ManualClock) -> OidcTokens:
    return OidcTokens(issuer.url, AUDIENCE, clock=clock)


def bearer(token: str) -> Any:
    return {"Authorization": f"Bearer {token}"}.get


def refusal(tokens: OidcTokens, token: str) -> AuthenticationError:
    with pytest.raises(AuthenticationError) as refused:
        tokens.authenticate(bearer(token))
    assert token not in str(refused.value)
    return refused.value


def test_a_valid_token_is_its_subject(issuer: Issuer, tokens: OidcTokens) -> None:
    principal = tokens.authenticate(bearer(issuer.token(aud=AUDIENCE)))
    assert principal == Principal("user-1", authenticated=True)
    assert tokens.authenticate(bearer(issuer.token(aud=[AUDIENCE, "other"]))).owner == "user-1"
    assert (issuer.discoveries, issuer.fetches) == (1, 1)  # discovery and keys are cached


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": int(time.time()) - 3600}, "expired"),
        ({"exp": None}, "invalid token"),
        ({"aud": "someone-else"}, "wrong audience"),
        ({"aud": None}, "invalid token"),
        ({"iss": "https://evil.example"}, "wrong issuer"),
        ({"sub": None}, "no sub"),
        ({"sub": "x" * 300}, "no sub"),
    ],
)
def test_a_bad_token_is_refused_with_a_short_reason(
    issuer: Issuer, tokens: OidcTokens, claims: dict[str, Any], reason: str
) -> None:
    error = refusal(tokens, issuer.token(**{"aud": AUDIENCE, **claims}))
    assert f"({reason})" in str(error)
    assert error.challenge.endswith(f'error="invalid_token", error_description="{reason}"')


def test_none_and_hmac_with_the_public_key_are_refused(issuer: Issuer, tokens: OidcTokens) -> None:
    claims = {"iss": issuer.url, "aud": AUDIENCE, "sub": "mallory", "exp": int(time.time()) + 60}
    for forged in (issuer.unsigned(**claims), issuer.hs256_with_public_key(**claims)):
        assert "(unsupported algorithm)" in str(refusal(tokens, forged))
    # Signed by a key the issuer does not publish, under a published key id.
    stolen = issuer.token("k2", headers={"kid": "k1"}, aud=AUDIENCE)
    assert "(bad signature)" in str(refusal(tokens, stolen))


def test_an_unknown_key_id_refreshes_the_keys_at_most_once_a_minute(
    issuer: Issuer, tokens: OidcTokens, clock: ManualClock
) -> None:
    assert tokens.authenticate(bearer(issuer.token(aud=AUDIENCE)))
    rotated = issuer.token("k2", aud=AUDIENCE)
    assert "(unknown signing key)" in str(refusal(tokens, rotated))  # refreshed once...
    assert issuer.fetches == 2
    issuer.published = {"k1", "k2"}
    assert "(unknown signing key)" in str(refusal(tokens, rotated))  # ...then not for a minute
    assert issuer.fetches == 2
    clock.advance(61)
    assert tokens.authenticate(bearer(rotated)).owner == "user-1"
    assert issuer.fetches == 3
    assert tokens.authenticate(bearer(rotated)).owner == "user-1"
    assert issuer.fetches == 3


def test_owner_claim_and_required_scopes(issuer: Issuer) -> None:
    tokens = OidcTokens(
        issuer.url, AUDIENCE, owner_claim="email", required_scopes=("a2a.call", "openid")
    )
    bob: dict[str, Any] = {"aud": AUDIENCE, "email": "bob@example.com", "email_verified": True}
    token = issuer.token(**bob, scope="openid a2a.call profile")
    assert tokens.authenticate(bearer(token)).owner == "bob@example.com"
    listed = issuer.token(**bob, scp=["a2a.call", "openid"])
    assert tokens.authenticate(bearer(listed)).owner == "bob@example.com"
    error = refusal(tokens, issuer.token(**bob, scope="openid"))
    assert 'error="insufficient_scope"' in error.challenge
    assert "(no email)" in str(refusal(tokens, issuer.token(aud=AUDIENCE, scope="openid a2a.call")))


@pytest.mark.parametrize("verified", [False, None, "true", 1])
def test_an_email_owner_must_be_verified(issuer: Issuer, verified: object) -> None:
    # Anyone can sign up at most issuers with an address they do not hold: unverified, the
    # token would be alice's owner and see all her tasks.
    tokens = OidcTokens(issuer.url, AUDIENCE, owner_claim="email")
    claims: dict[str, Any] = {
        "aud": AUDIENCE,
        "email": "alice@example.com",
        "email_verified": verified,
    }
    error = refusal(tokens, issuer.token(**claims))
    assert "(e-mail not verified)" in str(error)
    assert error.challenge.endswith('error_description="e-mail not verified"')
    verified_token = issuer.token(**{**claims, "email_verified": True})
    assert tokens.authenticate(bearer(verified_token)).owner == "alice@example.com"
    # The subject needs no such claim: the issuer's own id of the user.
    subject = OidcTokens(issuer.url, AUDIENCE)
    assert subject.authenticate(bearer(issuer.token(**claims))).owner == "user-1"


def test_an_issuer_that_fails_refuses_tokens_and_is_asked_again_after_a_minute(
    issuer: Issuer, clock: ManualClock
) -> None:
    tokens = OidcTokens(issuer.url + "/nowhere", AUDIENCE, clock=clock)
    for _ in range(3):
        assert "(signing keys unavailable)" in str(refusal(tokens, issuer.token(aud=AUDIENCE)))
    assert issuer.requests == 1  # not once per request while it is down
    clock.advance(61)
    assert "(signing keys unavailable)" in str(refusal(tokens, issuer.token(aud=AUDIENCE)))
    assert issuer.requests == 2


def test_no_token_names_the_issuer_and_audience(tokens: OidcTokens, issuer: Issuer) -> None:
    with pytest.raises(AuthenticationError) as refused:
        tokens.authenticate(lambda name: None)
    assert issuer.url in str(refused.value) and AUDIENCE in str(refused.value)
    assert refused.value.challenge == 'Bearer realm="a2a"'
    for junk in ("not.a.jwt", "a.b", "x" * 10000, "ey.ey.ey"):
        assert "invalid_token" in refusal(tokens, junk).challenge
