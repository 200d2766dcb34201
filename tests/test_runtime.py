"""Running handlers: coalesced commits, visibility of slow turns, cancel, async, misuse."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest

from functions.handlers import echo
from shared.agent import AgentInfo, Context, HandlerModule, TurnEnded
from shared.engine import Engine, Started
from shared.limits import DEFAULT_LIMITS
from shared.model import ArtifactUpdate, Event, Message, Part, Role, Task, TaskState, TaskStatus
from shared.pause import wait_out
from shared.ports import StoredTask, TaskQuery
from shared.requests import CancelRequest, SendRequest
from shared.runtime import Runner, Start, Turn, TurnSettings
from shared.service import A2AService
from shared.service.base import Ports, ServiceSettings
from shared.store.memory import MemoryTaskStore
from shared.turn_queue import TurnQueue
from tests.clock import ManualClock
from tests.handlers import asynchronous, slow


class CountingStore(MemoryTaskStore):
    """The memory store, counting commits (creates included), with the threads that made
    them; `created` is set once a task was created. `meanwhile(current, task)`, when set, is
    called before each commit: what another writer does just before it."""

    def __init__(self) -> None:
        super().__init__()
        self.commits = 0
        self.threads: list[threading.Thread] = []
        self.created = threading.Event()
        self.meanwhile: Callable[[StoredTask, Task], None] | None = None

    def create(self, owner: str, task: Task, events: Sequence[Event], **kwargs: Any) -> StoredTask:
        self.commits += 1
        self.threads.append(threading.current_thread())
        stored = super().create(owner, task, events, **kwargs)
        self.created.set()
        return stored

    def commit(
        self, current: StoredTask, task: Task, events: Sequence[Event], **kwargs: Any
    ) -> StoredTask:
        self.commits += 1
        self.threads.append(threading.current_thread())
        if self.meanwhile is not None:
            self.meanwhile(current, task)
        return super().commit(current, task, events, **kwargs)


def module(handle: Any) -> HandlerModule:
    return HandlerModule(name="test", handle=handle, info=AgentInfo(), skills=())


def request(
    text: str, message_id: str = "m", task_id: str | None = None, blocking: bool = True
) -> SendRequest:
    message = Message(
        message_id=message_id, role=Role.USER, parts=(Part(text=text),), task_id=task_id
    )
    return SendRequest(
        message=message,
        task_id=task_id,
        context_id=None,
        session_id=None,
        create_if_missing=False,
        history_length=None,
        blocking=blocking,
        metadata=None,
    )


class NoQueue:
    """These turns all run in the request: none may go to the worker."""

    def enqueue(self, name: str, payload: dict[str, Any]) -> bool:
        raise AssertionError(f"a blocking send of a short handler queued {name}")

    def close(self) -> None:
        pass


def service(
    handle: Any, store: MemoryTaskStore | None = None, interval: float = 0.25
) -> A2AService:
    store = store or MemoryTaskStore()
    turns = TurnQueue(store, NoQueue(), lease_seconds=30, queue_span=60)
    return A2AService(
        Ports(store, module(handle), turns), ServiceSettings(commit_interval=interval)
    )


def test_a_short_turn_is_one_commit() -> None:
    store = CountingStore()

    def handle(ctx: Context) -> None:
        ctx.progress("thinking")
        ctx.artifact(text="a")
        ctx.artifact(text="b")

    task = wait_out(
        service(handle, store).sending.send("o", request("x"), dialect="1.0", message_results=True)
    )
    assert isinstance(task, Task)
    assert store.commits == 1
    assert [e.seq for e in store.events("o", task.id)] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("handle", [echo.handle, asynchronous.handle])
def test_an_ended_turn_leaves_no_cycle_for_the_collector(handle: Any) -> None:
    # Freed as its send returns: no garbage that only a pass of the collector frees (a turn
    # and its Context holding each other made one a send, ~6% of a short send's CPU).
    sending = service(handle).sending

    def send(n: int) -> None:
        task = wait_out(
            sending.send("o", request(f"{n}", f"m{n}"), dialect="1.0", message_results=True)
        )
        assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED

    send(0)  # the engine's loop and threads, started once
    gc.collect()
    gc.disable()
    try:
        for n in range(1, 4):
            send(n)
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_a_turn_keeps_what_the_handler_handed_over_whatever_it_changes_after() -> None:
    """Models do not copy what they are built with: the turn keeps its own copy of a
    handler's objects, so a dict reused in a loop (or spoiled after) changes nothing."""
    store = CountingStore()
    row: dict[str, Any] = {}
    said: dict[str, Any] = {"n": 0}

    def handle(ctx: Context) -> None:
        for i in range(3):
            row["i"] = i
            ctx.artifact(data=row, metadata=said)
        ctx.progress(parts=[Part(text="t", metadata=said)])
        row["i"] = float("nan")  # what JSON cannot carry, after it was checked
        said["n"] = None

    task = wait_out(
        service(handle, store).sending.send("o", request("x"), dialect="1.0", message_results=True)
    )
    assert isinstance(task, Task)
    assert [a.parts[0].data for a in task.artifacts] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert [a.metadata for a in task.artifacts] == [{"n": 0}] * 3
    assert task.history[-1].parts[0].metadata == {"n": 0}  # the progress message
    stored = store.get("o", task.id)
    assert stored is not None and stored.task == task
    logged = [e.event for e in store.events("o", task.id)]
    assert [e.artifact.parts[0].data for e in logged if hasattr(e, "artifact")] == [
        {"i": 0},
        {"i": 1},
        {"i": 2},
    ]


