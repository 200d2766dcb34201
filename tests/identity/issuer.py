"""A token issuer stand-in on a local port: RSA keys that sign real tokens, served as Google's
certificates (`/certs`, key id -> PEM) and as an OpenID Connect issuer (`/.well-known/
openid-configuration` -> `/jwks`). Counts the key fetches, so tests see caching and refresh.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Key:
    def __init__(self, kid: str) -> None:
        self.kid = kid
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_pem = (
            self.private.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )

    def jwk(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(
            jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key())
        )
        return {**found, "kid": self.kid, "use": "sig", "alg": "RS256"}


@functools.cache
def _key(kid: str) -> Key:
    """One key per id for the whole run: RSA key generation is slow."""
    return Key(kid)


class Issuer:
    """Serves keys at http://127.0.0.1:<port>; `published` are the keys it publishes."""

    def __init__(self) -> None:
        self.keys = {kid: _key(kid) for kid in ("k1", "k2")}
        self.published = {"k1"}
        self.fetches = 0
        self.discoveries = 0
        self.requests = 0  # every GET, also of paths it does not serve
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.requests += 1
                if self.path == "/certs":
                    issuer.fetches += 1
                    body: Any = {k: issuer.keys[k].public_pem for k in sorted(issuer.published)}
                elif self.path == "/jwks":
                    issuer.fetches += 1
                    body = {"keys": [issuer.keys[k].jwk() for k in sorted(issuer.published)]}
                elif self.path == "/.well-known/openid-configuration":
                    issuer.discoveries += 1
                    body = {"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks"}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def token(self, kid: str = "k1", headers: dict[str, Any] | None = None, **claims: Any) -> str:
        """An RS256 token signed with key `kid`; claims default to a valid one of this
        issuer (override `iss`, `aud`, ... to make it invalid; None removes one)."""
        now = int(time.time())
        payload = {"iss": self.url, "sub": "user-1", "iat": now, "exp": now + 600, **claims}
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(
            payload,
            self.keys[kid].private,
            algorithm="RS256",
            headers={"kid": kid, **(headers or {})},
        )

    @staticmethod
    def unsigned(**claims: Any) -> str:
        """`alg: none`: claims with no signature at all."""
        header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": "k1"}).encode())
        return f"{header}.{_b64(json.dumps(claims).encode())}."

    def hs256_with_public_key(self, **claims: Any) -> str:
        """The key-confusion attack: HMAC-signed with the published public key as secret."""
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
        signed = f"{header}.{_b64(json.dumps(claims).encode())}"
        mac = hmac.new(self.keys["k1"].public_pem.encode(), signed.encode(), hashlib.sha256)
        return f"{signed}.{_b64(mac.digest())}"


def serve() -> Iterator[Issuer]:
    issuer = Issuer()
    try:
        yield issuer
    finally:
        issuer.close()
