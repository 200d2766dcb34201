"""The agent card: built once from the settings and the handler module's declarations.

One document serves every client version, as the official SDK does: the v1.0 fields
(`supportedInterfaces`, ...) beside the v0.3 ones (`url`, `preferredTransport`,
`protocolVersion`, `additionalInterfaces`). It claims only what this deployment does.
Only the URL depends on the request (so it is right behind a proxy); the rest is cached.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

from shared.agent import HandlerModule, Skill
from shared.settings import Settings

# The interfaces this deployment serves, most preferred first (the v1.0 card's order). All
# share the base URL: the HTTP+JSON binding's paths (/message:send, /tasks/...) hang off it.
INTERFACES = (("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"))


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


def card_template(module: HandlerModule, settings: Settings) -> dict[str, Any]:
    """Everything in the card but its URLs."""
    info = module.info
    card: dict[str, Any] = {
        "name": settings.agent_name or info.name,
        "description": settings.agent_description or info.description,
        "version": settings.agent_version or info.version,
        "capabilities": {"streaming": True, "pushNotifications": settings.push_notifications},
        "defaultInputModes": list(info.input_modes),
        "defaultOutputModes": list(info.output_modes),
        "skills": [_skill(s) for s in module.skills],
    }
    if settings.provider_organization:
        card["provider"] = {
            "organization": settings.provider_organization,
            "url": settings.provider_url or "",
        }
    if settings.documentation_url:
        card["documentationUrl"] = settings.documentation_url
    if settings.auth == "api-key":
        header = settings.api_key_header
        card["securitySchemes"] = {
            "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": header}}
        }
        card["securityRequirements"] = [{"schemes": {"apiKey": {"list": []}}}]
    return card


@dataclass(frozen=True)
class CardDocument:
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
        self, template: dict[str, Any], last_modified: datetime, *, hybrid: bool = True
    ) -> None:
        self._template = template
        self._hybrid = hybrid
        # HTTP dates have whole seconds; compare like with like.
        self._last_modified = last_modified.astimezone(UTC).replace(microsecond=0)
        self._rendered: dict[str, CardDocument] = {}

    @property
    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = self._template["capabilities"]
        return caps

    def document(self, url: str) -> CardDocument:
        found = self._rendered.get(url)
        if found is None:
            card = dict(self._template)
            card["supportedInterfaces"] = [
                {"url": url, "protocolBinding": binding, "protocolVersion": version}
                for binding, version in INTERFACES
            ]
            if self._hybrid:
                # v0.3 readers: the interfaces that speak 0.3. HTTP+JSON is served in its 1.0
                # form only (no /v1 paths), so a v0.3 reader is not pointed at it.
                card["protocolVersion"] = "0.3.0"
                card["url"] = url
                card["preferredTransport"] = INTERFACES[0][0]
                card["additionalInterfaces"] = [{"url": url, "transport": "JSONRPC"}]
            body = json.dumps(card, separators=(",", ":")).encode()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            found = CardDocument(body, etag, self._last_modified)
            if len(self._rendered) < 16:  # a few hosts at most; don't grow on forged ones
                self._rendered[url] = found
        return found
