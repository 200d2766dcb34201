"""Any Authorization header, however malformed, is a clean refusal in every token mode: an
AuthenticationError with a Bearer challenge, never another exception (a 5xx)."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.identity import AuthenticationError
from shared.identity.google import GoogleIdTokens
from shared.identity.oidc import OidcTokens

# Nothing listens there: a token that gets as far as fetching keys is refused for want of them.
NOWHERE = "http://127.0.0.1:9"
MODES = (
    GoogleIdTokens(["https://agent.example"], certs_url=NOWHERE + "/certs"),
    OidcTokens(NOWHERE, "agent"),
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def segment(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


jwt_shaped = st.builds(
    lambda header, claims, signature: f"{segment(header)}.{segment(claims)}.{signature}",
    st.dictionaries(st.sampled_from(["alg", "kid", "typ", "crit", "jku"]), json_values)
    | json_values,
    st.dictionaries(st.sampled_from(["iss", "aud", "exp", "sub", "email"]), json_values)
    | json_values,
    st.text(
        alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", max_size=40
    ),
)


def refused(authorization: str) -> None:
    for mode in MODES:
        try:
            mode.authenticate({"Authorization": authorization}.get)
        except AuthenticationError as error:
            assert error.challenge.startswith('Bearer realm="a2a"')
            # Never echoed; a short input may be a word of the message itself ("send").
            assert authorization.strip() not in str(error) or len(authorization.strip()) < 16
        else:
            raise AssertionError(f"{type(mode).__name__} accepted {authorization!r}")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_header_text_is_refused_cleanly(authorization: str) -> None:
    refused(authorization)


@settings(max_examples=200, deadline=None)
@given(jwt_shaped)
def test_any_jwt_shaped_token_is_refused_cleanly(token: str) -> None:
    refused(f"Bearer {token}")
