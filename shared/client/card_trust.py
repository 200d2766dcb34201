"""`a2a card get --verify`: the card's signatures (A2A 1.0 section 8.4) checked against keys
the caller has a reason to trust, and nothing else.

A signature's key comes from its protected header: a `jku` is fetched only when it is on the
origin the card came from (a JWKS anyone else serves vouches for nothing, and the request
carries the caller's credentials); an embedded `jwk` is used only when the caller pinned it,
by its RFC 7638 thumbprint (`--trust-key`) or in a JWKS file (`--trust-jwks`): a key a card
carries itself proves only that whoever wrote the card holds it, so a card calling itself
"Payments agent (official)" signed by its own embedded key does not verify. The check of
each signature is `shared.card_signing.check`'s.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shared import card_signing
from shared.client.errors import SIGNATURE_UNVERIFIED, USAGE, ClientError
from shared.client.session import Session
from shared.client.shapes import mapping, objects
from shared.client.transport import origin

MAX_JWKS_FILE_BYTES = 1024 * 1024
# RFC 7638: the members a key type's thumbprint hashes.
_THUMBPRINT_MEMBERS = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n")}
_THUMBPRINT_MEMBERS["OKP"] = ("crv", "kty", "x")


def thumbprint(jwk: Mapping[str, Any]) -> str | None:
    """The key's RFC 7638 SHA-256 thumbprint (base64url), None for a key it cannot hash."""
    members = _THUMBPRINT_MEMBERS.get(str(jwk.get("kty")))
    if members is None or not all(isinstance(jwk.get(m), str) for m in members):
        return None
    canonical = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def load_jwks(path: Path) -> dict[str, Any]:
    """A JWKS file the caller trusts (`--trust-jwks`)."""
    try:
        with path.open("rb") as file:
            text = file.read(MAX_JWKS_FILE_BYTES + 1)
        jwks = json.loads(text) if len(text) <= MAX_JWKS_FILE_BYTES else None
    except (OSError, ValueError) as exc:
        raise ClientError(f"--trust-jwks {path}: {exc}", error=USAGE) from None
    if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
        raise ClientError(f"--trust-jwks {path} is not a JWKS (no `keys` list)", error=USAGE)
    return jwks


def verify(
    session: Session, pinned: frozenset[str], jwks: dict[str, Any] | None
) -> list[dict[str, Any]] | None:
    """Each signature's `kid` and where its key came from, once every signature verifies;
    None when the card carries none (signing is optional: an absent signature is reported,
    not a failure). ClientError (SIGNATURE_UNVERIFIED) naming each one that does not."""
    card = session.card
    if not card.get("signatures"):
        return None
    card_origin = session.source.origin
    trusted = {
        print_: key for key in objects(mapping(jwks).get("keys")) if (print_ := thumbprint(key))
    }
    fetched: dict[str, dict[str, Any]] = {}
    keys: list[dict[str, Any]] = []

    def find_key(header: dict[str, Any]) -> Any:
        kid = header.get("kid")
        jku = header.get("jku")
        if isinstance(jku, str):
            if card_origin is None or origin(jku) != card_origin:
                raise card_signing.SignatureProblem(
                    f"its jku {jku} is not on the origin the card came from "
                    f"({card_origin or 'a local file'}): not fetched"
                )
            if jku not in fetched:
                fetched[jku] = session.transport.get_json(jku, session.version)
            keys.append({"kid": kid, "key": jku})
            return card_signing.jwks_key(fetched[jku], header)
        jwk = header.get("jwk")
        if isinstance(jwk, dict):
            print_ = thumbprint(jwk)
            if print_ is not None and (print_ in pinned or print_ in trusted):
                keys.append({"kid": kid, "key": f"embedded jwk {print_} (pinned)"})
                return jwk
            raise card_signing.SignatureProblem(
                f"it is signed by the key it carries itself (thumbprint {print_}), which "
                "vouches for nothing: trust it only if you know it is the agent's key "
                f"(--trust-key={print_}: a thumbprint may start with '-', so with '=')"
            )
        if trusted:
            key = card_signing.jwks_key({"keys": list(trusted.values())}, header)
            keys.append({"kid": kid, "key": "--trust-jwks"})
            return key
        raise card_signing.SignatureProblem("its header names no key: no jku, no jwk")

    problems = card_signing.check(card, find_key)
    if problems:
        raise ClientError(
            "the card's signatures do not verify: " + "; ".join(problems),
            error=SIGNATURE_UNVERIFIED,
            hint="a signature verifies with the JWKS of the card's own origin (its jku), or "
            "a key you pinned: --trust-key=THUMBPRINT, --trust-jwks FILE",
        )
    return keys
