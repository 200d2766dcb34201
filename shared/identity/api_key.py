"""A2A_AUTH=api-key: a key in a header (A2A_API_KEY_HEADER), checked against hashes.

A2A_API_KEYS holds `owner:sha256:<hex>` pairs, never the keys themselves, so that the setting
(in a console, a log, a deploy file) gives nobody a key. Keys are long random strings, so one
SHA-256 is enough (no password stretching needed); `python -m shared.identity new-key OWNER`
makes a key and its setting, `hash-key OWNER` hashes a key read from stdin.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping

from shared.identity import MAX_OWNER_LENGTH, AuthenticationError, Headers, Principal

PREFIX = "sha256:"
_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")
# An owner: one printable token (no space, comma or colon), bounded.
_OWNER = re.compile(rf"^[^\s,:\x00-\x1f\x7f]{{1,{MAX_OWNER_LENGTH}}}$")
FORMAT = "owner:sha256:<64 hex digits>"
# Long enough that a hash of it cannot be searched; ours are 43 URL-safe characters.
MIN_KEY_LENGTH = 32
MAX_KEY_LENGTH = 512  # longer is no key of ours; don't hash megabytes for it


def hashed(key: str) -> str:
    """The form A2A_API_KEYS holds a key in: `sha256:<hex>`."""
    return PREFIX + hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return secrets.token_urlsafe(32)


def parse(value: str) -> dict[str, str]:
    """`owner:sha256:<hex>,...` -> {hash: owner}; raises ValueError naming the format, never
    repeating the value (it may be a plaintext key pasted by mistake)."""
    keys: dict[str, str] = {}
    for position, item in enumerate(filter(None, (i.strip() for i in value.split(","))), 1):
        owner, sep, digest = item.partition(":")
        if not sep or not _OWNER.match(owner) or not _HASH.match(digest.lower()):
            raise ValueError(
                f"entry {position} is not {FORMAT}: the setting holds key hashes, never keys; "
                "make one with `python -m shared.identity hash-key OWNER` (key on stdin) or "
                "`python -m shared.identity new-key OWNER`"
            )
        keys[digest.lower()] = owner
    return keys


class ApiKeys:
    def __init__(self, hashes: Mapping[str, str], header: str) -> None:
        self._hashes = dict(hashes)  # sha256:<hex> -> owner
        self.header = header
        self.challenge = f'ApiKey header="{header}"'

    def authenticate(self, header: Headers) -> Principal:
        presented = header(self.header) or ""
        if not presented:
            raise AuthenticationError(
                f"send your API key in the {self.header} header", self.challenge
            )
        digest = hashed(presented[:MAX_KEY_LENGTH]).encode()
        found = None
        for known, owner in self._hashes.items():
            # Every hash compared, in constant time: timing says nothing about any of them.
            if hmac.compare_digest(digest, known.encode()) and len(presented) <= MAX_KEY_LENGTH:
                found = owner
        if found is None:
            raise AuthenticationError(
                f"the key in the {self.header} header is not valid; send a valid API key",
                self.challenge,
            )
        return Principal(found, authenticated=True)
