"""Sending a message: blocking, in the background, or streamed; the one place a message is
stored (joining a task, starting or resuming its turn).

A blocking send runs the handler's turn here (shared.runtime.Turn.ran: a sync handler's on
the request's thread, an async one's on the engine's loop), under a lease of its own (a
reader or the sweep recovers it if the instance dies); `send` is work that pauses
(shared.pause.Waiting), so a wait for the loop holds no thread. A non-blocking send, and
every send to a long-running handler, stores the message with the task `submitted` and a
queued lease, enqueues the turn for the worker and answers; a blocking one then polls the
store, pausing between reads, until the turn ends or its budget does. A turn the work queue
did not take waits in the task's outbox (the client gets `TurnNotQueuedError`, naming the
task): the sweep or the task's next read enqueues it.

A message to a task whose turn is running (`submitted` or `working`) joins its history and
waits (`StoredTask.pending`, at most `MAX_PENDING_MESSAGES`) to be its next turn, unless the
running turn ends the task. Every message is recorded with the write that stores it
(shared.service.resends): a write the store refuses as a resend's (DuplicateMessage) is
answered with the first send's task, or, the client having moved on from it, made again as
a new message, in one loop (`Sending._deduplicated`) for every kind of send.

A send that starts a task in the background is refused while the owner has
A2A_MAX_LIVE_TASKS_PER_OWNER tasks not terminal (`LiveTaskQuotaError`), counted before
anything is written and again in the create's own write (`TaskStore.create(live_limit=)`),
so a burst cannot pass it; a blocking send that ends in the request is not checked. A push
config sent with a message is checked before anything is written, and stored once its task
is the owner's (shared.service.push_configs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from shared import media_types, streaming
from shared.conflicts import retry_on_conflict
from shared.errors import (
    A2AError,
    InvalidParamsError,
    LiveTaskQuotaError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from shared.lifecycle import apply, apply_all
from shared.limits import check_history
from shared.model import Event, Message, Task, TaskState, TaskStatus, new_id, status_update
from shared.pause import Pause, Waiting, ready, wait_out
from shared.ports import DuplicateMessage, MessageKey, StoredTask, TaskExists
from shared.requests import SendRequest
from shared.runtime import Runner, Start, Turn, TurnSettings
from shared.service.base import Ports, ServiceSettings, view
from shared.service.push_configs import PushConfigs
from shared.service.resends import Resends, message_key

T = TypeVar("T")

# A blocking send waiting for the worker reads the task after these many seconds, doubling.
_FIRST_POLL, _MAX_POLL = 0.05, 1.0
# Messages that may wait on one task for its running turn to end: each is a turn to run.
MAX_PENDING_MESSAGES = 10


def _addressed(message: Message, task: Task) -> Message:
    """The client's message as the task records it: with the task's id and context. (Built
    directly: `dataclasses.replace` costs twice as much; tests/test_service.py holds this to
    Message's fields.)"""
    return Message(
        message_id=message.message_id,
        role=message.role,
        parts=message.parts,
        context_id=task.context_id,
        task_id=task.id,
        reference_task_ids=message.reference_task_ids,
        extensions=message.extensions,
        metadata=message.metadata,
    )


class Sending:
    """A message sent: stored, and its turn run here, queued for the worker, or joined."""

    def __init__(
        self, ports: Ports, settings: ServiceSettings, push: PushConfigs, resends: Resends
    ) -> None:
        self._ports = ports
        self._settings = settings
        self._push = push
        self._resends = resends
        self._runner = Runner(
            ports.store,
            ports.handler,
            ports.engine,
            ports.turns.hand_over,
            TurnSettings.of(settings),
            ports.clock,
        )

    def send(
        self, owner: str, request: SendRequest, *, dialect: str, message_results: bool
    ) -> Waiting[Task | Message]:
        """Start or continue a task with the request's message; the task or a direct reply.

        Non-blocking sends and long-running handlers go to the worker through the queue; a
        blocking send then waits on the store for the turn to end (or its budget to run out).
        """
        background = not request.blocking or self._ports.handler.long_running

        def start(key: MessageKey | None) -> Waiting[Task | Message]:
            begun = self._begin(
                owner,
                request,
                key,
                dialect=dialect,
                message_results=message_results,
                background=background,
            )
            if isinstance(begun, Task):
                return begun
            if isinstance(begun, StoredTask):
                queued = (yield from self._wait(begun)) if request.blocking else begun
                return view(queued.task, request.history_length)
            result = yield from begun.ran()
            if isinstance(result, Message):
                return result
            if not result.status.state.final:
                # The turn handed the task over to a message sent meanwhile: wait for that too.
                handed = self._ports.store.get(owner, result.id)
                if handed is not None:
                    result = (yield from self._wait(handed)).task
            return view(result, request.history_length)

        def resent(first: StoredTask) -> Task | Message:
            return self._resends.answer(first, request)

        return (yield from self._deduplicated(owner, request, start, resent))

    def stream(
        self, owner: str, request: SendRequest, *, dialect: str, policy: streaming.StreamPolicy
    ) -> streaming.Stream:
        """A streamed send's frames, holding one of the policy's slots while open."""
        return policy.slots.open(owner, lambda: self._open_stream(owner, request, dialect, policy))

    def _open_stream(
        self, owner: str, request: SendRequest, dialect: str, policy: streaming.StreamPolicy
    ) -> streaming.Stream:
        """The claimed turn the message starts, run here and listened to or, when the message
        only joins a task that is running already (or was sent before), or goes to the worker
        (a long-running handler), that task followed in its log."""

        def begin(key: MessageKey | None) -> Waiting[Turn | StoredTask | Task]:
            return ready(
                self._begin(
                    owner,
                    request,
                    key,
                    dialect=dialect,
                    message_results=False,
                    background=self._ports.handler.long_running,
                    claim=True,
                )
            )

        begun = wait_out(self._deduplicated(owner, request, begin, lambda first: first))
        if isinstance(begun, Turn):
            return streaming.inline(begun, self._ports.engine, self._ports.store, owner, policy)
        task_id = begun.task.id if isinstance(begun, StoredTask) else begun.id
        return self._ports.follow(owner, self._ports.stored(owner, task_id), None, policy)

    def _deduplicated(
        self,
        owner: str,
        request: SendRequest,
        start: Callable[[MessageKey | None], Waiting[T]],
        resent: Callable[[StoredTask], T],
    ) -> Waiting[T]:
        """`start(key)` under the message's key; when the store refuses its write as a
        resend's (DuplicateMessage), `resent(first)` with the task the first send went to,
        or, the client having moved on from that one, `start` again under a key that
        replaces the record: twice at most."""
        media_types.check(self._ports.handler.input_modes, request.message)  # before any write
        key = message_key(request) if self._settings.deduplicate_messages else None
        while True:
            try:
                return (yield from start(key))
            except DuplicateMessage as duplicate:
                answer = self._resends.after_duplicate(owner, key, duplicate.task_id)
                if isinstance(answer, StoredTask):
                    if request.push_config is not None:
                        self._push.resent(owner, request.push_config, answer)
                    return resent(answer)
                key = answer
            except TaskExists:  # a v0.1 client's own id, taken meanwhile (by this owner)
                message = f"task {request.task_id} cannot be created: the id is taken"
                raise TaskNotFoundError(message, field="task_id") from None

    def _begin(
        self,
        owner: str,
        request: SendRequest,
        key: MessageKey | None,
        *,
        dialect: str,
        message_results: bool,
        background: bool,
        claim: bool = False,
    ) -> Turn | StoredTask | Task:
        """The turn the message starts here (claimed if asked, or if it resumes a task), the
        stored task whose turn went to the worker, or the task the message merely joined
        (or, resent, went to before). Raises DuplicateMessage (the store recognised `key`)
        and TaskExists for the caller."""

        # Each lost race (the task was resumed, or can be resumed again, by another message)
        # decides again from the task as it is now.
        def decide() -> Turn | StoredTask | Task:
            try:
                stored = self._target(owner, request)
                if stored is not None:  # before any write: a refused message leaves it as it was
                    check_history(stored, request.message, self._settings.limits)
                elif background:
                    self._check_live(owner)
            except A2AError:
                # The task may have moved on because of this very message (it ended the
                # task): a resend gets its first answer, not the refusal.
                first = self._resends.recorded(owner, key)
                if first is None:
                    raise
                return self._resends.answer(first, request)
            if stored is not None and not stored.task.status.state.interrupted:
                # A turn is running (submitted or working): the message joins the
                # task's history. The running handler does not see it; a second
                # concurrent run of the same task would race the first.
                return self._append_only(stored, request, key)
            task = self._new_task(owner, request, key) if stored is None else stored.task
            push = None
            if request.push_config is not None:
                # Checked now, stored once the task is the owner's (created or read as such):
                # a refused config leaves the task as it was.
                push = request.push_config.for_task(task.id, default_id=new_id())
                self._push.admit(owner, push, count=stored is not None, quota=True)
            # A new task's config hears of every event; a resumed one's of those to come.
            seen = stored.last_seq if stored is not None else 0
            if background:
                queued = self._queue_turn(owner, request, task, stored, dialect=dialect, key=key)
                if push is not None:
                    # Before the worker can commit: its commits are what notify the config.
                    self._push.put(owner, push, dialect, seen)
                self._ports.enqueue(queued)
                return queued
            message = _addressed(request.message, task)
            allow_message = message_results and stored is None
            start = Start(task, stored, message, dialect, key, allow_message=allow_message)
            turn = Turn(self._runner, owner, start)
            # A handler that must not run twice (RERUN_SAFE = False) runs only once its task
            # is stored: a resend of its message is refused by that write, not after a run.
            rerun_safe = self._ports.handler.rerun_safe
            if stored is not None or claim or push is not None or not rerun_safe:
                turn.claim()
            if push is not None:
                # After the claim's commit: the turn's later commits notify the config.
                self._push.put(owner, push, dialect, seen)
            return turn

        return retry_on_conflict(decide, subject=f"task {request.task_id or '(new)'}")

    def _check_live(self, owner: str) -> None:
        """Refuse a task started in the background while the owner has as many live ones as
        it may: one count in the store (a read on Firestore), paid only by the sends that
        store a task to outlive the request, which pay writes and an enqueue already. Sends
        racing it may each pass: the limit is passed by at most the owner's sends in flight."""
        limit = self._settings.max_live_tasks_per_owner
        if self._ports.store.live_tasks(owner, limit) >= limit:
            raise LiveTaskQuotaError(limit)

    def _queue_turn(
        self,
        owner: str,
        request: SendRequest,
        task: Task,
        stored: StoredTask | None,
        *,
        dialect: str,
        key: MessageKey | None,
    ) -> StoredTask:
        """Store the message with the task `submitted` and the turn's lease (the caller then
        stores the push config, if any, and enqueues the turn). Raises VersionConflict when
        the task moved on meanwhile."""
        message = _addressed(request.message, task)
        submitted = status_update(task, TaskState.SUBMITTED)
        store, turns = self._ports.store, self._ports.turns
        events: list[Event]
        if stored is None:
            events = [message, submitted]
            return store.create(
                owner,
                apply_all(task, events),
                events,
                dialect=dialect,
                message_key=key,
                lease=turns.queued_lease(1, message.message_id),
                # Counted in the write itself: a burst of sends cannot pass it together.
                live_limit=self._settings.max_live_tasks_per_owner,
            )
        # As in a resumed Turn: the agent's question moves into history before the answer.
        events = [submitted, message]
        lease = turns.queued_lease(stored.version + 1, message.message_id)
        return store.commit(
            replace(stored, lease=lease), apply_all(task, events), events, message_key=key
        )

    def _wait(self, queued: StoredTask) -> Waiting[StoredTask]:
        """The task once its background turn ended (or paused for input), or as it stands
        when the blocking budget is spent; polls with backoff to keep reads few, pausing
        (holding no thread) between reads."""
        clock = self._ports.clock
        deadline = clock.monotonic() + self._settings.blocking_wait
        pause, current = _FIRST_POLL, queued
        while True:
            left = deadline - clock.monotonic()
            if current.task.status.state.final or left <= 0:
                return current
            yield Pause(min(pause, left))
            pause = min(pause * 2, _MAX_POLL)
            stored = self._ports.store.get(current.owner, current.task.id)
            current = self._ports.settle(stored or current)

    @staticmethod
    def _new_task(owner: str, request: SendRequest, key: MessageKey | None) -> Task:
        # The key's own id makes the task the message's record (shared.ports.MessageKey);
        # a replaced record names a task of a fresh id, as does a send without a key.
        own_id = key.task_id(owner) if key is not None and key.replaces is None else None
        return Task(
            id=request.task_id or own_id or new_id(),
            context_id=request.context_id or request.session_id or new_id(),
            status=TaskStatus(state=TaskState.SUBMITTED),
            metadata=request.metadata,
        )

    def _target(self, owner: str, request: SendRequest) -> StoredTask | None:
        """The task the message continues, None for a new one; refuses what can't go on."""
        if request.task_id is None:
            return None
        stored = self._ports.store.get(owner, request.task_id)
        if stored is None:
            if request.create_if_missing:
                return None
            raise TaskNotFoundError(f"no task {request.task_id}", field="task_id")
        state = stored.task.status.state
        if state.terminal:
            raise UnsupportedOperationError(
                f"task {stored.task.id} is {state.value} and cannot take more messages; send "
                "the message without a taskId (same contextId) to start a follow-up task",
                field="task_id",
            )
        if request.context_id is not None and request.context_id != stored.task.context_id:
            raise InvalidParamsError(
                f"contextId {request.context_id} is not the context of task {stored.task.id} "
                f"({stored.task.context_id})",
                field="context_id",
            )
        return stored

    def _append_only(
        self, stored: StoredTask, request: SendRequest, key: MessageKey | None
    ) -> Task:
        """The message joins the running task's history and waits to be its next turn.
        Raises VersionConflict when the task moved on meanwhile: the caller decides again
        (it may be resumable now)."""
        task = stored.task
        if len(stored.pending) >= MAX_PENDING_MESSAGES:
            raise InvalidParamsError(
                f"task {task.id} already has {len(stored.pending)} messages waiting for its "
                f"running turn, the limit ({MAX_PENDING_MESSAGES}); wait until it stops "
                "working (subscribe to it, or read it with GetTask) and send again, or cancel it",
                field="task_id",
                metadata={"limit": str(MAX_PENDING_MESSAGES)},
            )
        message = _addressed(request.message, task)
        waiting = replace(stored, pending=(*stored.pending, message.message_id))
        new = self._ports.store.commit(waiting, apply(task, message), [message], message_key=key)
        return view(new.task, request.history_length)
