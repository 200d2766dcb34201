"""The contracts between the A2A service and the outside world.

A TaskStore keeps tasks with optimistic concurrency and an append-only event log; the
in-memory store (`shared.store.memory`) and the Firestore store implement it and pass the
same contract tests. Every call is scoped by owner: another owner's task does not exist, and
task ids live in each owner's own namespace (two owners may both have a task `my-task-1`).
A PushConfigStore is scoped the same way: a config belongs to one owner's task, and config
ids are per task and owner. Ids follow shared.ids' rule; the stores refuse (ValueError) any
other, as the last line of defence behind the wire readers.
A TaskQueue hands a small JSON payload to one target (the worker, the push deliverer) at
least once; the Cloud Tasks queue (`shared.queue.cloud_tasks`) and the inline one
(`shared.queue.inline`) implement it.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable, Sequence
from dataclasses import field
from datetime import datetime
from json.encoder import encode_basestring_ascii as _quoted
from typing import Any, Protocol

from shared.frozen import frozen
from shared.model import Event, PushConfig, Task, TaskState, derived_id


@frozen
class Lease:
    """A turn of a task: queued for a worker, or held by a run (a worker's, or an inline turn
    of a request) until `expires`.

    Stored with the task and written with its optimistic concurrency, so taking, renewing
    and releasing a lease race like any other commit: a run whose write loses re-reads and
    finds out whether the task was canceled or the lease taken over. A lease nobody renews
    is recovered by whoever sees it first (shared.turn_queue.TurnQueue.settle: a read, a
    subscribe, the sweep): re-queued under the same turn, or the task failed.
    """

    turn: int  # the task version that queued (or began) the turn; it names the queue entry
    holder: str = ""  # the run that holds it; "" while queued
    # Held: the holder is presumed dead after this. Queued: a worker should have taken it by
    # then (None in leases stored before queued leases had a deadline: never recovered).
    expires: datetime | None = None
    attempt: int = 0  # the queue's retry count of the holder's delivery (0: the first)
    final: bool = False  # that delivery is the queue's last attempt: nobody retries after it
    message_id: str = ""  # the message the turn answers ("": stored before it was recorded)
    redrives: int = 0  # how often a reader re-queued this turn (after its owner vanished)
    inline: bool = False  # held by a request's own run: no queue entry retries it
    # The enqueue of this queued turn failed: no queue entry is known to exist, so the sweep
    # and the next read re-drive it at once (the outbox).
    outbox: bool = False


@frozen
class StoredTask:
    """A task as the store holds it, with what optimistic concurrency needs."""

    task: Task
    owner: str
    version: int  # bumped by exactly one on every commit
    last_seq: int  # sequence number of the newest event in the log (0: none yet)
    dialect: str  # the wire dialect the task was created in; v0.1 tasks answer in v0.1
    created_at: datetime
    updated_at: datetime
    # The background turn, if one is queued or running. `commit` stores the lease of the
    # snapshot it is given: pass `replace(current, lease=...)` to take, renew or release it.
    lease: Lease | None = None
    # Messages sent while a turn ran (their ids, oldest first), each to be the task's next
    # turn (shared.runtime hands over to the first when the running turn ends). Stored like
    # the lease: `commit` stores `current.pending`.
    pending: tuple[str, ...] = ()
    # Whether the task may have push configs. A store that keeps track says False while none
    # was ever put on the task (the notifier then reads none); a config's `put` marks the task
    # so that every later commit sees it. True (the default): unknown, read them.
    push_configs: bool = True
    # The bytes of the JSON the store read or wrote `task` as, when that JSON holds the whole
    # history (a bound of the history's JSON: `limits.check_history` measures none of its
    # messages while the bound leaves room); None: unknown (a task its store rebuilds from
    # its log). Not part of equality, like `token`: how the task is stored, not what it is.
    size: int | None = field(default=None, compare=False, repr=False)
    # What the store that issued this snapshot needs to detect a concurrent write without a
    # transaction (Firestore: the document's update time); opaque to callers, None in stores
    # that need nothing beyond `version`. Not part of equality: two reads of one version agree.
    token: object = field(default=None, compare=False, repr=False)


@frozen
class TaskNews:
    """A task whose last commit of status or artifact events (`model.notifiable`) landed
    while it had push configs, and when: what the push sweep checks was wanted by each
    config (shared.push_notify.NewsSweeper). Only what that check reads."""

    owner: str
    task_id: str
    last_seq: int  # the task's newest event
    at: datetime


@frozen
class LoggedEvent:
    """An event of a task's log with its place in it."""

    seq: int  # dense from 1 within a task
    event: Event


