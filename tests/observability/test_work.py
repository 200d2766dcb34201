"""shared.observability.work: a unit's latency, in seconds to the microsecond, as a number
(`latencySeconds`) and as Cloud Logging's text (`httpRequest.latency`), the same value."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shared.observability.context import Record, incoming
from shared.observability.work import _finish, http_request


@given(st.floats(min_value=0, max_value=86_400, allow_nan=False))
def test_a_unit_s_latency_is_its_seconds_rounded_to_the_microsecond(seconds: float) -> None:
    record = Record("request", incoming(None))
    record.fields["httpRequest"] = http_request(
        "POST", "/", 200, user_agent=None, forwarded_for=None, remote_addr=None
    )
    _finish(record, seconds, raised=False)
    assert record.fields["latencySeconds"] == round(seconds, 6)
    assert record.fields["httpRequest"]["latency"] == f"{round(seconds, 6):.6f}s"
