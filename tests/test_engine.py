"""shared.engine, through the functions' front: turns that await hold no thread, requests
that run no handler are answered meanwhile, a cancel reaches the await, a sync turn runs on
its request's thread (taken over by the loop past its first window; canceled there too),
sync turns keep to their bound, and a handler that holds the loop is named in the log."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from shared import engine as engine_module
from shared.agent import AgentInfo, HandlerModule, load_handler_module
from shared.app import build
from shared.engine import Engine
from shared.model import Task, TaskState, TaskStatus
from shared.pause import wait_out
from shared.requests import CancelRequest
from shared.service import A2AService
from shared.service.base import Ports, ServiceSettings
from shared.settings import Settings
from shared.store.memory import MemoryTaskStore
from shared.turn_queue import TurnQueue
from tests.clock import ManualClock
from tests.conftest import Client, wait_until
from tests.handlers import waits
from tests.test_runtime import CountingStore, NoQueue, request

THREADS = 4  # the front's pool: far fewer than the turns that wait at once


def send(text: str, message_id: str, *, blocking: bool = True) -> dict[str, Any]:
    return {
        "message": {"role": "ROLE_USER", "parts": [{"text": text}], "messageId": message_id},
        "configuration": {"returnImmediately": not blocking},
    }


def watching(**values: Any) -> HandlerModule:
    return HandlerModule(
        name="watches", handle=waits.watches, info=AgentInfo(), skills=(), **values
    )


@pytest.fixture
def make() -> Iterator[Callable[..., Client]]:
    """A client of an `a2a` app with THREADS threads whose handler is `handle` of
    tests.handlers.waits (or the module given), over `store` (a fresh one by default)."""
    made: list[Client] = []

    def make_one(
        module: HandlerModule | None = None, store: MemoryTaskStore | None = None, **values: Any
    ) -> Client:
        settings = Settings(handler="tests.handlers.waits", threads=THREADS, **values)
        module = module or load_handler_module("tests.handlers.waits")
        client = Client(build(settings, store=store or MemoryTaskStore(), module=module))
        made.append(client)
        return client

    yield make_one
    waits.go.set()  # whatever still waits ends
    for client in made:
        client.http.close()
        client.app.close()


def test_turns_that_await_hold_no_thread_and_other_requests_are_answered_meanwhile(
    make: Callable[..., Client],
) -> None:
    """200 blocking sends wait on their turns at once on a front of 4 threads: were a waiting
    send to hold a thread, at most 4 turns could ever wait together and `everyone` would
    never come. The card and GetTask are answered while they all wait."""
    turns = 200
    waits.reset(turns)
    client = make()
    with ThreadPoolExecutor(turns) as clients:
        answers = [
            clients.submit(client.result, "SendMessage", send("hi", f"m{n}"), version="1.0")
            for n in range(turns)
        ]
        assert waits.everyone.wait(30), f"only {waits.arrived} of {turns} turns waited at once"
        assert client.http.get("/.well-known/agent-card.json").status_code == 200
        # A blocking turn is stored at its first window's close (it may not have come yet).
        listed: list[dict[str, Any]] = []

        def stored() -> bool:
            listed[:] = client.result("ListTasks", {"pageSize": 1}, version="1.0")["tasks"]
            return bool(listed)

        wait_until(stored, 10, lambda: "no task stored while its turn waits")
        [task] = listed
        got = client.result("GetTask", {"id": task["id"]}, version="1.0")
        assert got["status"]["state"] == "TASK_STATE_WORKING"
        waits.go.set()
        done = [answer.result(30)["task"] for answer in answers]
    assert {t["status"]["state"] for t in done} == {"TASK_STATE_COMPLETED"}
    assert all(t["artifacts"][0]["parts"] == [{"text": "answered"}] for t in done)


def test_a_cancel_on_the_instance_running_the_turn_cancels_its_await(
    make: Callable[..., Client],
) -> None:
    waits.reset(1)
    client = make()
    task = client.result("SendMessage", send("hi", "m1", blocking=False), version="1.0")["task"]
    assert waits.everyone.wait(10)
    asked = time.monotonic()
    canceled = client.result("CancelTask", {"id": task["id"]}, version="1.0")
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert waits.any_cancelled.wait(10), "the handler's await was never cancelled"
    # At once: the cancel's own request stops the turn here (the note gives the figure).
    assert waits.cancelled[task["id"]] - asked < 1.0
    assert not waits.go.is_set()


def test_a_cancel_written_by_another_instance_reaches_the_await(
    make: Callable[..., Client],
) -> None:
    """Two instances over one store: the turn runs on the first, the cancel is written by
    the second, and the turn's own look at its task stops it."""
    waits.reset(1)
    store = MemoryTaskStore()
    running, other = make(store=store), make(store=store)
    task = running.result("SendMessage", send("hi", "m1", blocking=False), version="1.0")["task"]
    assert waits.everyone.wait(10)
    asked = time.monotonic()
    other.result("CancelTask", {"id": task["id"]}, version="1.0")
    assert waits.any_cancelled.wait(10), "the turn never saw the cancel"
    assert waits.cancelled[task["id"]] - asked < 3.0  # within a look (0.5 s) and a read
    got = running.result("GetTask", {"id": task["id"]}, version="1.0")
    assert got["status"]["state"] == "TASK_STATE_CANCELED" and not got.get("artifacts")