@frozen
class TaskQuery:
    """ListTasks filters and paging. Results come newest status timestamp first; equal
    timestamps in an order of the store's own, the same on every page."""

    context_id: str | None = None
    state: TaskState | None = None
    status_after: datetime | None = None
    page_size: int = 50
    page_token: str | None = None


@frozen
class TaskPage:
    """One page of a task listing, and where the next one starts."""

    tasks: list[StoredTask]
    next_page_token: str  # "" on the last page
    total_size: int


class VersionConflict(Exception):
    """The task changed since it was read. Re-read it and decide again."""


class TaskExists(Exception):
    """The owner has a task with this id already (another owner's ids are no concern)."""


_TASK_IDS = uuid.UUID("0b7f3c1e-5d2a-4c8e-9f61-2a4e8d9c7b35")  # uuid5 namespace of task ids


@frozen
class MessageKey:
    """A client's message as de-duplication knows it: its messageId and a digest of its
    content (shared.service.resends.message_key). A resend is the same owner, messageId and
    digest; the same messageId with other content is another message, recorded under its own
    key."""

    message_id: str
    digest: str  # hex; a function of the content alone, whatever the dialect it came in
    # The task this key's record named when read, which the client has moved on from since
    # (so this send is no retry): recording the key replaces the record instead of refusing
    # it, without checking that it still names that task (Firestore has no transaction
    # here): two concurrent sends of such a reused key both run.
    replaces: str | None = field(default=None, compare=False)
    # The owner `task_id` was last asked for, and its id: a new task asks twice (the service
    # names the task, the store recognises it as the record), and uuid5 over JSON is not free.
    _derived: tuple[str, str] | None = field(default=None, init=False, compare=False, repr=False)

    def task_id(self, owner: str) -> str:
        """The id of the task this message starts when it names none: derived from the owner
        and the key, so a resend derives the same id and the store finds it taken when it
        creates the task (its document is the message's record: no look-up, no record of its
        own). Another message, or this one under another owner, derives another id."""
        derived = self._derived
        if derived is not None and derived[0] == owner:
            return derived[1]
        # The name is json.dumps([owner, message_id, digest]), for every id derived since,
        # written without json.dumps's encoder (it makes one per call: most of the cost).
        name = f"[{_quoted(owner)}, {_quoted(self.message_id)}, {_quoted(self.digest)}]"
        task_id = derived_id(_TASK_IDS, name)
        object.__setattr__(self, "_derived", (owner, task_id))  # frozen: a memo, not state
        return task_id

    def recorded_by(self, owner: str, task_id: str) -> bool:
        """Whether creating this task records the message: it has the key's own id, and the
        key replaces no record (then it needs a record of its own)."""
        return self.replaces is None and task_id == self.task_id(owner)


class DuplicateMessage(Exception):
    """The owner sent this message (same key) before; `task_id` is the task it went to."""

    def __init__(self, task_id: str) -> None:
        super().__init__(task_id)
        self.task_id = task_id


class InvalidPageToken(ValueError):
    """A page token that this store did not issue, or issued for other filters."""


class EventTail(Protocol):
    """A follower of one task's event log, from a sequence number on (see TaskStore.tail)."""

    def next(self, timeout: float) -> list[LoggedEvent]:
        """The events after the last one returned (at first: after `after_seq`), in order and
        each once; waits up to `timeout` seconds for one to be committed, [] if none was."""
        ...

    def watch(self, wake: Callable[[], None]) -> float | None:
        """Have `wake` called (from any thread, perhaps at once, here) when `next` may have
        events: a stream waits for them without a thread (shared.pause). Returns the seconds
        after which `next` must be called anyway (a read of the log the tail makes itself:
        polling, a listener fallen silent), None when only a wake can bring news. The next
        `next` or `close` forgets `wake`."""
        ...

    def close(self) -> None:
        """Stop following; idempotent."""
        ...


