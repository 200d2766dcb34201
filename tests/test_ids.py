"""The one id rule (shared.ids): what passes, what is refused and how, on the wire and in
both stores."""

from __future__ import annotations

import uuid

_TEXT_IDS = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")


def text_id(text: str) -> str:
    """A message id for a test's message text: the same text, the same id, by the rule."""
    return str(uuid.uuid5(_TEXT_IDS, text))


# The ids of issue 12 that broke the Firestore backend or grew the embedded one, and their
# kin: each refused, on the wire and by both stores.
HOSTILE_IDS = [
    "",
    ".",
    "..",
    "/",
    "a/b",
    "__x__/y",
    "../../etc/passwd",
    "task-1/pushConfigs/x",
    "x" * 2000,
    "x" * 129,
    "a b",
    "tab\there",
    "new\nline",
    "nul\x00",
    "\ud800",
    "caf\u00e9",
    "%2F",
    "a\\b",
    "<script>",
]
