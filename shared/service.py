"""The A2A operations on canonical types, for one caller (the owner).

Send, get, list, cancel and the seeds' message listing. Nothing here knows a wire format:
the bindings decode requests into the values below and encode what comes back.

A blocking send runs the handler in the request. A non-blocking one, and every send to a
long-running handler, stores the message with the task `submitted` and a queued lease,
enqueues the turn for the worker (shared.worker) and answers; a blocking send then waits on
the store until the turn ends or its budget does.
"""

from __future__ import annotations

import time
from dataclasses import replace

from shared.agent import HandlerModule
from shared.dialects.decode import ListRequest, SendRequest
from shared.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from shared.lifecycle import apply, apply_all
from shared.model import Event, Message, StatusUpdate, Task, TaskState, TaskStatus, new_id
from shared.ports import (
    DuplicateMessage,
    InvalidPageToken,
    Lease,
    StoredTask,
    TaskExists,
    TaskPage,
    TaskQuery,
    TaskQueue,
    TaskStore,
    VersionConflict,
)
from shared.runtime import Turn
from shared.worker import LOST_TEXT, Job, Worker, abandoned, end

_ATTEMPTS = 20  # lost races in a row before we call it a bug, not bad luck
# A blocking send waiting for the worker reads the task after these many seconds, doubling.
_FIRST_POLL, _MAX_POLL = 0.05, 1.0


def view(task: Task, history_length: int | None, *, artifacts: bool = True) -> Task:
    """The task as a reader asked for it: the last `history_length` messages (None: all)."""
    update: dict[str, object] = {}
    if history_length is not None and len(task.history) > history_length:
        update["history"] = task.history[len(task.history) - history_length :]
    if not artifacts and task.artifacts:
        update["artifacts"] = ()
    return task.model_copy(update=update) if update else task