class TaskStore(Protocol):
    def get(self, owner: str, task_id: str) -> StoredTask | None:
        """The task, or None when it does not exist for this owner."""
        ...

    def create(
        self,
        owner: str,
        task: Task,
        events: Sequence[Event],
        *,
        dialect: str,
        message_key: MessageKey | None = None,
        lease: Lease | None = None,
        live_limit: int | None = None,
    ) -> StoredTask:
        """Store a new task (version 1) with its first events (and its queued turn's lease),
        recording `message_key` as sent to it: a task whose id is the key's own
        (`MessageKey.task_id`) is the record, any other gets one.

        Raises TaskExists when this owner has a task with this id, DuplicateMessage when
        `message_key` was already recorded for this owner (a task with the key's own id
        exists: that one), and, given a `live_limit`, errors.LiveTaskQuotaError when the
        owner has that many tasks not terminal: counted in the step that writes, so
        concurrent creates never pass it (A2A_MAX_LIVE_TASKS_PER_OWNER). All leave the
        store unchanged.
        """
        ...

    def commit(
        self,
        current: StoredTask,
        task: Task,
        events: Sequence[Event],
        *,
        message_key: MessageKey | None = None,
    ) -> StoredTask:
        """Replace `current` by `task` and append `events`, atomically (recording
        `message_key` as sent to the task); the stored lease and pending messages become
        `current.lease` and `current.pending`.

        Raises VersionConflict when the stored version is no longer `current.version`, and
        DuplicateMessage as `create` does; both leave the store unchanged.
        """
        ...

    def find_message(self, owner: str, key: MessageKey) -> str | None:
        """The id of the task that this owner's message went to, if it was recorded (its
        record, else the task with the key's own id): the same messageId with another digest
        is another message, and finds nothing."""
        ...

    def events(self, owner: str, task_id: str, after_seq: int = 0) -> list[LoggedEvent]:
        """The task's events with a sequence number above `after_seq`, in order."""
        ...

    def expired_leases(
        self, before: datetime, limit: int, after: StoredTask | None = None
    ) -> list[StoredTask]:
        """Up to `limit` tasks, of every owner, whose lease `expires` before `before`, the
        oldest expiry first (ties in an order of the store's own): the sweep's work
        (shared.sweep). `after`, the last task of the previous page as it read it, goes on
        past that one. Not scoped by owner: only the sweep calls it, and recovers each task
        as its owner's."""
        ...

    def push_news(
        self, since: datetime, before: datetime, limit: int, after: TaskNews | None = None
    ) -> list[TaskNews]:
        """Up to `limit` tasks, of every owner, whose last news for push configs came at
        `since` or later and before `before`, the oldest first (ties in an order of the
        store's own), paged as `expired_leases` is: the push sweep's check of commits whose
        wanted events no config recorded, their process dead between the commit and its
        notifier. The time is recorded by the commit's own write. A store whose commits
        cannot outlive their notifier (the memory store: one process, which loses its tasks
        with it) records none and finds none."""
        ...

    def list(self, owner: str, query: TaskQuery) -> TaskPage:
        """One page of the owner's tasks. Raises InvalidPageToken for a foreign token."""
        ...

    def live_tasks(self, owner: str, limit: int) -> int:
        """How many of the owner's tasks are not terminal, counted up to `limit` at most (a
        quota's check: the count stops there)."""
        ...

    def tail(self, owner: str, task_id: str, after_seq: int = 0) -> EventTail:
        """Follow the task's log from `after_seq` on, as other writers (any process) commit.

        Following another owner's or a missing task yields nothing. Close the tail when done.
        A terminal task's log is whole: read it with `events` (a task created ended may
        keep its log where no tail looks: the Firestore store's task document).
        """
        ...


@frozen
class StoredPushConfig:
    """A push config as stored: its owner, dialect and how far its deliveries got."""

    config: PushConfig
    owner: str  # the owner of the config's task: every read and write filters on it
    dialect: str  # notifications go out in the dialect the config was made in
    delivered_seq: int  # the last event delivered to it (0: none yet)
    wanted_seq: int = 0  # the newest event a delivery was asked for: above delivered_seq, it lags
    # The queue's last attempt failed (no delivery of it is left): why and when. Cleared when
    # a delivery catches up and when the config is replaced.
    last_error: str | None = None
    failed_at: datetime | None = None
    # When a sweep is due for it (set while it lags), as read: where `lagging`'s next page
    # goes on from.
    sweep_at: datetime | None = None
    # Its failed attempts in a row, across its events, and until when it backs off (no POST
    # before): a webhook that keeps failing is tried less often, whatever events come.
    # Cleared by any delivered event and when the config is replaced.
    failures: int = 0
    backoff_until: datetime | None = None


class TooManyPushConfigs(Exception):
    """The owner's task has `count` push configs, at least the `limit` a put was given, and
    the config to put is not one of them: nothing was written."""

    def __init__(self, task_id: str, count: int, limit: int) -> None:
        super().__init__(f"task {task_id} has {count} push configs, the limit ({limit})")
        self.task_id, self.count, self.limit = task_id, count, limit


