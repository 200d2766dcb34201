"""shared.observability.work: a unit's latency, in seconds to the microsecond, as a number
(`latencySeconds`) and as Cloud Logging's text (`httpRequest.latency`), the same value; a
unit kept open past its block (a stream's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.observability.context import Record, current, incoming, note
from shared.observability.work import _finish, http_request, unit
from tests.observability.conftest import Lines


@given(st.floats(min_value=0, max_value=86_400, allow_nan=False))
def test_a_unit_s_latency_is_its_seconds_rounded_to_the_microsecond(seconds: float) -> None:
    record = Record("request", incoming(None))
    record.fields["httpRequest"] = http_request(
        "POST", "/", 200, user_agent=None, forwarded_for=None, remote_addr=None
    )
    _finish(record, seconds, raised=False)
    assert record.fields["latencySeconds"] == round(seconds, 6)
    assert record.fields["httpRequest"]["latency"] == f"{round(seconds, 6):.6f}s"


def test_a_kept_unit_s_chunks_run_in_it_and_its_line_says_how_the_stream_ended(
    lines: Lines,
) -> None:
    def chunks(fail: bool) -> Iterator[bytes]:
        note(frames=1)  # on the thread making the chunks, in the request's unit
        yield b"one"
        if fail:
            raise RuntimeError("the stream broke")
        yield b"two"

    for ending in ("ended", "disconnected", "failed"):
        opened = unit("request")
        with opened:
            kept = opened.keep()
        assert current() is None
        made = kept.within(chunks(fail=ending == "failed"))
        assert next(made) == b"one"
        if ending == "ended":
            assert list(made) == [b"two"]
        elif ending == "failed":
            with pytest.raises(RuntimeError):
                next(made)
        kept.end()
    got = [(x["outcome"], x["severity"], x["frames"]) for x in lines.of("request")]
    assert got == [("ended", "INFO", 1), ("disconnected", "INFO", 1), ("failed", "ERROR", 1)]