class A2AService:
    def __init__(
        self,
        store: TaskStore,
        handler: HandlerModule,
        *,
        commit_interval: float = 0.25,
        deduplicate: bool = True,
        queue: TaskQueue | None = None,
        blocking_wait: float = 270.0,
        lease_seconds: float = 30.0,
    ) -> None:
        """`queue` takes background turns to the worker; the default runs them in this
        process (the embedded backend). `blocking_wait`: how long a blocking send waits for
        a background turn before it answers the task as it stands."""
        self.store = store
        self.handler = handler
        self._commit_interval = commit_interval
        self._deduplicate = deduplicate
        self._blocking_wait = blocking_wait
        if queue is None:
            from shared.queue.inline import InlineQueue

            worker = Worker(
                store, handler, commit_interval=commit_interval, lease_seconds=lease_seconds
            )
            queue = InlineQueue(
                lambda payload, delivery: worker.deliver(payload, delivery).accepted
            )
        self._queue = queue

    # -- send ------------------------------------------------------------------------------

    def send(
        self, owner: str, request: SendRequest, *, dialect: str, message_results: bool
    ) -> Task | Message:
        """Start or continue a task with the request's message; the task or a direct reply."""
        message_id = request.message.message_id if self._deduplicate else None
        if message_id is not None:
            first = self.store.find_message(owner, message_id)
            if first is not None:
                return self._first_result(owner, first, request)
        try:
            for _ in range(_ATTEMPTS):
                stored = self._target(owner, request)
                if stored is not None and not stored.task.status.state.interrupted:
                    # A turn is running (submitted or working): the message joins the
                    # task's history. The running handler does not see it; a second
                    # concurrent run of the same task would race the first.
                    try:
                        return self._append_only(owner, stored, request, message_id)
                    except VersionConflict:
                        continue  # the task can be resumed again: decide again
                if not request.blocking or self.handler.long_running:
                    try:
                        queued = self._queue_turn(owner, request, stored, dialect, message_id)
                    except VersionConflict:
                        continue  # another message resumed the task first: decide again
                    if request.blocking:
                        queued = self._wait(queued)
                    return view(queued.task, request.history_length)
                turn = self._turn(
                    owner,
                    request=request,
                    stored=stored,
                    dialect=dialect,
                    message_id=message_id,
                    message_results=message_results,
                )
                if stored is not None:
                    try:
                        turn.claim()
                    except VersionConflict:
                        continue  # another message resumed the task first: decide again
                result = turn.run()
                if isinstance(result, Message):
                    return result
                return view(result, request.history_length)
        except DuplicateMessage as duplicate:
            return self._first_result(owner, duplicate.task_id, request)
        except TaskExists:
            # A v0.1 client named a task that appeared meanwhile (or is another owner's).
            raise TaskNotFoundError(
                f"task {request.task_id} cannot be created: the id is taken", field="params.id"
            ) from None
        raise RuntimeError("too many concurrent writers on one task")

    def _turn(
        self,
        owner: str,
        *,
        request: SendRequest,
        stored: StoredTask | None,
        dialect: str,
        message_id: str | None,
        message_results: bool,
    ) -> Turn:
        task = self._new_task(request) if stored is None else stored.task
        message = request.message.model_copy(
            update={"task_id": task.id, "context_id": task.context_id}
        )
        return Turn(
            self.store,
            owner,
            self.handler,
            task=task,
            stored=stored,
            message=message,
            dialect=dialect,
            message_id=message_id,
            commit_interval=self._commit_interval,
            allow_message=message_results and stored is None,
        )

    def _queue_turn(
        self,
        owner: str,
        request: SendRequest,
        stored: StoredTask | None,
        dialect: str,
        message_id: str | None,
    ) -> StoredTask:
        """Store the message with the task `submitted` and the turn's lease, then enqueue it.
        Raises VersionConflict when the task moved on meanwhile."""
        task = self._new_task(request) if stored is None else stored.task
        message = request.message.model_copy(
            update={"task_id": task.id, "context_id": task.context_id}
        )
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
                message_id=message_id,
                lease=Lease(turn=1),
            )
        else:
            # As in a resumed Turn: the agent's question moves into history before the answer.
            events = [submitted, message]
            claim = replace(stored, lease=Lease(turn=stored.version + 1))
            queued = self.store.commit(
                claim, apply_all(task, events), events, message_id=message_id
            )
        self._enqueue(queued, message.message_id)
        return queued

    def _enqueue(self, queued: StoredTask, message_id: str) -> None:
        assert queued.lease is not None
        job = Job(queued.task.id, queued.owner, queued.lease.turn, message_id)
        self._queue.enqueue(job.name, job.payload())

    def _wait(self, queued: StoredTask) -> StoredTask:
        """The task once its background turn ended (or paused for input), or as it stands
        when the blocking budget is spent; polls with backoff to keep reads few."""
        deadline = time.monotonic() + self._blocking_wait
        pause, current = _FIRST_POLL, queued
        while True:
            state = current.task.status.state
            left = deadline - time.monotonic()
            if state.terminal or state.interrupted or left <= 0:
                return current
            time.sleep(min(pause, left))
            pause = min(pause * 2, _MAX_POLL)
            current = self._settle(self.store.get(current.owner, current.task.id) or current)

    def _settle(self, stored: StoredTask) -> StoredTask:
        """The task, failed first when its worker died on the queue's last attempt."""
        for _ in range(_ATTEMPTS):
            if not abandoned(stored):
                return stored
            try:
                return end(self.store, stored, TaskState.FAILED, LOST_TEXT)
            except VersionConflict:
                stored = self.store.get(stored.owner, stored.task.id) or stored
        return stored

    @staticmethod
    def _new_task(request: SendRequest) -> Task:
        return Task(
            id=request.task_id or new_id(),
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
            raise TaskNotFoundError(f"no task {request.task_id}", field="params.message.taskId")
        state = stored.task.status.state
        if state.terminal:
            raise UnsupportedOperationError(
                f"task {stored.task.id} is {state.value} and cannot take more messages; send "
                "the message without a taskId (same contextId) to start a follow-up task",
                field="params.message.taskId",
            )
        if request.context_id is not None and request.context_id != stored.task.context_id:
            raise InvalidParamsError(
                f"contextId {request.context_id} is not the context of task {stored.task.id} "
                f"({stored.task.context_id})",
                field="params.message.contextId",
            )
        return stored

    def _append_only(
        self, owner: str, stored: StoredTask, request: SendRequest, message_id: str | None
    ) -> Task:
        task = stored.task
        message = request.message.model_copy(
            update={"task_id": task.id, "context_id": task.context_id}
        )
        for _ in range(_ATTEMPTS):
            try:
                new = self.store.commit(
                    stored, apply(stored.task, message), [message], message_id=message_id
                )
                return view(new.task, request.history_length)
            except VersionConflict:
                stored = self._target(owner, request) or stored
                if stored.task.status.state.interrupted:
                    raise VersionConflict(task.id) from None  # resumable again: start over
        raise RuntimeError(f"task {task.id}: too many concurrent writers")

    def _first_result(self, owner: str, task_id: str, request: SendRequest) -> Task:
        """A repeated messageId gets the task its first send went to, unchanged."""
        stored = self.store.get(owner, task_id)
        if stored is None:
            raise TaskNotFoundError(f"no task {task_id}")
        lease = stored.lease
        if (
            lease is not None
            and not lease.holder
            and stored.task.status.state is TaskState.SUBMITTED
        ):
            # Still queued: the first request may have died before it enqueued the turn.
            # The entry's name is the turn's, so this adds nothing if it did enqueue.
            self._enqueue(stored, request.message.message_id)
        return view(stored.task, request.history_length)

    # -- get, list, cancel -----------------------------------------------------------------

    def get(self, owner: str, task_id: str, history_length: int | None) -> StoredTask:
        stored = self.store.get(owner, task_id)
        if stored is None:
            raise TaskNotFoundError(f"no task {task_id}", field="params.id")
        stored = self._settle(stored)
        return replace(stored, task=view(stored.task, history_length))

    def list(self, owner: str, request: ListRequest) -> tuple[TaskPage, list[Task]]:
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
            raise InvalidParamsError(str(exc), field="params.pageToken") from None
        tasks = [
            view(s.task, request.history_length, artifacts=request.include_artifacts)
            for s in page.tasks
        ]
        return page, tasks

    def cancel(self, owner: str, task_id: str) -> StoredTask:
        for _ in range(_ATTEMPTS):
            stored = self.store.get(owner, task_id)
            if stored is None:
                raise TaskNotFoundError(f"no task {task_id}", field="params.id")
            state = stored.task.status.state
            if state.terminal:
                raise TaskNotCancelableError(
                    f"task {task_id} is already {state.value}", field="params.id"
                )
            event = StatusUpdate(
                task_id=task_id,
                context_id=stored.task.context_id,
                status=TaskStatus(state=TaskState.CANCELED),
            )
            try:
                return self.store.commit(stored, apply(stored.task, event), [event])
            except VersionConflict:
                continue  # the running turn committed meanwhile: read again and decide again
        raise RuntimeError(f"task {task_id}: too many concurrent writers")

    def messages(self, owner: str, task_id: str) -> tuple[Message, ...]:
        """The seeds' `messages/list`: the task's whole conversation, oldest first."""
        stored = self.get(owner, task_id, None)
        status_message = stored.task.status.message
        tail = (status_message,) if status_message is not None else ()
        return (*stored.task.history, *tail)