class PushConfigStore(Protocol):
    """Push notification configs of one owner's tasks. Every call names the owner, and sees
    only that owner's configs: a config id names a config of (owner, task), never another
    owner's. Callers check that the owner's task exists before they `put`."""

    def put(
        self,
        owner: str,
        config: PushConfig,
        *,
        dialect: str,
        delivered_seq: int = 0,
        limit: int | None = None,
    ) -> StoredPushConfig:
        """Create or replace the owner's config with this id on its task. A new config counts
        events up to `delivered_seq` as delivered (it hears only of later ones); a replaced
        one keeps its progress, forgets its failure, and, if it lags, is due to a sweep now
        (updating a config retries it).

        With a `limit`, raises TooManyPushConfigs instead of adding a config to a task that
        has `limit` already; the count and the write are one atomic step, so concurrent puts
        of new ids never leave the task with more (replacing one by its id is allowed)."""
        ...

    def get(self, owner: str, task_id: str, config_id: str) -> StoredPushConfig | None: ...

    def require_room(self, owner: str) -> None:
        """Raise PushConfigQuotaError when the owner has as many configs, on all its tasks,
        as the store's owner limit allows (none: never): a check before a send writes
        anything, which `put` makes again as it writes."""
        ...

    def list(self, owner: str, task_id: str) -> list[StoredPushConfig]:
        """The owner's configs of the task, oldest first."""
        ...

    def delete(self, owner: str, task_id: str, config_id: str) -> bool:
        """Remove the config; False when there was none (deleting is idempotent)."""
        ...

    def begin_delivery(
        self, owner: str, task_id: str, config_id: str, holder: str, until: datetime
    ) -> StoredPushConfig | None:
        """Take the config's sending lease until `until`, if no other live delivery holds it:
        deliveries to one config go out one at a time, in order. None: busy, or no config."""
        ...

    def delivered(self, owner: str, task_id: str, config_id: str, holder: str, seq: int) -> None:
        """Record that events up to `seq` reached the webhook (the holder's lease); caught up
        with what was wanted, the config is due to no sweep and forgets its failure."""
        ...

    def end_delivery(
        self, owner: str, task_id: str, config_id: str, holder: str, *, unless_wanted: bool = False
    ) -> StoredPushConfig | None:
        """Give the sending lease back (None). With `unless_wanted`, keep it when the config
        wants an event past the one it was delivered (a commit's `want` came while the holder
        sent) and answer the config as it now stands: the holder sends that too, at once,
        instead of the commit's own delivery finding the config busy. A `want` racing this
        call is seen by one side: either the lease is kept, or it is free for its delivery."""
        ...

    def want(self, owner: str, task_id: str, config_id: str, seq: int, sweep_at: datetime) -> None:
        """Record that events up to `seq` are to reach the config (before the delivery is
        queued), and that a sweep re-drives it from `sweep_at` on if it still lags then (the
        earliest such time stands). Nothing happens when there is no such config."""
        ...

    def attempt_failed(
        self,
        owner: str,
        task_id: str,
        config_id: str,
        holder: str,
        error: str,
        *,
        at: datetime,
        retry_at: datetime | None,
        backoff_until: datetime | None = None,
    ) -> None:
        """Record the holder's failed delivery: `retry_at` None when it was the last attempt
        (the config records `error` and `at`, and no sweep retries it: the next event or a
        replacement of the config does); else the queue retries, and a sweep steps in only
        after `retry_at`. Either way its `failures` count one more, and it backs off (no POST)
        until `backoff_until`."""
        ...

    def lagging(
        self, now: datetime, limit: int, after: StoredPushConfig | None = None
    ) -> builtins.list[StoredPushConfig]:
        """Configs of any owner whose sweep time has come and that lag (no delivery caught
        them up in time), the longest waiting first, at most `limit` looked at; one whose
        sweep time came but that does not lag (wanted after it was delivered) is forgotten.
        `after`, the last config of the previous page as it read it, goes on past that one
        (a page with fewer than `limit` configs may still be followed by more)."""
        ...


@frozen
class Delivery:
    """Which attempt of a queue a target is handed a payload in."""

    attempt: int = 0  # retries before this one
    final: bool = False  # the queue will not retry after this attempt


class BadPayload(ValueError):
    """A queue payload its target cannot read; the message names the field."""


class TaskTooLarge(ValueError):
    """A queue payload over the queue's size limit; the message names both sizes."""


class TaskQueue(Protocol):
    """A queue bound to one target: each payload is delivered to it at least once, as JSON,
    and retried with backoff until the target accepts it (or the queue gives up)."""

    def enqueue(self, name: str, payload: dict[str, Any]) -> bool:
        """Add a delivery named `name`; False when that name was used before (nothing added).

        Names are letters, digits, `-` and `_`. Raises TaskTooLarge over the size limit.
        """
        ...

    def close(self) -> None:
        """Let go of connections and threads (the process is going away)."""
        ...


class DelayingTaskQueue(TaskQueue, Protocol):
    """A TaskQueue that can also hold a delivery back (both adapters can)."""

    def enqueue(self, name: str, payload: dict[str, Any], *, delay: float = 0.0) -> bool:
        """Add a delivery named `name`, due in `delay` seconds; as TaskQueue.enqueue."""
        ...