def started_on_loop(
    store: CountingStore, clock: ManualClock, handle: Any, *, longest_window: float
) -> Started[Task | Message]:
    """A blocking send's turn of a new task "t", not claimed, started on the engine's loop,
    its windows from 50 ms to `longest_window`."""
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.SUBMITTED))
    message = replace(request("x", task_id="t").message, context_id="c")
    settings = TurnSettings(
        window=0.05, commit_interval=longest_window, lease_seconds=30, limits=DEFAULT_LIMITS
    )
    engine = Engine(sync_turns=2)
    runner = Runner(store, module(handle), engine, lambda queued: None, settings, clock)
    turn = Turn(runner, "o", Start(task, None, message, "1.0", allow_message=True))
    return engine.start(turn.run())


def test_a_silent_slow_turn_becomes_visible_and_its_events_are_committed_while_it_works() -> None:
    store = CountingStore()
    clock = ManualClock()
    release, seen = threading.Event(), threading.Event()

    def handle(ctx: Context) -> None:
        release.wait(5)
        ctx.artifact(text="late")
        seen.wait(5)  # until the test found it committed: the handler's call did not commit

    running = started_on_loop(store, clock, handle, longest_window=0.05)
    # The committer may start waiting after any one advance: time goes on until it fired.
    while not store.created.wait(0.01):
        clock.advance(0.05)
    page = store.list("o", TaskQuery())
    assert [s.task.status.state for s in page.tasks] == [TaskState.WORKING]
    [created] = page.tasks
    tail = store.tail("o", "t", created.last_seq)
    clock.advance(0.05)  # the late artifact comes a window after that commit: committed at once
    release.set()
    try:
        logged = tail.next(5)
    finally:
        tail.close()
    assert [type(e.event) for e in logged] == [ArtifactUpdate]
    assert all(t.name.startswith("turn-io") for t in store.threads)  # never the handler's
    seen.set()
    done = wait_out(running.outcome())
    assert isinstance(done, Task) and done.status.state is TaskState.COMPLETED
    assert store.commits == 3  # the window's create, the late artifact, the end


