"""A handler with a required and an optional extension that reports the extensions active for
its turn (its artifact's text: their URIs, sorted, one a line; `none` when there are none)."""

from __future__ import annotations

from shared.agent import Context, Extension

EXTENSIONS = [
    Extension(
        uri="https://example.com/ext/signed/v1", description="Messages are signed", required=True
    ),
    Extension(uri="urn:example:geo:v2", description="Locations", params={"units": "metric"}),
]


def handle(ctx: Context) -> None:
    ctx.artifact(text="\n".join(sorted(ctx.extensions)) or "none")
