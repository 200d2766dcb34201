"""ListTasks page tokens shared by every store: an opaque cursor bound to its filters.

A token holds the sort key of the last task of a page (status timestamp, then id, both
descending), how many tasks the pages so far returned (with the total count, a store knows
a page is the last without reading one task ahead), and a fingerprint of the filters it was
issued for, so a token reused with other filters is refused instead of silently skipping.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime

from shared.frozen import frozen
from shared.ports import InvalidPageToken, TaskQuery


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
        stamp, task_id, returned, fingerprint = json.loads(base64.urlsafe_b64decode(padded))
        cursor = Cursor(datetime.fromisoformat(stamp), str(task_id), int(returned))
    except (ValueError, TypeError) as exc:
        raise InvalidPageToken("'params.pageToken' is not a token this server issued") from exc
    if fingerprint != _fingerprint(query):
        raise InvalidPageToken("'params.pageToken' was issued for other filters")
    return cursor
