"""Structured output: when a text part asks for JSON with a schema, answer data in its shape.

The client puts `{"mimeType": "application/json", "schema": {...}}` in the part's metadata
(seed 000, "Structured Output"); the agent answers with a data artifact shaped by the
schema, plus the same JSON as text for clients that only read text.
"""

from __future__ import annotations

import json
from typing import Any

from shared.agent import AgentInfo, Context, Skill

AGENT = AgentInfo(
    name="IT tickets agent",
    description="Lists your open IT tickets, as text or as JSON in the schema you give.",
    output_modes=("text/plain", "application/json"),
)

SKILLS = [
    Skill(
        id="structured-output",
        name="Structured output",
        description="Answers with JSON data following the JSON schema in the request.",
        tags=("json", "structured-output"),
        examples=("Show me a list of my open IT tickets",),
        output_modes=("application/json",),
    )
]

_TICKETS = [
    {"ticketNumber": "REQ12312", "description": "request for VPN access"},
    {"ticketNumber": "REQ23422", "description": "Add to DL - team-gcp-onboarding"},
]


def requested_schema(ctx: Context) -> dict[str, Any] | None:
    for part in ctx.parts:
        meta = part.metadata or {}
        if meta.get("mimeType") == "application/json" and isinstance(meta.get("schema"), dict):
            schema: dict[str, Any] = meta["schema"]
            return schema
    return None


def shape(value: Any, schema: dict[str, Any]) -> Any:
    """`value` cut to what `schema` declares (arrays of objects keep declared properties)."""
    kind = schema.get("type")
    if kind == "array" and isinstance(value, list):
        items = schema.get("items", {})
        return [shape(v, items) for v in value]
    if kind == "object" and isinstance(value, dict) and "properties" in schema:
        properties: dict[str, Any] = schema["properties"]
        return {k: shape(value[k], properties[k]) for k in properties if k in value}
    return value


def handle(ctx: Context) -> None:
    schema = requested_schema(ctx)
    data: Any = shape(_TICKETS, schema) if schema else _TICKETS
    if schema and schema.get("type") == "object":
        data = {"tickets": data}
    ctx.artifact(data=data, name="tickets", media_type="application/json")
    ctx.complete(json.dumps(data, separators=(",", ":")))
