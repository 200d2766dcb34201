"""ListTasks page tokens shared by every store: an opaque cursor bound to its filters.

A token holds the sort key of the last task of a page (status timestamp, then id, both
descending), how many tasks the pages so far returned (with the total count, a store knows
a page is the last without reading one task ahead), and a fingerprint of the filters it was
issued for, so a token reused with other filters is refused instead of silently skipping.

A token comes back from the client, so it is read as a body is (shared.json_body: no
NaN or Infinity, nesting and values bounded, no lone surrogate, no repeated key), then held
to its own shape: anything else is an InvalidPageToken naming the field, never an error of
the server's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from shared import json_body as body
from shared.errors import A2AError
from shared.frozen import frozen
from shared.ports import InvalidPageToken, TaskQuery

# More tasks than any owner could have listed (a count past it is no count this server made).
_MAX_RETURNED = 2**53


@frozen
class Cursor:
    timestamp: datetime
    task_id: str
    returned: int  # tasks on this page and the ones before it


def _fingerprint(query: TaskQuery) -> str:
    key = [
        query.context_id,
        query.state.value if query.state else None,
        query.status_after.isoformat() if query.status_after else None,
    ]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:12]


def encode_token(query: TaskQuery, cursor: Cursor) -> str:
    raw = json.dumps(
        [cursor.timestamp.isoformat(), cursor.task_id, cursor.returned, _fingerprint(query)]
    )
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_token(query: TaskQuery) -> Cursor | None:
    """The cursor in `query.page_token`, None for the first page."""
    if not query.page_token:
        return None
    try:
        padded = query.page_token + "=" * (-len(query.page_token) % 4)
        cursor, fingerprint = _cursor(body.parse(base64.urlsafe_b64decode(padded)))
    except (A2AError, ValueError, TypeError, OverflowError, binascii.Error):
        raise InvalidPageToken("'params.pageToken' is not a token this server issued") from None
    if fingerprint != _fingerprint(query):
        raise InvalidPageToken("'params.pageToken' was issued for other filters")
    return cursor


def _cursor(value: Any) -> tuple[Cursor, str]:
    """The cursor and filters' fingerprint of a parsed token; ValueError for any other shape."""
    if not isinstance(value, list) or len(value) != 4:
        raise ValueError("not a token's shape")
    stamp, task_id, returned, fingerprint = value
    if not (isinstance(stamp, str) and isinstance(task_id, str) and isinstance(fingerprint, str)):
        raise ValueError("not a token's shape")
    if type(returned) is not int or not 0 <= returned <= _MAX_RETURNED:
        raise ValueError("not a count of tasks")
    timestamp = datetime.fromisoformat(stamp)
    if timestamp.tzinfo is None:
        raise ValueError("a token's time has its offset")  # a naive one compares with none
    # In UTC, as the stores keep times (an offset at datetime's edge overflows here).
    return Cursor(timestamp.astimezone(UTC), task_id, returned), fingerprint