def test_a_short_sync_turn_never_leaves_its_requests_thread(make: Callable[..., Client]) -> None:
    """The handler runs on the front's thread that took the request, and the turn's one
    commit is made there too: no hand-over to the loop or to a pool."""
    waits.reset(1)
    waits.go.set()
    store = CountingStore()
    task = make(watching(), store).result("SendMessage", send("hi", "m1"), version="1.0")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    ran_on = waits.threads[task["id"]]
    assert ran_on.startswith("a2a") and [t.name for t in store.threads] == [ran_on]


def test_a_sync_turn_past_its_window_is_taken_over_by_the_loop_and_a_cancel_reaches_it(
    make: Callable[..., Client],
) -> None:
    """The handler goes on on its request's thread while the loop commits for it (its task
    is stored, working, at its first window's close); a cancel here reaches it at once."""
    waits.reset(1)
    store = CountingStore()
    client = make(watching(), store)
    with ThreadPoolExecutor(1) as clients:
        answer = clients.submit(client.result, "SendMessage", send("hi", "m1"), version="1.0")
        assert waits.everyone.wait(10)
        assert store.created.wait(10), "the loop never took the turn over"
        [(task_id, ran_on)] = waits.threads.items()
        assert ran_on.startswith("a2a") and [t.name for t in store.threads] == ["turns"]
        got = client.result("GetTask", {"id": task_id}, version="1.0")
        assert got["status"]["state"] == "TASK_STATE_WORKING"
        asked = time.monotonic()
        client.result("CancelTask", {"id": task_id}, version="1.0")
        assert waits.any_cancelled.wait(10), "the handler never saw the cancel"
        assert waits.cancelled[task_id] - asked < 1.0
        done = answer.result(10)["task"]
    assert done["status"]["state"] == "TASK_STATE_CANCELED" and not done.get("artifacts")


def test_a_cancel_here_reaches_a_sync_turn_before_its_first_window_closes() -> None:
    """A turn stored before it runs (its handler must not run twice) on a clock that never
    moves: the loop has nothing due, so only the cancel takes the turn over, and stops it."""
    waits.reset(1)
    store = MemoryTaskStore()
    turns = TurnQueue(store, NoQueue(), lease_seconds=30, queue_span=60)
    ports = Ports(store, watching(rerun_safe=False), turns, clock=ManualClock(), engine=Engine(2))
    service = A2AService(ports, ServiceSettings())
    sent: list[Any] = []
    sender = threading.Thread(
        target=lambda: sent.append(
            wait_out(service.sending.send("o", request("x"), dialect="1.0", message_results=True))
        )
    )
    sender.start()
    try:
        assert waits.everyone.wait(10)
        [task_id] = waits.threads
        service.tasks.cancel("o", CancelRequest(task_id))
        assert waits.any_cancelled.wait(10), "the handler never saw the cancel"
    finally:
        waits.go.set()
        sender.join(10)
    [done] = sent
    assert isinstance(done, Task) and done.status.state is TaskState.CANCELED


def test_sync_turns_keep_to_their_bound(make: Callable[..., Client]) -> None:
    """Sync turns that hold their threads, more of them than the front has threads: the
    card is still answered. At most A2A_SYNC_TURNS run at once (on the requests' threads
    while half of THREADS do at most); the others wait for a slot, holding none of the
    front's threads."""
    module = HandlerModule(name="blocking", handle=waits.blocking, info=AgentInfo(), skills=())
    held = THREADS * 2
    waits.reset(3)
    client = make(module, sync_turns=3)  # two on the front's four threads, one on the pool
    with ThreadPoolExecutor(held) as clients:
        answers = [
            clients.submit(client.result, "SendMessage", send("hi", f"m{n}"), version="1.0")
            for n in range(held)
        ]
        assert waits.everyone.wait(10)
        assert client.http.get("/.well-known/agent-card.json").status_code == 200
        assert waits.arrived == 3
        waits.go.set()
        done = [answer.result(30)["task"] for answer in answers]
    assert {t["status"]["state"] for t in done} == {"TASK_STATE_COMPLETED"}
    assert waits.arrived == held


