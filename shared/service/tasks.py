"""The owner's tasks as they stand: read (get), listed, followed (subscribe), canceled, and
the seeds' message listing.

Every read settles first: a task whose turn's owner vanished has its turn recovered
(re-queued or failed) before it is answered, and so does a followed task at each keep-alive
tick (shared.service.base). A cancel is a write that makes the running turn's next commit
lose: the turn stops (at once when it runs on this instance: its pending await is cancelled),
and messages waiting on the task are never run.
"""

from __future__ import annotations

from dataclasses import replace

from shared import streaming
from shared.conflicts import retry_on_conflict
from shared.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from shared.lifecycle import apply
from shared.limits import model_bytes
from shared.model import Message, Task, TaskState, status_update
from shared.ports import InvalidPageToken, StoredTask, TaskPage, TaskQuery
from shared.requests import (
    CancelRequest,
    ListTasksRequest,
    MessagesRequest,
    SubscribeRequest,
    TaskSelector,
)
from shared.service.base import ANSWER_HISTORY_BYTES, Ports, view
from shared.store.paging import Cursor, decode_token, encode_token

# The JSON bytes of one ListTasks page's tasks: past them the page ends (never before its
# first task), its nextPageToken going on from its last: a page of 100 tasks with their
# artifacts (includeArtifacts) answered 4 MiB each would otherwise be one answer of 400 MiB.
# Four tasks at their history's budget (ANSWER_HISTORY_BYTES), a quarter of an owner's share
# of the instance's room (A2A_MAX_OWNER_BUFFERED_BYTES).
LIST_PAGE_BYTES = 4 * 1024 * 1024
# How far past a task's log a resumed stream's Last-Event-ID may be: a streamed send sends each
# event ahead of its commit, and a turn commits once 1 MB of events waits (shared.runtime), so
# no stream was ever that far ahead.
AHEAD_OF_LOG = 1_000_000


def _ended(stored: StoredTask) -> streaming.Stream:
    """A finished task's stream: the task as it ended, and nothing after."""
    yield streaming.Frame(stored.last_seq, stored.task, stored.task)


class Tasks:
    """The owner's tasks read, listed, followed and canceled."""

    def __init__(self, ports: Ports) -> None:
        self._ports = ports

    def get(self, owner: str, request: TaskSelector) -> StoredTask:
        stored = self._ports.stored(owner, request.task_id)
        return replace(stored, task=view(stored.task, request.history_length, size=stored.size))

    def list(self, owner: str, request: ListTasksRequest) -> tuple[TaskPage, list[Task]]:
        query = TaskQuery(
            context_id=request.context_id,
            state=request.state,
            status_after=request.status_after,
            page_size=request.page_size,
            page_token=request.page_token,
        )
        try:
            page = self._ports.store.list(owner, query)
            before = decode_token(query)
        except InvalidPageToken as exc:
            raise InvalidParamsError(str(exc), field="page_token") from None
        tasks: list[Task] = []
        spent = 0
        for stored in page.tasks:
            task = view(
                stored.task,
                request.history_length,
                artifacts=request.include_artifacts,
                size=stored.size,
            )
            # The stored size bounds the task's JSON, and saves measuring it when small.
            known = stored.size is not None and stored.size <= ANSWER_HISTORY_BYTES
            spent += stored.size if known and stored.size is not None else model_bytes(task)
            if tasks and spent > LIST_PAGE_BYTES:  # the next page starts at this task
                last = tasks[-1]
                returned = (before.returned if before else 0) + len(tasks)
                cursor = Cursor(last.status.timestamp, last.id, returned)
                page = replace(page, next_page_token=encode_token(query, cursor))
                break
            tasks.append(task)
        return page, tasks

    def cancel(self, owner: str, request: CancelRequest) -> StoredTask:
        store, task_id = self._ports.store, request.task_id

        def decide() -> StoredTask:
            stored = store.get(owner, task_id)
            if stored is None:
                raise TaskNotFoundError(f"no task {task_id}", field="task_id")
            state = stored.task.status.state
            if state.terminal:
                raise TaskNotCancelableError(
                    f"task {task_id} is already {state.value}", field="task_id"
                )
            event = status_update(stored.task, TaskState.CANCELED)
            # The running turn's next commit loses and it stops; messages waiting on the task
            # are never run.
            ended = replace(stored, lease=None, pending=())
            return store.commit(ended, apply(stored.task, event), [event])

        # A lost race means the running turn committed meanwhile: read again, decide again.
        canceled = retry_on_conflict(decide, subject=f"task {task_id}")
        # A turn running it here stops now, its pending await cancelled; elsewhere, at its
        # next look at the task (shared.runtime.CHECK_SECONDS).
        self._ports.engine.cancel(owner, task_id)
        return canceled

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
        stored = self._ports.stored(owner, request.task_id)
        state = stored.task.status.state
        after_seq = request.after_seq
        # A Last-Event-ID past the log's end is a streamed send's frame sent ahead of its
        # commit: a running task's stream goes on after it; an ended task's (a cancel stopped
        # that commit) is told how it ended. No window of a turn holds more events than this.
        if after_seq is not None and after_seq > stored.last_seq + AHEAD_OF_LOG:
            raise InvalidParamsError(
                f"Last-Event-ID {after_seq} is past any event of task {request.task_id} (its "
                f"log ends at {stored.last_seq}); resume from the id of the last event received",
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
        follow = self._ports.follow
        return stored, policy.slots.open(owner, lambda: follow(owner, stored, after_seq, policy))

    def messages(self, owner: str, request: MessagesRequest) -> tuple[Message, ...]:
        """The seeds' `messages/list`: the task's whole conversation, oldest first."""
        task = self._ports.stored(owner, request.task_id).task
        status_message = task.status.message
        tail = (status_message,) if status_message is not None else ()
        return (*task.history, *tail)
