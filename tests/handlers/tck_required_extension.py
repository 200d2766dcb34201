"""The TCK agent with a required extension: the configuration for the TCK's checks that a
message whose request leaves it out is refused (CORE-CAP-004, ExtensionSupportRequiredError).

Every other check sends messages without the A2A-Extensions header, so under this module
they are refused too: run only the extension checks against it (docs/conformance.md).
"""

from __future__ import annotations

from shared.agent import Extension
from tests.handlers.tck import AGENT, SKILLS, handle

__all__ = ["AGENT", "EXTENSIONS", "SKILLS", "handle"]

EXTENSIONS = [
    Extension(
        uri="urn:a2a:tck:required-extension",
        description="The TCK's required extension: activate it to be served.",
        required=True,
    )
]
