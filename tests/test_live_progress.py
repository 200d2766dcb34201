"""Live progress in process: a LONG_RUNNING handler's `ctx.progress` reaches the store's tail
(what every subscriber follows) and GetTask within a window, while the handler still works.

The handler (tests.handlers.live) reports, then waits until the test saw the progress and
lets it go on; nothing here sleeps for a while.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from shared.model import StatusUpdate, TaskState
from shared.ports import TaskStore
from tests.conftest import Client, wait_for_state, wait_until
from tests.handlers import live

OWNER = "anonymous"  # A2A_AUTH=none
LATE = 1.0  # seconds: later than this, the progress did not come while the handler worked


@pytest.fixture
def agent(
    make_client: Callable[..., Client], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Client:
    monkeypatch.setenv("TEST_HANDLER_GATES", str(tmp_path))
    return make_client(handler="tests.handlers.live")


def progress(store: TaskStore, task_id: str, timeout: float) -> str:
    """The handler's progress text, from the task's log as a subscriber follows it."""
    tail = store.tail(OWNER, task_id, 0)
    deadline = time.monotonic() + timeout
    try:
        while (left := deadline - time.monotonic()) > 0:
            for logged in tail.next(left):
                event = logged.event
                message = event.status.message if isinstance(event, StatusUpdate) else None
                if message is not None and message.parts[0].text is not None:
                    return message.parts[0].text
    finally:
        tail.close()
    raise AssertionError(f"no progress of task {task_id} within {timeout} s")


def test_a_background_turns_progress_reaches_the_tail_and_get_task_while_it_works(
    agent: Client,
) -> None:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "go"}]}
    params = {"message": message, "configuration": {"returnImmediately": True}}
    task_id = agent.result("SendMessage", params, version="1.0")["task"]["id"]
    store = agent.app.service.ports.store
    text = progress(store, task_id, LATE)
    assert live.said_at(text) is not None
    task = agent.result("GetTask", {"id": task_id}, version="1.0")
    assert task["status"]["state"] == "TASK_STATE_WORKING"
    assert task["status"]["message"]["parts"] == [{"text": text}]
    assert not task.get("artifacts")  # the handler is still at work
    live.release(task_id)
    wait_for_state(store, OWNER, task_id, TaskState.COMPLETED)
    done = agent.result("GetTask", {"id": task_id}, version="1.0")
    assert [a["parts"] for a in done["artifacts"]] == [[{"text": "done"}]]


def test_a_blocking_sends_progress_reaches_the_tail_and_get_task_while_its_turn_runs_inline(
    make_client: Callable[..., Client], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn run inside the request commits on the stream window too, not on the (here
    long) commit interval: another request sees its progress while the handler works."""
    monkeypatch.setenv("TEST_HANDLER_GATES", str(tmp_path))
    agent = make_client(handler="tests.handlers.live_inline", commit_interval=30)
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "go"}]}
    with ThreadPoolExecutor(1) as pool:
        sent = pool.submit(agent.result, "SendMessage", {"message": message}, version="1.0")
        # The handler names its gate after its task once it runs (another thread's doing,
        # seen on the file system: no event to wait on).
        wait_until(lambda: any(tmp_path.iterdir()), 10, lambda: "the handler did not start")
        task_id = next(tmp_path.iterdir()).name
        store = agent.app.service.ports.store
        text = progress(store, task_id, LATE)
        assert live.said_at(text) is not None
        task = agent.result("GetTask", {"id": task_id}, version="1.0")
        assert task["status"]["state"] == "TASK_STATE_WORKING"
        assert task["status"]["message"]["parts"] == [{"text": text}]
        assert not sent.done()  # the blocking send still waits on its handler
        live.release(task_id)
        done = sent.result(timeout=10)
    assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