def test_a_silent_turn_is_stored_when_its_longest_window_closes() -> None:
    """A handler awaiting a model says nothing for a while: its task is created when the
    longest window closes, not the first, so one that answers within it is one write."""
    store, clock = CountingStore(), ManualClock()
    release = threading.Event()
    created_at: list[float] = []
    create = store.create

    def timed_create(owner: str, task: Task, events: Sequence[Event], **kwargs: Any) -> StoredTask:
        created_at.append(clock.monotonic())
        return create(owner, task, events, **kwargs)

    store.create = timed_create  # type: ignore[method-assign]

    def handle(ctx: Context) -> None:
        release.wait(5)
        ctx.artifact(text="answer")

    running = started_on_loop(store, clock, handle, longest_window=1.0)
    start = clock.monotonic()
    while not store.created.wait(0.01):  # the committer looks every few ms of real time
        clock.advance(0.05)
    assert created_at[0] - start >= 1.0  # not at the first window's close (0.05 s)
    [stored] = store.list("o", TaskQuery()).tasks
    assert stored.task.status.state is TaskState.WORKING
    release.set()
    done = wait_out(running.outcome())
    assert isinstance(done, Task) and done.status.state is TaskState.COMPLETED
    assert store.commits == 2  # the longest window's create, the end


def test_a_short_turn_is_one_commit_made_by_its_end_not_by_a_window() -> None:
    """A turn that ends within its first window commits once, at its end: its events need
    no commit of their own."""
    store = CountingStore()

    def handle(ctx: Context) -> None:
        for step in range(3):
            ctx.progress(f"step {step}")
        ctx.artifact(text="a")

    task = wait_out(
        service(handle, store, interval=5).sending.send(
            "o", request("x"), dialect="1.0", message_results=True
        )
    )
    assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED
    assert store.commits == 1


def test_cancel_from_another_thread_stops_the_handler() -> None:
    store = CountingStore()
    svc = service(slow.handle, store, interval=0.05)
    result: list[Any] = []
    worker = threading.Thread(
        target=lambda: result.append(
            wait_out(
                svc.sending.send(
                    "o", request("steps=100 delay=0.02"), dialect="1.0", message_results=True
                )
            )
        )
    )
    worker.start()
    assert store.created.wait(5)
    [stored] = svc.ports.store.list("o", TaskQuery()).tasks
    svc.tasks.cancel("o", CancelRequest(stored.task.id))
    worker.join(5)
    assert not worker.is_alive()
    final = result[0]
    assert final.status.state is TaskState.CANCELED
    assert svc.ports.store.get("o", stored.task.id).task.status.state is TaskState.CANCELED  # type: ignore[union-attr]
    assert slow.seen.get(stored.task.id) == "canceled"
    assert not final.artifacts  # what the handler did after the cancel is not recorded


def test_async_handler(make_client: Any) -> None:
    app = make_client(handler="tests.handlers.asynchronous")
    task = app.result(
        "SendMessage",
        {"message": {"role": "ROLE_USER", "parts": [{"text": "hi"}], "messageId": "a"}},
        version="1.0",
    )["task"]
    assert task["artifacts"][0]["parts"] == [{"text": "async: hi"}]


def test_acting_after_the_turn_ended_fails_the_task() -> None:
    def handle(ctx: Context) -> None:
        ctx.complete("done")
        ctx.artifact(text="too late")

    task = wait_out(
        service(handle).sending.send("o", request("x"), dialect="1.0", message_results=True)
    )
    assert isinstance(task, Task)
    assert task.status.state is TaskState.COMPLETED  # the first end stands
    assert not task.artifacts


def test_turn_ended_is_raised_to_the_handler() -> None:
    raised: list[BaseException] = []

    def handle(ctx: Context) -> None:
        ctx.ask("which one?")
        try:
            ctx.progress("more")
        except TurnEnded as exc:
            raised.append(exc)

    task = wait_out(
        service(handle).sending.send("o", request("x"), dialect="1.0", message_results=True)
    )
    assert isinstance(task, Task) and task.status.state is TaskState.INPUT_REQUIRED
    assert raised and "already ended" in str(raised[0])


def test_artifact_needs_exactly_one_content() -> None:
    def handle(ctx: Context) -> None:
        ctx.artifact(text="a", data={"b": 1})

    task = wait_out(
        service(handle).sending.send("o", request("x"), dialect="1.0", message_results=True)
    )
    assert isinstance(task, Task) and task.status.state is TaskState.FAILED


def test_chunked_artifact_is_assembled() -> None:
    def handle(ctx: Context) -> None:
        first = ctx.artifact(text="one ", name="doc")
        ctx.artifact(text="two ", artifact_id=first, append=True)
        ctx.artifact(text="three", artifact_id=first, append=True, last_chunk=True)

    task = wait_out(
        service(handle).sending.send("o", request("x"), dialect="1.0", message_results=True)
    )
    assert isinstance(task, Task)
    [artifact] = task.artifacts
    assert [p.text for p in artifact.parts] == ["one two three"]
    assert artifact.name == "doc"