def test_a_loop_kept_from_the_cpu_by_a_sync_handler_blames_no_async_handler(
    make: Callable[..., Client], caplog: pytest.LogCaptureFixture
) -> None:
    """A sync handler's long computation on a request's thread keeps the interpreter from the
    turns' loop (here for its whole 0.6 s: the interpreter's switch interval set to 1 s),
    though nothing runs on the loop: the log says the loop got no CPU, naming no handler."""
    module = HandlerModule(name="computes", handle=waits.computes, info=AgentInfo(), skills=())
    client = make(module)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        with caplog.at_level(logging.WARNING, logger="a2a.engine"):
            task = client.result("SendMessage", send("hi", "m1"), version="1.0")["task"]
            wait_until(
                lambda: any("with no async handler" in r.getMessage() for r in caplog.records),
                5,
                lambda: f"no late tick logged: {[r.getMessage() for r in caplog.records]}",
            )
    finally:
        sys.setswitchinterval(interval)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    # (An engine of another test in this process, starved too, may log its own line.)
    warnings = [r.getMessage() for r in caplog.records if r.name == "a2a.engine"]
    assert not any(task["id"] in warning for warning in warnings), warnings


def test_a_turn_that_ended_before_the_loop_was_late_is_not_named(
    make: Callable[..., Client], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn that ended before the loop's tick was due cannot be what held the loop past it:
    the late tick names the turns running (one waits meanwhile), not it."""
    clock = ManualClock()  # the engine's `time`: its ticks see what the test says passed
    monkeypatch.setattr(engine_module, "time", clock)
    module = HandlerModule(
        name="waits", handle=waits.waits_unless_quick, info=AgentInfo(), skills=()
    )
    client = make(module)
    waits.reset(1)
    with ThreadPoolExecutor(1) as clients:
        waiting = clients.submit(client.result, "SendMessage", send("wait", "m1"), version="1.0")
        assert waits.everyone.wait(10)  # a turn on the loop: the ticks go on
        quick = client.result("SendMessage", send("quick", "m2"), version="1.0")["task"]
        with caplog.at_level(logging.WARNING, logger="a2a.engine"):
            clock.advance(1.0)  # to the engine, its next tick comes a second late
            wait_until(  # (an engine of another test, idle, would log its loop as late)
                lambda: any("was held" in r.getMessage() for r in caplog.records),
                5,
                lambda: f"no held loop logged: {[r.getMessage() for r in caplog.records]}",
            )
        waits.go.set()
        waited = waiting.result(30)["task"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "a2a.engine"]
    assert any(waited["id"] in warning for warning in warnings), warnings
    assert not any(quick["id"] in warning for warning in warnings), warnings


class Turn:
    """What the engine holds of a turn running on its loop: its task, whether it awaits."""

    def __init__(self, task_id: str, *, awaits: bool) -> None:
        self.task = Task(id=task_id, context_id="c", status=TaskStatus(state=TaskState.WORKING))
        self.awaits = awaits

    def stop_now(self) -> None:
        pass

    def take_over(self, *, now: bool = False) -> bool:
        return False


@pytest.mark.parametrize("awaits", [True, False])
def test_a_late_loop_is_blamed_on_an_async_handler_only_when_one_ran(
    awaits: bool, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync turn the loop took over makes its commits there, its handler running on a thread
    of its own: a late loop is no blocking call of an async handler's then, and the line
    names no turn (it named the sync turn, with the advice to await)."""
    clock = ManualClock()
    monkeypatch.setattr(engine_module, "time", clock)
    engine = Engine(2)
    turn = Turn("t-1", awaits=awaits)
    try:
        with caplog.at_level(logging.WARNING, logger="a2a.engine"):
            ran = threading.Event()

            def run() -> None:  # on the loop, as a turn's start
                engine.running("o", "t-1", turn)
                ran.set()

            engine.loop.call_soon_threadsafe(run)
            assert ran.wait(5)  # its first tick made
            clock.advance(1.0)  # the next, due 0.05 s after it, comes late
            wait_until(
                lambda: any(r.name == "a2a.engine" for r in caplog.records),
                5,
                lambda: "no late tick logged",
            )
    finally:
        engine.loop.call_soon_threadsafe(engine.ended, "o", "t-1", turn)
        engine.close()
    [line] = [r.getMessage() for r in caplog.records if r.name == "a2a.engine"]
    if awaits:
        assert "held" in line and "t-1" in line and "asyncio.to_thread" in line
    else:
        assert "late with no async handler on it" in line and "t-1" not in line


def test_a_handler_that_holds_the_loop_is_named_in_the_log(
    make: Callable[..., Client], caplog: pytest.LogCaptureFixture
) -> None:
    module = HandlerModule(name="holds", handle=waits.holds_the_loop, info=AgentInfo(), skills=())
    client = make(module)
    with caplog.at_level(logging.WARNING, logger="a2a.engine"):
        task = client.result("SendMessage", send("hi", "m1"), version="1.0")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    [warning] = [r.getMessage() for r in caplog.records if r.name == "a2a.engine"]
    assert "held" in warning and "asyncio.to_thread" in warning and task["id"] in warning
