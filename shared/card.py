"""The agent card: built once from the settings and the handler module's declarations.

One document serves every client version, as the official SDK does: the v1.0 fields
(`supportedInterfaces`, ...) beside the v0.3 ones (`url`, `preferredTransport`,
`protocolVersion`, `additionalInterfaces`). It claims only what this deployment does.
Only the URL depends on the request (so it is right behind a proxy); the rest is cached.

It says who may call: the security scheme of the identity mode (A2A_AUTH) and the requirement
to use it, in each version's form. With skills for signed-in callers only (EXTENDED_SKILLS)
and an identity mode, it announces the authenticated extended card, which adds those skills.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from shared import extensions
from shared.agent import Extension, HandlerModule, Skill
from shared.frozen import frozen
from shared.identity import discovery_url
from shared.settings import Settings

if TYPE_CHECKING:  # loaded only when a card signing key is configured
    from shared.card_signing import CardSigner

# The interfaces this deployment serves, most preferred first (the v1.0 card's order). All
# share the base URL: the HTTP+JSON binding's paths (/message:send, /tasks/...) hang off it.
# v0.3's HTTP+JSON paths start with /v1 (shared.bindings.rest_v0_3): its clients add it.
INTERFACES = (("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"), ("HTTP+JSON", "0.3"))
GOOGLE_DISCOVERY = "https://accounts.google.com/.well-known/openid-configuration"


@frozen
class Security:
    """The identity mode's scheme as the card names it, in each version's form."""

    name: str
    v1_0: dict[str, Any]  # the v1.0 oneof: {"apiKeySecurityScheme": {...}}
    v0_3: dict[str, Any]  # OpenAPI style: {"type": "apiKey", ...}
    scopes: list[str]


def security(settings: Settings) -> Security | None:
    """What a caller must send, by mode; None for `none` (nothing to send)."""
    if settings.auth == "api-key":
        header = settings.api_key_header
        text = f"Send your API key in the {header} header."
        return Security(
            "apiKey",
            {"apiKeySecurityScheme": {"location": "header", "name": header, "description": text}},
            {"type": "apiKey", "in": "header", "name": header, "description": text},
            [],
        )
    if settings.auth == "google":
        name, url, scopes = "google", GOOGLE_DISCOVERY, ["openid", "email"]
        text = (
            f"A Google-signed ID token for {' or '.join(settings.google_audiences)} in "
            "Authorization: Bearer "
            "(gcloud auth print-identity-token, or a service account's ID token)."
        )
    elif settings.auth == "oidc":
        assert settings.oidc_issuer  # Settings.from_env checked
        name, url = "oidc", discovery_url(settings.oidc_issuer)
        scopes = list(settings.oidc_required_scopes)
        text = (
            f"An ID token of {settings.oidc_issuer} for audience {settings.oidc_audience} "
            "in Authorization: Bearer."
        )
    else:
        return None
    return Security(
        name,
        {"openIdConnectSecurityScheme": {"openIdConnectUrl": url, "description": text}},
        {"type": "openIdConnect", "openIdConnectUrl": url, "description": text},
        scopes,
    )


def _skill(skill: Skill) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": skill.id,
        "name": skill.name,
        "description": skill.description,
        "tags": list(skill.tags),
    }
    if skill.examples:
        out["examples"] = list(skill.examples)
    if skill.input_modes:
        out["inputModes"] = list(skill.input_modes)
    if skill.output_modes:
        out["outputModes"] = list(skill.output_modes)
    return out


def _extension(extension: Extension) -> dict[str, Any]:
    out: dict[str, Any] = {"uri": extension.uri}
    if extension.description:
        out["description"] = extension.description
    if extension.required:  # a bool without presence: ProtoJSON leaves out false
        out["required"] = True
    if extension.params is not None:
        out["params"] = extension.params
    return out


def card_template(module: HandlerModule, settings: Settings, *, hybrid: bool) -> dict[str, Any]:
    """Everything in the card but its URLs: the hybrid card's (v1.0 and v0.3 members side by
    side), or the strict v1.0 card's."""
    info = module.info
    card: dict[str, Any] = {
        "name": settings.agent_name or info.name,
        "description": settings.agent_description or info.description,
        "version": settings.agent_version or info.version,
        "capabilities": {
            "streaming": settings.streaming,
            "pushNotifications": settings.push_notifications,
        },
        "defaultInputModes": list(info.input_modes or ("text/plain",)),
        "defaultOutputModes": list(info.output_modes),
        "skills": [_skill(s) for s in module.skills],
    }
    offered = (*module.extensions, *extensions.kit(settings.push_notifications))
    if offered:  # the same AgentExtension in v1.0 and v0.3
        card["capabilities"]["extensions"] = [_extension(e) for e in offered]
    if settings.provider_organization:
        card["provider"] = {
            "organization": settings.provider_organization,
            "url": settings.provider_url or "",
        }
    if settings.documentation_url:
        card["documentationUrl"] = settings.documentation_url
    scheme = security(settings)
    if scheme is not None:
        # Hybrid, as the official SDK: each scheme carries both versions' members (a reader
        # takes its own and ignores the other), beside v1.0's and v0.3's requirement lists.
        card["securitySchemes"] = {
            scheme.name: {**scheme.v0_3, **scheme.v1_0} if hybrid else scheme.v1_0
        }
        # A StringList: ProtoJSON writes no scopes as {} (no empty `list`), the form a signed
        # card's verifier canonicalizes (shared.card_signing).
        scopes = {"list": scheme.scopes} if scheme.scopes else {}
        card["securityRequirements"] = [{"schemes": {scheme.name: scopes}}]
        if hybrid:
            card["security"] = [{scheme.name: scheme.scopes}]
        if module.extended_skills:
            card["capabilities"]["extendedAgentCard"] = True
            if hybrid:
                card["supportsAuthenticatedExtendedCard"] = True
    return card