def test_reply_after_output_becomes_a_completed_task() -> None:
    def handle(ctx: Context) -> None:
        ctx.artifact(text="a")
        ctx.reply("and a message")

    result = wait_out(
        service(handle).sending.send("o", request("x"), dialect="1.0", message_results=True)
    )
    assert isinstance(result, Task)
    assert result.status.state is TaskState.COMPLETED
    assert (
        result.status.message is not None and result.status.message.parts[0].text == "and a message"
    )


@pytest.mark.parametrize("bad", ["functions.handlers.nope", "shared.model"])
def test_bad_handler_module_names_the_setting(bad: str) -> None:
    from shared.agent import HandlerModuleError, load_handler_module

    with pytest.raises(HandlerModuleError, match="A2A_HANDLER"):
        load_handler_module(bad)


def test_a_handler_that_changes_what_it_reads_changes_nothing_stored() -> None:
    """The message, history and artifacts a handler reads are its own copies: changing
    their data (even to what JSON cannot carry) changes neither the task nor its log."""
    store = CountingStore()
    data_request = replace(
        request("x"),
        message=Message(
            message_id="m",
            role=Role.USER,
            parts=(Part(data={"a": [1]}, metadata={"k": "v"}),),
            metadata={"m": {"n": 1}},
        ),
    )

    def handle(ctx: Context) -> None:
        ctx.data[0]["a"].append(float("nan"))
        ctx.message.parts[0].metadata["k"] = {1, 2}  # type: ignore[index]
        ctx.message.metadata["m"]["n"] = 2  # type: ignore[index]
        ctx.history[0].parts[0].data["b"] = 1
        ctx.artifact(text="done")

    task = wait_out(
        service(handle, store).sending.send("o", data_request, dialect="1.0", message_results=True)
    )
    assert isinstance(task, Task)
    assert task.status.state == TaskState.COMPLETED
    [sent] = task.history
    assert (sent.parts[0].data, sent.parts[0].metadata, sent.metadata) == (
        {"a": [1]},
        {"k": "v"},
        {"m": {"n": 1}},
    )
    stored = store.get("o", task.id)
    assert stored is not None and stored.task == task
    [logged] = [e.event for e in store.events("o", task.id) if isinstance(e.event, Message)]
    assert logged == sent


class HeldStore(CountingStore):
    """A CountingStore whose commits after the first wait until the test lets them go on
    (`go`), having set `writing`: a slow store."""

    def __init__(self) -> None:
        super().__init__()
        self.writing, self.go = threading.Event(), threading.Event()

    def commit(
        self, current: StoredTask, task: Task, events: Sequence[Event], **kwargs: Any
    ) -> StoredTask:
        self.writing.set()
        assert self.go.wait(5)
        return super().commit(current, task, events, **kwargs)


def test_the_handler_goes_on_while_its_events_are_written() -> None:
    """The timer writes a commit without the turn's lock: the handler's next events wait
    for the next commit, not for this one."""
    store = HeldStore()
    later = threading.Event()

    def handle(ctx: Context) -> None:
        ctx.progress("one")
        assert store.created.wait(5)  # the timer made the task, with it
        ctx.progress("two")
        assert store.writing.wait(5)  # the timer commits it: the store holds that up
        for step in range(3):
            ctx.progress(f"later {step}")
        later.set()

    svc = service(handle, store, interval=0.01)
    result: list[Task | Message] = []
    running = threading.Thread(
        target=lambda: result.append(
            wait_out(svc.sending.send("o", request("x"), dialect="1.0", message_results=True))
        ),
        daemon=True,
    )
    running.start()
    went_on = later.wait(5)
    store.go.set()
    running.join(5)
    assert went_on  # while "two" was being written
    [task] = result
    assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED
    said = [m.parts[0].text for m in task.history if m.role is Role.AGENT]
    assert said == ["one", "two", "later 0", "later 1", "later 2"]
