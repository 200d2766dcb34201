"""Who is calling: one authentication step per request turns credentials into an owner.

The owner scopes every store operation, so another caller's task is simply not found. The
mode (A2A_AUTH) picks the authenticator (shared.app builds it); each lives in its own module,
imported only when chosen, so the default `none` loads no JOSE or google-auth code at cold start:

- `none` (here): local development; every caller is the one owner `anonymous`.
- `api-key` (`api_key.py`): a key in a header, checked against the SHA-256 hashes of
  A2A_API_KEYS; the owner is the name paired with the hash.
- `google` (`google.py`): a Google-signed ID token; the owner is its verified e-mail.
- `oidc` (`oidc.py`): any OpenID Connect issuer's token; the owner is a configured claim.

A refusal carries the `WWW-Authenticate` challenge the bindings answer 401 with, and a message
naming what to send; a token's own content is never echoed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from shared.frozen import frozen

ANONYMOUS = "anonymous"
REALM = "a2a"
# An owner scopes store keys and is stored with every task: an upper bound keeps a forged
# claim from becoming a megabyte key.
MAX_OWNER_LENGTH = 256

# Reads one request header by name, in any case (the front's `Headers.get`, in the wire module
# of the bindings).
Headers = Callable[[str], str | None]


@frozen
class Principal:
    """The caller: the owner its tasks are scoped to."""

    owner: str
    # Whether the caller proved who it is (the extended card is for these callers only).
    authenticated: bool = False


class AuthenticationError(Exception):
    """No valid credentials: the message says what to send, `challenge` is the
    WWW-Authenticate header of the 401 answer."""

    def __init__(self, message: str, challenge: str) -> None:
        super().__init__(message)
        self.challenge = challenge


class Authenticator(Protocol):
    def authenticate(self, header: Headers) -> Principal:
        """The caller, from its request headers; raises AuthenticationError."""
        ...


class Anonymous:
    """A2A_AUTH=none: no credentials asked, every caller is the same owner."""

    def authenticate(self, header: Headers) -> Principal:
        return Principal(ANONYMOUS)


def discovery_url(issuer: str) -> str:
    """An OpenID Connect issuer's discovery document (what the card points clients at)."""
    return issuer.rstrip("/") + "/.well-known/openid-configuration"


def bearer_challenge(error: str | None = None, description: str | None = None) -> str:
    """RFC 6750 §3: no error code when no token was sent, `invalid_token` for a bad one."""
    challenge = f'Bearer realm="{REALM}"'
    if error:
        challenge += f', error="{error}"'
    if description:
        challenge += f', error_description="{description}"'
    return challenge
