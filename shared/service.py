"""The A2A operations on canonical types, for one caller (the owner).

Send (blocking, background or streamed), get, list, cancel, subscribe, push config CRUD and
the seeds' message listing, each taking its request from shared.requests, for one owner:
another owner's tasks and push configs answer exactly as missing ones do. Nothing here knows
a wire format: the wire codecs (the operation table) decode calls into those requests and
encode what comes back. An error names the request attribute at fault (`task_id`,
`push_config.url`); the codec that decoded the request puts the caller's wire field there.

A blocking send runs the handler in the request, under a lease of its own (a reader or the
sweep recovers the turn if the instance dies). A non-blocking one, and every send to a
long-running handler, stores the message with the task `submitted` and a queued lease,
enqueues the turn for the worker (shared.worker) and answers; a blocking send then waits on
the store until the turn ends or its budget does. When the work queue does not take the
turn, the turn waits in the task's outbox and the client gets `TurnNotQueuedError`, naming
the task: the sweep or the task's next read enqueues it.

A message to a task whose turn is running (`submitted` or `working`) joins its history and
waits (`StoredTask.pending`, at most `max_pending`): it is the task's next turn when the
running one ends, unless that turn ends the task (failed, rejected, canceled).

A resent message (same owner, messageId and content: `message_key`) gets the task its first
send went to, unchanged; the same messageId with other content is a new message, and so is
the same message once the client has moved on in its task (spoke again there, or canceled
it: it had the answer, so this is no retry). Nothing is read to find out: a message that
starts a task gives it an id derived from its key (`MessageKey.task_id`), and every message is
recorded in the write that stores it, so the store refuses a resend's write
(DuplicateMessage, naming the first task); only then is that task read. A resend that starts
a task is so recognised after its handler ran (that run's output is dropped), and one the
client moved on from runs again as a new message. A message the task now refuses (ended
since) is looked up before it is refused.

A push config sent with a message is checked (URL, the per-task limit) before anything is
written, and stored only once its task is the owner's: created by this send, or read as the
owner's before it is continued. The store counts again as it writes (atomically): a config
that lost the last place to a concurrent request between the two is refused with the same
error, after the message was stored.
"""

from __future__ import annotations

import builtins
import hashlib
import threading
from collections.abc import Callable
from dataclasses import replace

