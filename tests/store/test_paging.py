"""ListTasks page tokens (shared.store.paging): what the client sends back is read by the
body's rules and held to the token's shape, so anything at all is a cursor or an
InvalidPageToken naming the field, never another error."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shared.ports import InvalidPageToken, TaskQuery
from shared.store.paging import Cursor, decode_token, encode_token

QUERY = TaskQuery(page_size=10)


def _read(token: str) -> Cursor | None:
    try:
        return decode_token(TaskQuery(page_size=10, page_token=token))
    except InvalidPageToken as refused:
        assert "'params.pageToken'" in str(refused)
        return None


def test_a_token_issued_comes_back_as_its_cursor() -> None:
    cursor = Cursor(datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=UTC), "task-1", 20)
    assert decode_token(TaskQuery(page_size=10, page_token=encode_token(QUERY, cursor))) == cursor


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=20,
)


# Times as a token writes them, with any offset or none, and at datetime's edges.
STAMPS = st.datetimes(timezones=st.none() | st.just(UTC) | st.timezones()).map(datetime.isoformat)
# The filters' fingerprint a token issued for QUERY carries.
_ISSUED = encode_token(QUERY, Cursor(datetime(2026, 1, 1, tzinfo=UTC), "t", 1))
FINGERPRINT = json.loads(base64.urlsafe_b64decode(_ISSUED + "=="))[3]
# A token's four members, each as issued or anything else.
FORGED = st.tuples(
    STAMPS | JSON,
    st.text() | JSON,
    st.integers() | st.sampled_from([float("inf"), float("nan"), 1e300, -1, True]) | JSON,
    st.just(FINGERPRINT) | JSON,
)


@given(FORGED.map(list) | JSON)
def test_any_json_a_client_encodes_is_a_cursor_or_refused(value: Any) -> None:
    raw = json.dumps(value, allow_nan=True).encode()
    cursor = _read(base64.urlsafe_b64encode(raw).decode().rstrip("="))
    if cursor is not None:  # only a time with its offset, a task id, a count: in UTC
        assert cursor.timestamp.utcoffset() == timedelta(0)
        assert type(cursor.returned) is int and cursor.returned >= 0


@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_or_text_are_a_cursor_or_refused(data: bytes) -> None:
    _read(base64.urlsafe_b64encode(data).decode())
    _read(data.decode("utf-8", "replace"))
