"""Unit tests of a handler without a server: one turn run on a recording `Context`.

    from shared.testing import TaskState, run_turn

    import my_agent

    def test_it_echoes() -> None:
        turn = run_turn(my_agent.handle, "hello")
        assert turn.state is TaskState.COMPLETED
        assert turn.artifacts[0].parts[0].text == "hello"

`run_turn` builds the `Context` a handler gets in production (the public one of
`shared.agent`) over a sink that records what the handler asks of it, folds each event into
the task with `shared.lifecycle.apply` (the fold the stores use), and ends the task by the
runtime's rule: a handler that returns without ending the task completes it, a reply
completes it with that message, an exception fails it, a cancel cancels it. What the
handler makes is checked as a turn checks it (`limits.servable`: what JSON cannot carry
fails the task, naming the field; artifacts are held to the default limits), so a test
sees what a client would. An `async def`
handler is awaited. Nothing here needs a store, a queue or a server; nothing of the
library imports this module.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from shared.agent import Context, Message, Part, Role, TaskCanceled
from shared.lifecycle import apply, apply_all
from shared.limits import DEFAULT_LIMITS, ArtifactMeter, LimitExceeded, servable
from shared.model import (
    Artifact,
    ArtifactUpdate,
    Event,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
    new_id,
    status_update,
    utc_now,
)
from shared.ports import StoredTask, TaskPage, TaskQuery

__all__ = ["TaskState", "Turn", "run_turn", "user_message"]

# What a failed turn's status says: the runtime's words, less its log reference.
FAILED_TEXT = "The agent failed while working on this task."


def user_message(text: str | None = None, *, parts: Sequence[Part] = ()) -> Message:
    """A message from the user: `text` as its first part, then `parts`."""
    all_parts = ((Part(text=text),) if text is not None else ()) + tuple(parts)
    if not all_parts:
        raise ValueError("a message needs text or parts")
    return Message(message_id=new_id(), role=Role.USER, parts=all_parts)


@dataclass(frozen=True)
class Turn:
    """What one turn did: the task after it, and everything the handler asked of `ctx`."""

    task: Task
    # What the handler emitted, in order: StatusUpdate (progress, complete, ask, fail, ...)
    # and ArtifactUpdate (artifact); the end the turn added itself is not among them.
    events: tuple[Event, ...]
    # The message of `ctx.reply`, if the handler answered so.
    reply: Message | None = None
    # What the handler raised (the task FAILED), for the test to look at.
    error: BaseException | None = None

    @property
    def state(self) -> TaskState:
        """The task's state after the turn."""
        return self.task.status.state

    @property
    def text(self) -> str:
        """The text of the task's status message (the reply, question or failure), or ""."""
        message = self.task.status.message
        return "" if message is None else "\n".join(p.text for p in message.parts if p.text)

    @property
    def artifacts(self) -> tuple[Artifact, ...]:
        """The task's artifacts after the turn (chunks of one artifact merged)."""
        return self.task.artifacts

    @property
    def statuses(self) -> tuple[StatusUpdate, ...]:
        """The status updates the handler made (progress, and how it ended its turn)."""
        return tuple(e for e in self.events if isinstance(e, StatusUpdate))

    @property
    def artifact_updates(self) -> tuple[ArtifactUpdate, ...]:
        """Each `ctx.artifact` call, as the update it made (chunks apart)."""
        return tuple(e for e in self.events if isinstance(e, ArtifactUpdate))


@dataclass
class _RecordingSink:
    """The Context's sink (emit, reply, canceled, artifact_id), recording in memory."""

    task: Task
    cancel_after: int | None
    events: list[Event] = field(default_factory=list)
    reply_message: Message | None = None
    actions: int = 0
    artifacts: int = 0
    is_canceled: bool = False
    # Artifacts held to the default limits (A2A_MAX_PARTS, A2A_MAX_ARTIFACT_BYTES), as a turn.
    meter: ArtifactMeter = field(default_factory=lambda: ArtifactMeter(DEFAULT_LIMITS))
    # The asyncio task of an async handler: cancelled at its pending await, as deployed.
    running: asyncio.Task[None] | None = None

    def _act(self) -> None:
        if self.is_canceled:
            raise TaskCanceled(self.task.id)
        self.actions += 1
        if self.actions == self.cancel_after:
            self.cancel()

    def cancel(self) -> None:
        """The task is canceled: the handler's next call raises TaskCanceled, and an async
        handler's task is cancelled (CancelledError at its pending await)."""
        self.is_canceled = True
        if self.running is not None:
            self.running.cancel()

    def emit(self, event: Event) -> None:
        self._act()
        if isinstance(event, ArtifactUpdate):
            event, _ = self.meter.add(event, self.task)
        else:
            event, _ = servable(event)
        self.task = apply(self.task, event)
        self.events.append(event)

    def reply(self, message: Message) -> None:
        self._act()
        self.reply_message, _ = servable(message)

    def canceled(self) -> bool:
        return self.is_canceled

    def artifact_id(self) -> str:
        self.artifacts += 1
        return f"artifact-{self.artifacts}"


