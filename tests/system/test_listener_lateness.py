"""A stream on another instance gets each progress step of a long-running turn within a
second, on the `make dev` stack: the short version of tests/system/listener_lateness.py (20
streamed runs; the figure in the issue is its 200)."""

from __future__ import annotations

import pytest

from tests.system import listener_lateness
from tests.system.test_make_dev import free_base

pytestmark = pytest.mark.emulator

RUNS = 20
BOUND = 1.0  # seconds from the handler's step to the stream


def test_each_step_reaches_a_stream_on_another_instance_within_a_second() -> None:
    port = free_base()
    with listener_lateness.dev_stack(port) as stack:
        url = f"http://localhost:{port}/"
        results = listener_lateness.measure(url, RUNS, 4, steps=4, delay=0.25, timeout=30)
        silent = listener_lateness.said(stack, listener_lateness.SILENT_LINE)
    summary = listener_lateness.report(results, silent, BOUND)
    assert [r.error for r in results if r.error] == [], summary
    late = [value for run in results for value in run.late]
    assert len(late) == RUNS * 4, summary
    assert max(late) < BOUND, summary
