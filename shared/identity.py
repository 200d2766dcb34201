"""Who is calling: one authentication step per request turns credentials into an owner.

The owner scopes every store operation, so another caller's task is simply not found.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass

from shared.settings import Settings

ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class Principal:
    owner: str


class AuthenticationError(Exception):
    """No valid credentials; the message says what to send."""


class Authenticator:
    def __init__(self, settings: Settings) -> None:
        self._mode = settings.auth
        self._keys = settings.api_keys
        self.header = settings.api_key_header

    def authenticate(self, header: Callable[[str], str | None]) -> Principal:
        """The caller, from its request headers (`header(name)` reads one)."""
        if self._mode == "none":
            return Principal(ANONYMOUS)
        presented = header(self.header) or ""
        for key, owner in self._keys.items():
            # Constant-time comparison: response timing must not reveal a key's prefix.
            if presented and hmac.compare_digest(presented.encode(), key.encode()):
                return Principal(owner)
        raise AuthenticationError(f"send a valid API key in the {self.header} header")