def extended_skills(module: HandlerModule, settings: Settings) -> list[dict[str, Any]] | None:
    """The skills the extended card adds; None when there is no extended card (no such
    skills, or no identity mode to tell signed-in callers apart)."""
    if not module.extended_skills or settings.auth == "none":
        return None
    return [_skill(s) for s in module.extended_skills]


@frozen
class CardDocument:
    """The agent card as served: its bytes and their cache validators."""

    body: bytes
    etag: str
    last_modified: datetime

    def not_modified(self, if_none_match: str | None, if_modified_since: str | None) -> bool:
        """Whether the client's cached copy is current (RFC 9110: ETag wins if sent)."""
        if if_none_match is not None:
            tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
            return "*" in tags or self.etag in tags
        if if_modified_since:
            try:
                since = parsedate_to_datetime(if_modified_since)
            except (TypeError, ValueError):
                return False
            return since.tzinfo is not None and self.last_modified <= since
        return False

    @property
    def last_modified_header(self) -> str:
        return format_datetime(self.last_modified, usegmt=True)


class AgentCard:
    """The card for a given public URL, rendered once per URL and kept."""

    def __init__(
        self,
        templates: dict[bool, dict[str, Any]],
        last_modified: datetime,
        *,
        hybrid: bool = True,
        extended_skills: list[dict[str, Any]] | None = None,
        signer: CardSigner | None = None,
    ) -> None:
        """`templates`: card_template's hybrid (True) and strict v1.0 (False) cards; the public
        card is the `hybrid` one, the extended card follows the version that asks for it.
        With a `signer`, every card is signed once its URLs are known (shared.card_signing)."""
        self._templates = templates
        self._hybrid = hybrid
        self._extended_skills = extended_skills
        self.signer = signer
        # HTTP dates have whole seconds; compare like with like.
        self._last_modified = last_modified.astimezone(UTC).replace(microsecond=0)
        self._rendered: dict[str, CardDocument] = {}
        # Signatures by (URL, extended, hybrid): a card is signed once per URL it is served at.
        self._signatures: dict[tuple[str, bool, bool], dict[str, str]] = {}
        if signer is not None:
            # Once at start-up (and kept, for a local URL), rather than first at a card request:
            # a value of the handler module's that JCS cannot write (an integer past 2**53)
            # stops the start.
            local = "http://localhost/"
            try:
                self._signed(self._card(local, hybrid=hybrid), local, extended=False, hybrid=hybrid)
            except ValueError as exc:
                raise ValueError(
                    f"the agent card cannot be signed (A2A_CARD_SIGNING_KEY): RFC 8785 cannot "
                    f"write one of its values: {exc}"
                ) from None

    @property
    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = self._templates[self._hybrid]["capabilities"]
        return caps

    @property
    def has_extended(self) -> bool:
        return self._extended_skills is not None

    def extended(self, url: str, version: str) -> dict[str, Any]:
        """The authenticated extended card, in the card form of the protocol `version` that
        asks for it (1.0: the strict v1.0 card; 0.x: the hybrid one, which v0.3 reads): the
        public card with the signed-in callers' skills."""
        hybrid = version != "1.0"
        card = self._card(url, hybrid=hybrid)
        card["skills"] = [*card["skills"], *(self._extended_skills or ())]
        return self._signed(card, url, extended=True, hybrid=hybrid)

    def _signed(
        self, card: dict[str, Any], url: str, *, extended: bool, hybrid: bool
    ) -> dict[str, Any]:
        """The card with its signature (none without a signer), computed once per URL."""
        if self.signer is None:
            return card
        key = (url, extended, hybrid)
        signature = self._signatures.get(key)
        if signature is None:
            signature = self.signer.sign(card, url)
            if len(self._signatures) < 64:  # a few hosts at most; don't grow on forged ones
                self._signatures[key] = signature
        return {**card, "signatures": [signature]}

    def _card(self, url: str, *, hybrid: bool) -> dict[str, Any]:
        card = dict(self._templates[hybrid])
        card["supportedInterfaces"] = [
            {"url": url, "protocolBinding": binding, "protocolVersion": version}
            for binding, version in INTERFACES
        ]
        if hybrid:
            # v0.3 readers: the interfaces that speak 0.3.
            card["protocolVersion"] = "0.3.0"
            card["url"] = url
            card["preferredTransport"] = INTERFACES[0][0]
            card["additionalInterfaces"] = [
                {"url": url, "transport": binding}
                for binding, version in INTERFACES
                if version == "0.3"
            ]
        return card

    def document(self, url: str) -> CardDocument:
        found = self._rendered.get(url)
        if found is None:
            card = self._signed(
                self._card(url, hybrid=self._hybrid), url, extended=False, hybrid=self._hybrid
            )
            body = json.dumps(card, separators=(",", ":")).encode()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            found = CardDocument(body, etag, self._last_modified)
            if len(self._rendered) < 16:  # a few hosts at most; don't grow on forged ones
                self._rendered[url] = found
        return found
