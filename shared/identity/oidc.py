"""A2A_AUTH=oidc: any OpenID Connect issuer's JWT in `Authorization: Bearer`.

Firebase Auth / Identity Platform, Auth0, Okta, Entra...: the issuer (A2A_OIDC_ISSUER) names
its keys in its discovery document (`/.well-known/openid-configuration`, `jwks_uri`); PyJWT's
PyJWKClient fetches and caches them; a token naming an unknown key id makes us fetch them
again, at most once a minute, so that forged key ids cannot make us hammer the issuer. Only
asymmetric algorithms are accepted (`none` and HS* are refused: a public key must never serve
as an HMAC secret). The token must be for A2A_OIDC_AUDIENCE, unexpired, and carry
A2A_OIDC_REQUIRED_SCOPES; the owner is its A2A_OIDC_OWNER_CLAIM (`sub` by default: the
issuer's own id of the user, never reassigned). An `email` owner claim counts only with
`email_verified: true`, as Google's tokens are held to (shared.identity.google).
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import jwt

from shared.clock import SYSTEM, Clock
from shared.identity import (
    MAX_OWNER_LENGTH,
    AuthenticationError,
    Headers,
    Principal,
    bearer_challenge,
    discovery_url,
)
from shared.tasks_auth import TokenRefused, bearer

log = logging.getLogger("a2a.identity")

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
_LEEWAY = 60  # seconds of clock skew tolerated on exp, nbf and iat
_TIMEOUT = 10  # seconds for the issuer's discovery document and keys
_REFRESH = 60.0  # seconds between two fetches forced by unknown key ids


class OidcTokens:
    def __init__(
        self,
        issuer: str,
        audience: str,
        *,
        owner_claim: str = "sub",
        required_scopes: Sequence[str] = (),
        clock: Clock = SYSTEM,
    ) -> None:
        self._issuer = issuer
        self._audience = audience
        self._owner_claim = owner_claim
        self._scopes = frozenset(required_scopes)
        self._lock = threading.Lock()
        self._keys: jwt.PyJWKClient | None = None
        self._clock = clock
        self._refreshed = float("-inf")
        self._discovery_failed = float("-inf")

    def authenticate(self, header: Headers) -> Principal:
        authorization = header("Authorization")
        if not authorization:
            raise AuthenticationError(
                f"send an ID token of {self._issuer} for audience {self._audience} in the "
                "Authorization header: `Authorization: Bearer <token>`",
                bearer_challenge(),
            )
        try:
            owner = self._owner(self._claims(bearer(authorization)))
        except TokenRefused as exc:
            log.info("refused a token: %s", exc)
            error = "insufficient_scope" if exc.reason == "missing scope" else "invalid_token"
            raise AuthenticationError(
                f"the token was refused ({exc.reason}); send a valid one",
                bearer_challenge(error, exc.reason),
            ) from None
        return Principal(owner, authenticated=True)

    def _claims(self, token: str) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise TokenRefused(f"not a JWT ({exc})", "not a JWT") from None
        if header.get("alg") not in ALGORITHMS:
            raise TokenRefused(f"alg {header.get('alg')!r}", "unsupported algorithm")
        try:
            key = self._key(header.get("kid"))
        except jwt.PyJWKClientError as exc:
            raise TokenRefused(
                f"cannot fetch the keys ({exc})", "signing keys unavailable"
            ) from None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=list(ALGORITHMS),
                audience=self._audience,
                issuer=self._issuer,
                leeway=_LEEWAY,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused("expired", "expired") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused("wrong audience", "wrong audience") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused("wrong issuer", "wrong issuer") from None
        except jwt.InvalidSignatureError:
            raise TokenRefused("bad signature", "bad signature") from None
        except jwt.InvalidTokenError as exc:
            raise TokenRefused(f"invalid ({exc})", "invalid token") from None
        return claims

    def _owner(self, claims: dict[str, Any]) -> str:
        granted = _scopes(claims)
        if not self._scopes <= granted:
            missing = " ".join(sorted(self._scopes - granted))
            raise TokenRefused(f"scopes {missing} not granted", "missing scope")
        owner = claims.get(self._owner_claim)
        if not isinstance(owner, str) or not owner or len(owner) > MAX_OWNER_LENGTH:
            raise TokenRefused(f"no usable {self._owner_claim} claim", f"no {self._owner_claim}")
        if self._owner_claim == "email" and claims.get("email_verified") is not True:
            # Most issuers let a user write any address into their profile (or sign up with
            # one they do not hold): unverified, it would name someone else's tasks.
            raise TokenRefused("email_verified is not true", "e-mail not verified")
        return owner

    def _key(self, kid: object) -> jwt.PyJWK:
        """The issuer's key `kid`: from the cache, else from a fresh fetch (rate limited)."""
        client = self._jwks()
        found = _find(client.get_jwk_set(), kid)
        if found is None:
            with self._lock:
                now = self._clock.monotonic()
                refresh = now - self._refreshed >= _REFRESH
                if refresh:
                    self._refreshed = now
            if refresh:
                found = _find(client.get_jwk_set(refresh=True), kid)
        if found is None:
            raise TokenRefused(f"no key {kid!r} at the issuer", "unknown signing key")
        return found

    def _jwks(self) -> jwt.PyJWKClient:
        """The issuer's key client, from its discovery document at the first token (start-up
        needs no network; an issuer down then is retried, not fatal)."""
        with self._lock:
            if self._keys is None:
                # An issuer that failed is asked again after a minute, not at every request.
                now = self._clock.monotonic()
                if now - self._discovery_failed < _REFRESH:
                    raise TokenRefused(
                        "the issuer failed within a minute", "signing keys unavailable"
                    )
                try:
                    uri = self._jwks_uri()
                except TokenRefused:
                    self._discovery_failed = now
                    raise
                self._keys = jwt.PyJWKClient(uri, cache_keys=True, timeout=_TIMEOUT)
            return self._keys

    def _jwks_uri(self) -> str:
        url = discovery_url(self._issuer)
        try:
            with urllib.request.urlopen(url, timeout=_TIMEOUT) as response:
                document = json.loads(response.read(1024 * 1024))
        except urllib.error.HTTPError as exc:
            exc.close()  # it holds the connection
            raise TokenRefused(f"cannot read {url} ({exc})", "signing keys unavailable") from None
        except (OSError, ValueError) as exc:
            raise TokenRefused(f"cannot read {url} ({exc})", "signing keys unavailable") from None
        uri = document.get("jwks_uri") if isinstance(document, dict) else None
        if not isinstance(uri, str) or not (
            uri.startswith("https://") or uri.startswith(self._issuer.rstrip("/") + "/")
        ):
            # https only, unless the keys sit under the issuer itself (a loopback issuer
            # in development, which the settings allow over http).
            raise TokenRefused(f"{url} names no https jwks_uri", "signing keys unavailable")
        if document.get("issuer") != self._issuer:
            # OIDC Discovery §4.3: the document must name the issuer it was fetched for.
            raise TokenRefused(f"{url} is for issuer {document.get('issuer')!r}", "wrong issuer")
        return uri


def _find(keys: jwt.PyJWKSet, kid: object) -> jwt.PyJWK | None:
    return next((key for key in keys.keys if key.key_id == kid), None)


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    """The scopes granted: `scope` (space-separated, RFC 8693/9068) or `scp` (a list, or a
    string as Entra writes it)."""
    granted: set[str] = set()
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            granted.update(value.split())
        elif isinstance(value, list):
            granted.update(v for v in value if isinstance(v, str))
    return frozenset(granted)