def run_turn(
    handle: Callable[[Context], Awaitable[None] | None],
    message: str | Message | Sequence[Part],
    *,
    task: Task | None = None,
    context: Sequence[Task] = (),
    extensions: frozenset[str] = frozenset(),
    cancel_after: int | None = None,
) -> Turn:
    """Run `handle` once for `message` (a text, parts, or a Message) and return the turn.

    `task`: the task to continue (the `task` of an earlier turn: its history, then this
    message, is what `ctx.history` holds); a new one by default. `context`: the caller's
    other tasks of this task's context, oldest first (what `ctx.context_history()` reads).
    `extensions`: the extension URIs active for the turn (`ctx.extensions`).
    `cancel_after`: the task is canceled once the handler has made that many calls (emits
    and replies; 0: before it starts): `ctx.canceled` is then True, the next call raises
    TaskCanceled, and an async handler is cancelled at its pending await.
    """
    if isinstance(message, str):
        message = user_message(message)
    elif not isinstance(message, Message):
        message = user_message(parts=message)
    resumed = task is not None
    if task is None:
        context_id = context[-1].context_id if context else new_id()
        task = Task(
            id=new_id(), context_id=context_id, status=TaskStatus(state=TaskState.SUBMITTED)
        )
    message = replace(message, context_id=task.context_id, task_id=task.id)
    # As a turn starts: a new task holds the message, then works; a resumed one works first,
    # which moves the agent's question into history before the answer to it.
    working = status_update(task, TaskState.WORKING)
    started = apply_all(task, (working, message) if resumed else (message, working))
    sink = _RecordingSink(started, cancel_after)
    if cancel_after == 0:
        sink.cancel()
    ctx = Context(
        task_id=started.id,
        context_id=started.context_id,
        message=message,
        history=started.history,
        artifacts=started.artifacts,
        _sink=sink,
        extensions=extensions,
        _list_tasks=_lister(started, context),
    )
    error: BaseException | None = None
    try:
        _run(handle, ctx, sink)
    except (TaskCanceled, asyncio.CancelledError):
        sink.is_canceled = True
    except _OwnLoop:
        raise
    except Exception as raised:
        error = raised
    return Turn(_ended(sink, ctx, error), tuple(sink.events), sink.reply_message, error)


class _OwnLoop(RuntimeError):
    """run_turn was called inside a running event loop: a mistake of the test, not the
    handler's failure."""


def _run(
    handle: Callable[[Context], Awaitable[None] | None], ctx: Context, sink: _RecordingSink
) -> None:
    result = handle(ctx)
    if not inspect.isawaitable(result):
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_awaited(result, sink))
        return
    if inspect.iscoroutine(result):
        result.close()  # never awaited: no "was never awaited" warning on top
    raise _OwnLoop(
        "run_turn runs an async handler on an event loop of its own: call it from a plain "
        "(def, not async def) test"
    )


async def _awaited(awaitable: Awaitable[None], sink: _RecordingSink) -> None:
    async def run() -> None:
        await awaitable

    coroutine: Coroutine[Any, Any, None] = run()
    sink.running = asyncio.create_task(coroutine)
    if sink.canceled():
        sink.running.cancel()
    await sink.running


def _ended(sink: _RecordingSink, ctx: Context, error: BaseException | None) -> Task:
    """The task as the turn leaves it, by the runtime's rule."""
    task = sink.task
    if task.status.state.terminal:
        return task
    if sink.is_canceled:
        return apply(task, status_update(task, TaskState.CANCELED))
    if error is not None:
        # A limit's message is the handler's own: the runtime shows it to the client.
        text = str(error) if isinstance(error, LimitExceeded) else FAILED_TEXT
        return apply(task, status_update(task, TaskState.FAILED, text))
    if sink.reply_message is not None:
        return apply(task, status_update(task, TaskState.COMPLETED, sink.reply_message))
    if ctx.ended is None:
        return apply(task, status_update(task, TaskState.COMPLETED))
    return task


def _lister(task: Task, context: Sequence[Task]) -> Callable[[TaskQuery], TaskPage]:
    """The store's list as `ctx.context_history()` calls it: `context`'s tasks of this
    task's context (and this one), newest first, as the stores answer."""
    now = utc_now()
    stored = [
        StoredTask(
            task=other,
            owner="test",
            version=1,
            last_seq=0,
            dialect="1.0",
            created_at=now - timedelta(seconds=len(context) - index),
            updated_at=now - timedelta(seconds=len(context) - index),
        )
        for index, other in enumerate((*context, task))
        if other.context_id == task.context_id
    ]

    def list_tasks(query: TaskQuery) -> TaskPage:
        found = [s for s in reversed(stored) if s.task.context_id == query.context_id]
        return TaskPage(found[: query.page_size], "", len(found))

    return list_tasks
