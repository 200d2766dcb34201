"""JSON over HTTP for every function's routes: which bodies count as JSON, and JSON answers."""

from __future__ import annotations

from typing import Any

from shared import json_text
from shared.bindings.wire import Answer
from shared.errors import ContentTypeNotSupportedError

JSON = "application/json"
# A2A's registered media type: 1.0.1 asks HTTP+JSON to use it for requests and answers (S1
# §11.1; JSON-RPC keeps application/json, which JSON-RPC over HTTP fixes, S1 §9). Accepted on
# every body, as application/json stays.
A2A_JSON = "application/a2a+json"
JSON_MEDIA_TYPES = frozenset({JSON, A2A_JSON, "application/json-rpc"})
# An answer's (and a stream frame's) JSON text, by an encoder made once (JSONEncoder.encode
# makes one per answer: a quarter of what a small answer's text costs). Without the
# circular-reference bookkeeping: an answer is built by the dialects from the model, whose
# data values came parsed from JSON or checked by model_json (a cycle never gets that far).
encode = json_text.encoder(ensure_ascii=False)


def media_type(content_type: str | None) -> str | None:
    return content_type.split(";", 1)[0].strip().lower() if content_type else None


def content_type_error(content_type: str | None) -> ContentTypeNotSupportedError | None:
    """The error for a body that is declared as something other than JSON (none is JSON)."""
    media = media_type(content_type)
    if media is None or media in JSON_MEDIA_TYPES:
        return None
    return ContentTypeNotSupportedError(
        f"send Content-Type: application/json, not {media}", metadata={"contentType": media}
    )


def json_response(
    payload: Any,
    status: int = 200,
    headers: dict[str, str] | None = None,
    media_type: str = JSON,
) -> Answer:
    fields = {"Content-Type": media_type}
    if headers is not None:
        fields.update(headers)
    return Answer(status, fields, encode(payload).encode())