from shared import json_text, model_json, streaming
from shared.agent import HandlerModule
from shared.clock import SYSTEM, Clock
from shared.conflicts import retry_on_conflict
from shared.errors import (
    A2AError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from shared.lifecycle import apply, apply_all
from shared.limits import DEFAULT_LIMITS, Limits, check_history
from shared.model import (
    Event,
    Message,
    PushConfig,
    Role,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
    new_id,
)
from shared.ports import (
    DuplicateMessage,
    InvalidPageToken,
    MessageKey,
    PushConfigStore,
    StoredPushConfig,
    StoredTask,
    TaskExists,
    TaskPage,
    TaskQuery,
    TaskQueue,
    TaskStore,
    TooManyPushConfigs,
)
from shared.push_url import PushURLRefused
from shared.requests import (
    CancelRequest,
    DeletePushConfigRequest,
    GetPushConfigRequest,
    ListPushConfigsRequest,
    ListTasksRequest,
    MessagesRequest,
    SendRequest,
    SetPushConfigRequest,
    SubscribeRequest,
    TaskSelector,
)
from shared.runtime import Turn
from shared.settings import ENVIRONMENT
from shared.worker import QueueUnavailable, TurnQueue

# A blocking send waiting for the worker reads the task after these many seconds, doubling.
_FIRST_POLL, _MAX_POLL = 0.05, 1.0
# Messages that may wait on one task for its running turn to end: each is a turn to run.
MAX_PENDING_MESSAGES = 10


class TurnNotQueuedError(A2AError):
    """The task is stored but the work queue did not take its turn (an outage longer than
    the enqueue's retries): retryable, and the task id says which task to read."""

    code = -32000  # JSON-RPC's server-error range: not one of A2A's
    default_message = "The task is stored, but its work is not queued yet"
    reason = "UNAVAILABLE"
    http_status = 503
    grpc_status = "UNAVAILABLE"


def view(task: Task, history_length: int | None, *, artifacts: bool = True) -> Task:
    """The task as a reader asked for it: the last `history_length` messages (None: all)."""
    history = task.history
    if history_length is not None and len(history) > history_length:
        history = history[len(history) - history_length :]
    if history is task.history and (artifacts or not task.artifacts):
        return task
    return replace(task, history=history, artifacts=task.artifacts if artifacts else ())


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


# message_key's canonical text: keys sorted, compact, ASCII, NaN as NaN, as json.dumps wrote it
# for every digest stored since (a task id derives from one).
_canonical = json_text.encoder(sort_keys=True)


def message_key(request: SendRequest) -> MessageKey:
    """The sent message as de-duplication knows it: its messageId and a SHA-256 of its
    content and address (role, parts, metadata, references, extensions, taskId, contextId)
    and of the push config sent with it.

    Read from the canonical request, so one message sent in any dialect has one digest; the
    cost is one pass over a message `limits.py` bounded already. A server-side id is no part
    of it: a resend names the same task and context as the first send did.
    """
    message = request.message
    push = request.push_config
    content = {
        "role": message.role.value,
        "parts": [model_json.to_dict(part) for part in message.parts],
        # Absent and empty say the same: dialects differ in which one they decode to.
        "metadata": message.metadata or {},
        "referenceTaskIds": list(message.reference_task_ids),
        "extensions": list(message.extensions),
        "taskId": request.task_id,
        "contextId": request.context_id or request.session_id,
        "push": None
        if push is None
        else {
            "id": push.id,
            "url": push.url,
            "token": push.token,
            "authentication": push.authentication
            and {
                "schemes": list(push.authentication.schemes),
                "credentials": push.authentication.credentials,
            },
        },
    }
    canonical = _canonical(content)
    return MessageKey(message.message_id, hashlib.sha256(canonical.encode()).hexdigest())


def _answers(task: Task, message_id: str) -> bool:
    """Whether the task answers a resend of this message: the message is in its history and
    the client has not acted in the task since (spoken again there, or canceled it). It had
    the first send's answer then, so a send of the same key is no retry but a client reusing
    its messageId (the A2A TCK does): a new message. (Not in its history: a task the client
    made under the key's own id itself, v0.1's create-if-missing, is no send of it.)"""
    if task.status.state is TaskState.CANCELED:
        return False
    sent = False
    for message in task.history:
        if message.role is Role.USER:
            if message.message_id == message_id:
                sent = True
            elif sent:
                return False
    return sent


def _ended(stored: StoredTask) -> streaming.Stream:
    """A finished task's stream: the task as it ended, and nothing after."""
    yield streaming.Frame(stored.last_seq, stored.task, stored.task)


class A2AService:
    def __init__(
        self,
        store: TaskStore,
        handler: HandlerModule,
        *,
        turns: TurnQueue,
        commit_interval: float = 0.25,
        lease_seconds: float = 30.0,
        deduplicate: bool = True,
        push_configs: PushConfigStore | None = None,
        check_push_url: Callable[[str], None] | None = None,
        blocking_wait: float = 270.0,
        max_push_configs: int = 10,
        max_pending: int = MAX_PENDING_MESSAGES,
        limits: Limits = DEFAULT_LIMITS,
        clock: Clock = SYSTEM,
    ) -> None:
        """`turns` takes background turns to the worker (Cloud Tasks, or in process on the
        embedded backend: shared.app wires it) and recovers those whose owner vanished.
        `lease_seconds`: how long an inline turn's silence takes to be noticed (it renews its
        lease a few times within). `blocking_wait`: how long a blocking send
        waits for a background turn before it answers the task as it stands.
        `max_push_configs`: how many push configs one task may have (each event of the task
        is one POST per config)."""
        self.store = store
        self.handler = handler
        self._commit_interval = commit_interval
        self._deduplicate = deduplicate
        # Push notifications are offered only with a store for their configs.
        self.push_configs = push_configs
        self._check_push_url = check_push_url or (lambda url: None)
        self._blocking_wait = blocking_wait
        self._max_push_configs = max_push_configs
        self.turns = turns
        self.queue: TaskQueue | None = turns.queue  # the worker's (in process when embedded)
        self._lease_seconds = lease_seconds
        self._max_pending = max_pending
        self._clock = clock
        self.limits = limits  # what one message and a task's history may hold

    # -- send ------------------------------------------------------------------------------

    def send(
        self, owner: str, request: SendRequest, *, dialect: str, message_results: bool
    ) -> Task | Message:
        """Start or continue a task with the request's message; the task or a direct reply.

        Non-blocking sends and long-running handlers go to the worker through the queue; a
        blocking send then waits on the store for the turn to end (or its budget to run out).
        """
        key = message_key(request) if self._deduplicate else None
        while True:  # twice at most: the second time a new message under a replaced record
            try:
                begun = self._begin(
                    owner,
                    request,
                    key,
                    dialect=dialect,
                    message_results=message_results,
                    background=not request.blocking or self.handler.long_running,
                )
                if isinstance(begun, Task):
                    return begun
                if isinstance(begun, StoredTask):
                    queued = self._wait(begun) if request.blocking else begun
                    return view(queued.task, request.history_length)
                result = begun.run()
                break
            except DuplicateMessage as duplicate:
                answer = self._after_duplicate(owner, key, duplicate.task_id)
                if isinstance(answer, StoredTask):
                    return self._resent(answer, request)
                key = answer
            except TaskExists:
                raise self._taken(request) from None
        if isinstance(result, Message):
            return result
        if not result.status.state.final:
            # The turn handed the task over to a message sent meanwhile: wait for that too.
            handed = self.store.get(owner, result.id)
            if handed is not None:
                result = self._wait(handed).task
        return view(result, request.history_length)

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
        key = message_key(request) if self._deduplicate else None
        while True:  # twice at most, as in `send`
            try:
                begun = self._begin(
                    owner,
                    request,
                    key,
                    dialect=dialect,
                    message_results=False,
                    background=self.handler.long_running,
                    claim=True,
                )
            except DuplicateMessage as duplicate:
                answer = self._after_duplicate(owner, key, duplicate.task_id)
                if isinstance(answer, MessageKey):
                    key = answer
                    continue
                task_id = answer.task.id
            except TaskExists:
                raise self._taken(request) from None
            else:
                if isinstance(begun, Turn):
                    return streaming.inline(begun, self.store, owner, policy)
                task_id = begun.task.id if isinstance(begun, StoredTask) else begun.id
            break
        joined = self._stored(owner, task_id)
        followed = streaming.follow(self.store, owner, joined, None, policy)
        return self._recovering(owner, task_id, followed)

    def subscribe(
        self,
        owner: str,
        request: SubscribeRequest,
        policy: streaming.StreamPolicy,
        *,
        final_frame: bool = False,
    ) -> tuple[StoredTask, streaming.Stream]:
        """The task a subscriber follows and its frames (after `after_seq`, when it resumes
        a stream), holding one of the policy's slots while open.

        A terminal task has nothing more to say, unless a resumed stream missed its end: A2A's
        resubscribe is refused (the spec's error); with `final_frame` (the seeds' `GET /sse`,
        whose clients send, then listen) its one frame is the task as it ended."""
        stored = self._stored(owner, request.task_id)
        state = stored.task.status.state
        after_seq = request.after_seq
        if after_seq is not None and after_seq > stored.last_seq:
            # Every frame's event is committed before it is sent: no stream sent this id.
            raise InvalidParamsError(
                f"Last-Event-ID {after_seq} is past the last event of task {request.task_id} "
                f"({stored.last_seq}); resume from the id of the last event received",
                field="Last-Event-ID",
            )
        if state.terminal and (after_seq is None or after_seq >= stored.last_seq):
            if final_frame:
                return stored, policy.slots.open(owner, lambda: _ended(stored))
            raise UnsupportedOperationError(
                f"task {request.task_id} is {state.value}: nothing more will happen to it; "
                "read it with GetTask (tasks/get)",
                field="task_id",
            )
        frames = policy.slots.open(
            owner,
            lambda: self._recovering(
                owner,
                stored.task.id,
                streaming.follow(self.store, owner, stored, after_seq, policy),
            ),
        )
        return stored, frames

    def _recovering(self, owner: str, task_id: str, frames: streaming.Stream) -> streaming.Stream:
        """`frames` of a followed task; at each keep-alive tick (nothing happened for a
        while) the task's turn is recovered if its owner vanished, so the stream goes on to
        the re-run or the failure instead of only ticking."""
        try:
            for frame in frames:
                if frame is None:
                    stored = self.store.get(owner, task_id)
                    if stored is not None:
                        self._settle(stored)
                yield frame
        finally:
            frames.close()

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
                    check_history(stored, request.message, self.limits)
            except A2AError:
                # The task may have moved on because of this very message (it ended the
                # task): a resend gets its first answer, not the refusal.
                first = self._recorded(owner, key)
                if first is None:
                    raise
                return self._resent(first, request)
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
                self._admit_push_config(owner, push, count=stored is not None)
            # A new task's config hears of every event; a resumed one's of those to come.
            seen = stored.last_seq if stored is not None else 0
            if background:
                return self._queue_turn(
                    owner,
                    request=request,
                    task=task,
                    stored=stored,
                    dialect=dialect,
                    message_key=key,
                    push=push,
                    seen=seen,
                )
            turn = self._turn(
                owner,
                request=request,
                task=task,
                stored=stored,
                dialect=dialect,
                message_key=key,
                message_results=message_results,
            )
            # A handler that must not run twice (RERUN_SAFE = False) runs only once its task
            # is stored: a resend of its message is refused by that write, not after a run.
            if stored is not None or claim or push is not None or not self.handler.rerun_safe:
                turn.claim()
            if push is not None:
                # After the claim's commit: the turn's later commits notify the config.
                self._put_push_config(owner, push, dialect, seen)
            return turn

        return retry_on_conflict(decide, subject=f"task {request.task_id or '(new)'}")

    @staticmethod
    def _taken(request: SendRequest) -> TaskNotFoundError:
        # A v0.1 client named a task of its own that appeared meanwhile (another owner's
        # ids are another namespace: they are never taken).
        return TaskNotFoundError(
            f"task {request.task_id} cannot be created: the id is taken", field="task_id"
        )

    def _turn(
        self,
        owner: str,
        *,
        request: SendRequest,
        task: Task,
        stored: StoredTask | None,
        dialect: str,
        message_key: MessageKey | None,
        message_results: bool,
    ) -> Turn:
        message = _addressed(request.message, task)
        return Turn(
            self.store,
            owner,
            self.handler,
            task=task,
            stored=stored,
            message=message,
            dialect=dialect,
            message_key=message_key,
            commit_interval=self._commit_interval,
            allow_message=message_results and stored is None,
            hand_over=self.turns.hand_over,
            lease_seconds=self._lease_seconds,
            limits=self.limits,
            clock=self._clock,
        )

    def _queue_turn(
        self,
        owner: str,
        *,
        request: SendRequest,
        task: Task,
        stored: StoredTask | None,
        dialect: str,
        message_key: MessageKey | None,
        push: PushConfig | None,
        seen: int,
    ) -> StoredTask:
        """Store the message with the task `submitted` and the turn's lease, then the push
        config (if any), then enqueue the turn. Raises VersionConflict when the task moved on
        meanwhile."""
        message = _addressed(request.message, task)
        submitted = StatusUpdate(
            task_id=task.id,
            context_id=task.context_id,
            status=TaskStatus(state=TaskState.SUBMITTED),
        )
        events: list[Event]
        if stored is None:
            events = [message, submitted]
            queued = self.store.create(
                owner,
                apply_all(task, events),
                events,
                dialect=dialect,
                message_key=message_key,
                lease=self.turns.queued_lease(1, message.message_id),
            )
        else:
            # As in a resumed Turn: the agent's question moves into history before the answer.
            events = [submitted, message]
            lease = self.turns.queued_lease(stored.version + 1, message.message_id)
            queued = self.store.commit(
                replace(stored, lease=lease),
                apply_all(task, events),
                events,
                message_key=message_key,
            )
        if push is not None:
            # Before the worker can commit: its commits are what notify the config.
            self._put_push_config(owner, push, dialect, seen)
        self._enqueue(queued)
        return queued

    def _enqueue(self, queued: StoredTask) -> None:
        """Hand the queued turn to the work queue; TurnNotQueuedError when it did not take
        it (the turn waits in the outbox, and the client's retry finds the task)."""
        try:
            self.turns.enqueue(queued)
        except QueueUnavailable:
            raise TurnNotQueuedError(
                f"task {queued.task.id} is stored, but the work queue did not take its turn; "
                "it is enqueued again within a minute. Read the task (GetTask, tasks/get) or "
                "send the same message again (it is recognised and gets this task)",
                metadata={"taskId": queued.task.id},
            ) from None

    def _wait(self, queued: StoredTask) -> StoredTask:
        """The task once its background turn ended (or paused for input), or as it stands
        when the blocking budget is spent; polls with backoff to keep reads few."""
        clock, never = self._clock, threading.Event()
        deadline = clock.monotonic() + self._blocking_wait
        pause, current = _FIRST_POLL, queued
        while True:
            state = current.task.status.state
            left = deadline - clock.monotonic()
            if state.terminal or state.interrupted or left <= 0:
                return current
            clock.wait(never, min(pause, left))
            pause = min(pause * 2, _MAX_POLL)
            current = self._settle(self.store.get(current.owner, current.task.id) or current)

    def _settle(self, stored: StoredTask) -> StoredTask:
        """The task, its turn recovered first when whatever ran or queued it vanished."""
        return self.turns.settle(stored)

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
        stored = self.store.get(owner, request.task_id)
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
        self, stored: StoredTask, request: SendRequest, message_key: MessageKey | None
    ) -> Task:
        """The message joins the running task's history and waits to be its next turn.
        Raises VersionConflict when the task moved on meanwhile: the caller decides again
        (it may be resumable now)."""
        task = stored.task
        if len(stored.pending) >= self._max_pending:
            raise InvalidParamsError(
                f"task {task.id} already has {len(stored.pending)} messages waiting for its "
                f"running turn, the limit ({self._max_pending}); wait until it stops working "
                "(subscribe to it, or read it with GetTask) and send again, or cancel it",
                field="task_id",
                metadata={"limit": str(self._max_pending)},
            )
        message = _addressed(request.message, task)
        waiting = replace(stored, pending=(*stored.pending, message.message_id))
        new = self.store.commit(waiting, apply(task, message), [message], message_key=message_key)
        return view(new.task, request.history_length)

    def _after_duplicate(
        self, owner: str, key: MessageKey | None, task_id: str
    ) -> StoredTask | MessageKey:
        """After the store refused the message as recorded with `task_id`: the task to
        answer the resend with, or, when the client moved on from it (or it is gone), the key
        to send the message again under, as a new message replacing the record."""
        # Only a recorded message is a duplicate, and a key that replaces its record is not
        # refused (shared.ports.MessageKey): the second send under it is the last.
        assert key is not None and key.replaces is None
        first = self._first_send(owner, key, task_id)
        return first if first is not None else replace(key, replaces=task_id)

    def _first_send(self, owner: str, key: MessageKey, task_id: str) -> StoredTask | None:
        """The task the message's first send went to (`task_id`, as recorded), unless the
        client moved on from it or it is gone: None, the message is a new one."""
        earlier = self.store.get(owner, task_id)
        if earlier is not None and _answers(earlier.task, key.message_id):
            return earlier
        if task_id == key.task_id(owner):
            # The key's own task was moved on from: a later send may have been recorded
            # (replacing no record of it: the task is its record).
            later = self.store.find_message(owner, key)
            if later is not None and later != task_id:
                return self._first_send(owner, key, later)
        return None

    def _recorded(self, owner: str, key: MessageKey | None) -> StoredTask | None:
        """The task the message went to, when it was sent before and the client has not
        moved on from it (a look-up: only for a message about to be refused)."""
        if key is None or key.replaces is not None:
            return None
        found = self.store.find_message(owner, key)
        return None if found is None else self._first_send(owner, key, found)

    def _resent(self, stored: StoredTask, request: SendRequest) -> Task:
        """A resent message gets the task its first send went to, unchanged."""
        lease = stored.lease
        if (
            lease is not None
            and not lease.holder
            and stored.task.status.state is TaskState.SUBMITTED
        ):
            # Still queued: the first request may have died before it enqueued the turn.
            # The entry's name is the turn's, so this adds nothing if it did enqueue. (A
            # lease stored before leases named their message is the resent message's.)
            message_id = lease.message_id or request.message.message_id
            self._enqueue(replace(stored, lease=replace(lease, message_id=message_id)))
        return view(stored.task, request.history_length)

    # -- get, list, cancel -----------------------------------------------------------------

    def _stored(self, owner: str, task_id: str) -> StoredTask:
        """The owner's task (settled), or TaskNotFound naming `task_id`."""
        stored = self.store.get(owner, task_id)
        if stored is None:
            raise TaskNotFoundError(f"no task {task_id}", field="task_id")
        return self._settle(stored)

    def get(self, owner: str, request: TaskSelector) -> StoredTask:
        stored = self._stored(owner, request.task_id)
        return replace(stored, task=view(stored.task, request.history_length))

    def list(self, owner: str, request: ListTasksRequest) -> tuple[TaskPage, list[Task]]:
        query = TaskQuery(
            context_id=request.context_id,
            state=request.state,
            status_after=request.status_after,
            page_size=request.page_size,
            page_token=request.page_token,
        )
        try:
            page = self.store.list(owner, query)
        except InvalidPageToken as exc:
            raise InvalidParamsError(str(exc), field="page_token") from None
        tasks = [
            view(s.task, request.history_length, artifacts=request.include_artifacts)
            for s in page.tasks
        ]
        return page, tasks

    def cancel(self, owner: str, request: CancelRequest) -> StoredTask:
        task_id = request.task_id

        def decide() -> StoredTask:
            stored = self.store.get(owner, task_id)
            if stored is None:
                raise TaskNotFoundError(f"no task {task_id}", field="task_id")
            state = stored.task.status.state
            if state.terminal:
                raise TaskNotCancelableError(
                    f"task {task_id} is already {state.value}", field="task_id"
                )
            event = StatusUpdate(
                task_id=task_id,
                context_id=stored.task.context_id,
                status=TaskStatus(state=TaskState.CANCELED),
            )
            # The running turn's next commit loses and it stops; messages waiting on the task
            # are never run.
            ended = replace(stored, lease=None, pending=())
            return self.store.commit(ended, apply(stored.task, event), [event])

        # A lost race means the running turn committed meanwhile: read again, decide again.
        return retry_on_conflict(decide, subject=f"task {task_id}")

    def messages(self, owner: str, request: MessagesRequest) -> tuple[Message, ...]:
        """The seeds' `messages/list`: the task's whole conversation, oldest first."""
        task = self._stored(owner, request.task_id).task
        status_message = task.status.message
        tail = (status_message,) if status_message is not None else ()
        return (*task.history, *tail)

    # -- push notification configs --------------------------------------------------------

    def require_push(self) -> PushConfigStore:
        """The push config store; PushNotificationNotSupported when push is off."""
        if self.push_configs is None:
            raise PushNotificationNotSupportedError(
                "this agent does not send push notifications (capabilities.pushNotifications "
                "is false)"
            )
        return self.push_configs

    def _admit_push_config(self, owner: str, config: PushConfig, *, count: bool) -> None:
        """Refuse a config whose URL is refused, or (`count`: a send to a task that exists)
        that would be one too many on its task (replacing one of the owner's configs is
        always allowed), before a send writes anything. The put counts again, atomically
        (`_put_push_config`): that is what holds the limit when sends race."""
        store = self.require_push()
        try:
            self._check_push_url(config.url)
        except PushURLRefused as exc:
            raise InvalidParamsError(
                f"push notification URL refused: {exc}", field="push_config.url"
            ) from None
        if not count:
            return
        existing = store.list(owner, config.task_id)
        if len(existing) >= self._max_push_configs and all(
            c.config.id != config.id for c in existing
        ):
            raise self._too_many_push_configs(config.task_id, len(existing))

    def _too_many_push_configs(self, task_id: str, count: int) -> InvalidParamsError:
        limit = self._max_push_configs
        setting = ENVIRONMENT["max_push_configs_per_task"]
        return InvalidParamsError(
            f"task {task_id} has {count} push notification configs, the limit "
            f"({setting}={limit}); delete one, replace one by its id, or raise {setting}",
            metadata={"limit": str(limit), "setting": setting},
        )

    def _put_push_config(
        self, owner: str, config: PushConfig, dialect: str, delivered_seq: int
    ) -> StoredPushConfig:
        """Store the config within the per-task limit: the store counts and writes in one
        atomic step, so concurrent puts of new ids cannot pass it together."""
        try:
            return self.require_push().put(
                owner,
                config,
                dialect=dialect,
                delivered_seq=delivered_seq,
                limit=self._max_push_configs,
            )
        except TooManyPushConfigs as exc:
            raise self._too_many_push_configs(exc.task_id, exc.count) from None

    def set_push_config(
        self, owner: str, request: SetPushConfigRequest, dialect: str
    ) -> StoredPushConfig:
        """A config made for a task that exists hears of the events that come after it.
        Refused (URL, limit) before anything is written; the put counts the task's configs."""
        stored = self._stored(owner, request.config.task_id)
        self._admit_push_config(owner, request.config, count=False)
        return self._put_push_config(owner, request.config, dialect, stored.last_seq)

    def get_push_config(self, owner: str, request: GetPushConfigRequest) -> StoredPushConfig:
        """The config, or with no id the task's first one (v0.x get without a config id)."""
        store = self.require_push()
        task_id, config_id = request.task_id, request.config_id
        self._stored(owner, task_id)
        if config_id is None:
            configs = store.list(owner, task_id)
            found = configs[0] if configs else None
        else:
            found = store.get(owner, task_id, config_id)
        if found is None:
            raise TaskNotFoundError(
                f"task {task_id} has no push notification config {config_id or ''}".rstrip(),
                field="config_id",
            )
        return found

    def list_push_configs(
        self, owner: str, request: ListPushConfigsRequest
    ) -> builtins.list[StoredPushConfig]:
        store = self.require_push()
        self._stored(owner, request.task_id)
        return store.list(owner, request.task_id)

    def delete_push_config(self, owner: str, request: DeletePushConfigRequest) -> None:
        """Idempotent: deleting a config that is not there succeeds."""
        store = self.require_push()
        self._stored(owner, request.task_id)
        store.delete(owner, request.task_id, request.config_id)
