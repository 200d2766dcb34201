"""Background turns end to end, on the embedded backend and on the emulator stack alike."""

from __future__ import annotations

import time

import pytest

from tests.conftest import wait_until
from tests.worker.conftest import BUDGET, LEASE, Emulated, Stack

pytestmark = pytest.mark.emulator
WORKING, COMPLETED = "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"


def texts(task: dict[str, object]) -> list[str]:
    return [a["parts"][0]["text"] for a in task.get("artifacts", [])]  # type: ignore[attr-defined]


def test_a_non_blocking_send_answers_at_once_and_the_worker_completes_it(stack: Stack) -> None:
    # The instance's first enqueue opens its Cloud Tasks client (imports, a gRPC channel): a
    # cold start's cost, not the send's. Warm it, then time a send.
    stack.wait_state(stack.send("artifacts=0")["id"], COMPLETED)
    started = time.monotonic()
    task = stack.send("artifacts=3 delay=0.05")
    assert time.monotonic() - started < 1.0
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", WORKING)
    done = stack.wait_state(task["id"], COMPLETED)
    assert texts(done) == ["part 0", "part 1", "part 2"]
    assert [what for _, what in stack.seen(task["id"])] == ["start", "end"]


def test_a_blocking_send_to_a_long_handler_answers_working_at_its_budget(stack: Stack) -> None:
    started = time.monotonic()
    task = stack.send("artifacts=40 delay=0.1", blocking=True)
    elapsed = time.monotonic() - started
    assert task["status"]["state"] == WORKING
    assert BUDGET * 0.9 <= elapsed <= BUDGET + 1.0
    assert texts(task)  # the answer is the task as it stands, progress included
    stack.rpc("CancelTask", {"id": task["id"]})


def test_a_blocking_send_to_a_long_handler_that_ends_in_time_gets_the_result(
    stack: Stack,
) -> None:
    task = stack.send("artifacts=2 delay=0.05", blocking=True)
    assert task["status"]["state"] == COMPLETED
    assert texts(task) == ["part 0", "part 1"]


def test_a_handler_error_fails_the_task_with_a_message_and_no_traceback(stack: Stack) -> None:
    task = stack.send("fail")
    failed = stack.wait_state(task["id"], "TASK_STATE_FAILED")
    text = failed["status"]["message"]["parts"][0]["text"]
    assert "failed while working on this task" in text
    assert "Traceback" not in text and "RuntimeError" not in text


def test_cancel_on_one_instance_stops_the_handler_in_the_worker_within_a_heartbeat(
    stack: Stack,
) -> None:
    task = stack.send("artifacts=100 delay=0.1")
    stack.wait_state(task["id"], WORKING)
    canceled_at = time.time()
    canceled = stack.rpc("CancelTask", {"id": task["id"]}, instance=1)
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    wait_until(
        lambda: any(what == "canceled" for _, what in stack.seen(task["id"])),
        5,
        lambda: str(stack.seen(task["id"])),
    )
    [(seen_at, _)] = [(t, w) for t, w in stack.seen(task["id"]) if w == "canceled"]
    # One heartbeat, plus the handler's step between two looks at ctx.canceled.
    assert seen_at - canceled_at <= LEASE / 3 + 0.1 + 0.3
    stack.settle()  # the canceled turn's queue entry is done: nothing more will run
    assert stack.get(task["id"]) == canceled  # nothing was written after the cancel


def test_a_crashed_run_is_resumed_and_each_artifact_is_stored_once(stack: Stack) -> None:
    if isinstance(stack, Emulated):
        task = stack.send("artifacts=4 delay=0.4")
        stack.wait_for(task["id"], lambda t: len(t.get("artifacts", [])) >= 2)
        stack.crash_worker()
    else:  # one process: the handler's first run dies as a killed process would
        task = stack.send("artifacts=4 delay=0.1 crash")
    done = stack.wait_state(task["id"], COMPLETED, timeout=30)
    assert texts(done) == ["part 0", "part 1", "part 2", "part 3"]
    assert len({a["artifactId"] for a in done["artifacts"]}) == 4
    assert [what for _, what in stack.seen(task["id"])] == ["start", "start", "end"]


def test_a_resent_request_does_not_start_the_work_twice(stack: Stack) -> None:
    first = stack.send("artifacts=3 delay=0.1", message_id=f"resent-{stack.name}-{time.time()}")
    again = stack.send("artifacts=3 delay=0.1", message_id=first["history"][0]["messageId"])
    assert again["id"] == first["id"]
    stack.wait_state(first["id"], COMPLETED)
    stack.settle()  # every queued turn ran: a second one would have started by now
    assert [what for _, what in stack.seen(first["id"])] == ["start", "end"]
