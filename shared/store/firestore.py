"""The Firestore task store: the TaskStore contract on Cloud Firestore, the store of record.

Import this module only when the Firestore backend is chosen: it loads the Google client,
which a function that does not use it should not pay for on a cold start.

Layout (collection ids are the constants below). No document id is a client's string: each
is `document_id` of what names it (a SHA-256, hex), and the real ids are fields, so no id can
address another document, and each owner's task ids are a namespace of their own.
- `tasks/{document_id(owner, taskId)}`: owner, taskId, contextId, state, statusTimestamp,
  version, lastSeq, dialect, createdAt, updatedAt, expireAt, `lease` (the turn: a map, or
  null; the sweep queries `lease.expires`), `pending` (ids of messages waiting for a turn),
  `pushConfigs` (false until a push config is put on the task: `firestore_push` sets it in
  the config's batch, with `pushConfigsAdded`, the count of configs ever added, that
  serialises them; absent in documents older than it, read as true), `task`, the
  materialized task as JSON, and `log`, the events of the task's latest commits (events
  lastSeq-len(log)+1..lastSeq; absent in documents older than it: none). A task whose JSON
  outgrows `task_budget` keeps only its status and metadata there (`inLog` is true) and is
  rebuilt on read by folding its event log.
- `tasks/{docId}/events/{first}`: events moved out of the task's document (`first`, `last`,
  `events`), id zero-padded so that lexical order is sequence order. A create or commit
  keeps its events in the task's document (`log`) while they and the log before them fit
  beside the task's JSON (`cost.logs_in_task`: LOG_IN_TASK_BYTES): one write. The commit
  that would pass it moves the log before it into an event document in its batch and keeps
  its own events (or, too big for that, moves them too): two writes, once per 256 KB of
  events. So a running task's commit is one write, a task created ended keeps its whole log
  in its document, and a listener of the task's document sees each event there first (one
  that skipped a version reads what it moved out: `firestore_tail`). A move bigger than an
  event document holds is split over several, still in the same batch. `events` reads the
  task's document, then the event documents before its log (`last` < its first): one
  version, whatever commits meanwhile.
- `tasks/{docId}/pushConfigs/{document_id(configId)}`: the task's push configs
  (`firestore_push`).
- `liveOwners/{document_id(owner)}`: `creates`, a counter that a create given a live limit
  (A2A_MAX_LIVE_TASKS_PER_OWNER) near it updates under a precondition on the document as
  read before it counted the owner's live tasks, so concurrent creates never pass the
  limit (`_live_room`); far below it (LIVE_RACE_MARGIN) nothing is written there.
- A message's record (its messageId and content digest, `ports.MessageKey`) costs no
  document of its own when the message starts a task: the task's id derives from the owner
  and the key (`MessageKey.task_id`), so the task document, created with a must-not-exist
  precondition, is the record, and a resend's batch fails on it (a short blocking task is
  one write, the task with its events, and no read). Every other message (one that
  continues a task, or starts one with an id of the client's or after the client moved on
  from the key's own task) gets
  `idempotency/{document_id(owner, messageId, digest)}`: which task it went to, created in
  the batch that records the message, so a duplicate send fails the whole batch; the same
  messageId with other content has a document of its own. A record whose task the client
  moved on from is overwritten by the next send of that key (`MessageKey.replaces`).

Models are stored as JSON strings, not Firestore maps: user data and metadata may hold keys
Firestore reserves (`__x__`) or nest deeper than its 20 levels, and nothing queries inside them.

Concurrency is optimistic and transaction-free: a commit's batch updates the task document
with a precondition on the update time its snapshot was read at, so a lost race fails the
whole batch and the writer re-reads. Each batch writes a random `commitId` on the task
document: when the client library retries a batch that had succeeded (its answer was lost;
`COMMIT_RETRY` adds a call Firestore cancelled to what it retries), the retry fails on our
own write, and the store recognises its commit there instead of reporting a conflict. A
commit is one request, and a request carries at most 10 MiB (the emulator's 4 MiB): a larger
one (the task, its events, and the log it writes again or moves) is refused before anything
is written (LimitExceeded, naming the sizes: a handler's turn fails with it). Every document
carries `expireAt` for the TTL policy in `infra/firestore.indexes.json`. A task expires a
retention after its last commit; its events and push configs live as long as it does (those
in its document with it): event documents and configs are written to expire LOG_SLACK
retentions after their write, the task document records the earliest such time
(`logExpireAt`), and a commit that finds it less than a retention ahead first writes every
event document and config of the task again with a new expiry (once per half retention of a
task's life).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Literal

from google.api_core import exceptions as google_errors
from google.api_core import retry as google_retry
from google.cloud import firestore
from google.cloud.firestore_v1 import FieldFilter

from shared import ids, lifecycle, model_json
from shared.conflicts import retry_on_conflict
from shared.errors import InvalidParamsError, LiveTaskQuotaError
from shared.frozen import frozen
from shared.limits import LimitExceeded
from shared.model import (
    Event,
    Message,
    Part,
    StatusUpdate,
    Task,
    TaskState,
    new_id,
    notifiable,
    utc_now,
)
from shared.ports import (
    DuplicateMessage,
    Lease,
    LoggedEvent,
    MessageKey,
    StoredTask,
    TaskExists,
    TaskNews,
    TaskPage,
    TaskQuery,
    VersionConflict,
)
from shared.store.cost import KIND_OF, TASK_IN_DOCUMENT_BYTES, Cost, logs_in_task
from shared.store.firestore_tail import PAGE_DOCUMENTS, FirestoreTail, Held, LogWatches
from shared.store.paging import Cursor, decode_token, encode_token

log = logging.getLogger("a2a.store.firestore")

TASKS = "tasks"
EVENTS = "events"
IDEMPOTENCY = "idempotency"
PUSH_CONFIGS = "pushConfigs"  # the push config store's (shared.store.firestore_push)
# One document per owner near its limit of live tasks: what its concurrent creates serialize on.
LIVE_OWNERS = "liveOwners"
# How far below A2A_MAX_LIVE_TASKS_PER_OWNER an owner's background creates are written without
# waiting on one another: a burst of more concurrent creates of one owner than this would be
# needed to pass the limit from there (as the push store's OWNER_RACE_MARGIN). Nearer, they
# serialize on the owner's document, each losing create counting again.
LIVE_RACE_MARGIN = 100

# Firestore refuses a document above 1 MiB (1,048,576 bytes, field names and document name
# included); the events of one document stay under this many bytes of JSON, which leaves room
# for the other fields.
EVENT_DOCUMENT_BUDGET = 1_000_000
# Firestore takes at most 10 MiB in one request (a commit's batch), its emulator 4 MiB (its
# gRPC message limit; above it the client library retries for a minute): the events and the
# task of one commit stay under the smaller, so what works on the emulator works deployed.
COMMIT_BUDGET = 4_000_000

# Events and push configs expire this many retentions after their last write (see above).
LOG_SLACK = 1.5
# Writes in one batch at most (Firestore's limit), when a log's expiry is refreshed.
_BATCH_WRITES = 500
# A task's batch is retried as the client library retries a Commit (throttled, unavailable),
# and also when Firestore cancelled the call on its side (CANCELLED: now and then, on the
# emulator and in Cloud Functions, googleapis/nodejs-firestore#2167), which the library
# does not retry. A batch applied all the same fails again on its own writes, and the store
# recognises it by its commitId (`_ours`): a retry never writes a commit twice.
COMMIT_RETRY = google_retry.Retry(
    predicate=google_retry.if_exception_type(
        google_errors.ResourceExhausted, google_errors.ServiceUnavailable, google_errors.Cancelled
    ),
    initial=0.1,
    maximum=60.0,
    multiplier=1.3,
    timeout=60.0,
)

# What a task document's `state` is while the task is live (not terminal).
_LIVE_STATES = [state.value for state in TaskState if not state.terminal]
# A count aggregation is billed one read per batch of up to this many index entries.
_COUNT_ENTRIES_PER_READ = 1000

_MODEL_OF: dict[str, type[Event]] = {kind: model for model, kind in KIND_OF.items()}


def document_id(*names: str) -> str:
    """The document id of what `names` name (owner and task id, say): a hash, so it has a
    fixed length and no `/`, and JSON keeps ("ab", "c") and ("a", "bc") apart."""
    return hashlib.sha256(json.dumps(names).encode()).hexdigest()


@frozen
class _Revision:
    """StoredTask.token: the update time a commit must find, bound to whom it was issued."""

    owner: str
    task_id: str
    update_time: datetime
    # The document's `log` as read: the events of the task's latest commits, which the next
    # commit writes again with its own (or moves into event documents). Never left out: a
    # commit from a revision without it would write the log without them.
    log: tuple[str, ...]
    log_expires: datetime | None = None  # the earliest expiry of the task's events and configs


class FirestoreTaskStore:
    def __init__(
        self,
        project: str | None,
        *,
        database: str = "(default)",
        retention_days: float = 30,
        task_budget: int = TASK_IN_DOCUMENT_BYTES,
        part_limit: int = 900_000,
        tail: Literal["listener", "polling"] = "listener",
    ) -> None:
        """A store on `project`'s `database` (the emulator when FIRESTORE_EMULATOR_HOST is set;
        no project: the one the runtime's credentials belong to).

        `task_budget` is how many bytes of task JSON the task document keeps before history
        and artifacts are read from the log instead; `part_limit` the largest part accepted;
        `tail` how tails follow a log: a snapshot listener (one per task, shared by its tails:
        `shared.store.firestore_tail`), or polling with backoff.
        """
        self._client = firestore.Client(project=project, database=database)
        self.retention = timedelta(days=retention_days)
        self.log_retention = self.retention * LOG_SLACK
        self._task_budget = task_budget
        self._part_limit = part_limit
        self.cost = Cost()
        # Tails share one listener per task (None: they poll).
        listen = tail == "listener"
        self.watches = LogWatches(self.task_ref, _held, self.cost) if listen else None

    @property
    def client(self) -> firestore.Client:
        """The Firestore client, for stores of the task's subcollections to share."""
        return self._client

    def task_ref(self, owner: str, task_id: str) -> Any:
        """The owner's task document (its subcollections hold the task's events and configs)."""
        return self._client.collection(TASKS).document(document_id(owner, task_id))

    def get(self, owner: str, task_id: str) -> StoredTask | None:
        snapshot = self.task_ref(owner, task_id).get()
        self.cost.add(reads=1)
        if not snapshot.exists or snapshot.get("owner") != owner:
            return None
        return self._stored(snapshot)

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
        ids.require(task.id, "task id")
        ids.require(task.context_id, "context id")

        def create(room: Any) -> StoredTask:
            return self._create(
                owner,
                task,
                events,
                dialect=dialect,
                message_key=message_key,
                lease=lease,
                room=room,
            )

        if live_limit is None:
            return create(None)
        try:
            return retry_on_conflict(
                lambda: create(self._live_room(owner, live_limit)), subject=f"task {task.id}"
            )
        except LiveTaskQuotaError:
            # A resend of the message that made one of the live tasks gets that task, as a
            # create without a limit would (the refusal is read for it, never the others).
            if message_key is not None and message_key.recorded_by(owner, task.id):
                if self.get(owner, task.id) is not None:
                    raise DuplicateMessage(task.id) from None
            else:
                self._raise_if_duplicate(owner, message_key)
            raise

    def _live_room(self, owner: str, limit: int) -> Any:
        """None when the owner's live tasks are far below `limit` (LIVE_RACE_MARGIN): no burst
        of concurrent creates smaller than that can pass it, and they need not wait on one
        another. Nearer, the owner's `liveOwners` document as read before its live tasks are
        counted again, which the create's batch updates under a precondition on that read: of
        concurrent creates that counted alike, one commits and the others count again. Raises
        LiveTaskQuotaError at the limit."""
        live = self.live_tasks(owner, limit)
        if live >= limit:
            raise LiveTaskQuotaError(limit)
        if live + LIVE_RACE_MARGIN < limit:
            return None
        ref = self._client.collection(LIVE_OWNERS).document(document_id(owner))
        snapshot = ref.get()
        self.cost.add(reads=1)
        if not snapshot.exists:
            # Made once an owner (a create in the batch would fail as the task's own create
            # does, AlreadyExists, and read as a taken id): then read again.
            ref.set(
                {"creates": 0, "expireAt": utc_now() + self.log_retention},
                merge=True,
                retry=COMMIT_RETRY,
            )
            self.cost.add(writes=1)
            raise VersionConflict(owner)
        if self.live_tasks(owner, limit) >= limit:
            raise LiveTaskQuotaError(limit)
        return snapshot

    def _create(
        self,
        owner: str,
        task: Task,
        events: Sequence[Event],
        *,
        dialect: str,
        message_key: MessageKey | None,
        lease: Lease | None,
        room: Any,
    ) -> StoredTask:
        encoded = self._encode_events(events)
        text, size = self._task_text(task)
        now = utc_now()
        stored = StoredTask(
            task, owner, 1, len(events), dialect, now, now, lease, push_configs=False, size=size
        )
        commit_id = new_id()
        log_expires = now + self.log_retention
        # Written here only: commits leave it to the push config store.
        fields = {**self._task_fields(stored, text, commit_id, log_expires), "pushConfigs": False}
        self._check_size(task.id, text, encoded)
        batch = self._client.batch()
        # The log's first events in the task's own document while they fit (one write in
        # all), else in event documents.
        in_task = logs_in_task(_utf8_size(text), sum(map(_utf8_size, encoded)))
        fields["log"] = encoded if in_task else []
        batch.create(self.task_ref(owner, task.id), fields)
        if not in_task:
            self._append(batch, stored, 1, encoded)
        self._claim(batch, owner, message_key, task.id, now)
        if room is not None:
            # No create of the owner's committed since `room` was read and its live tasks
            # counted: else this batch fails, and the create counts again.
            batch.update(
                room.reference,
                {"creates": firestore.Increment(1), "expireAt": log_expires},
                option=self._client.write_option(last_update_time=room.update_time),
            )
        try:
            results = batch.commit(retry=COMMIT_RETRY)
        except (google_errors.FailedPrecondition, google_errors.Aborted):
            if room is None:
                raise
            raise VersionConflict(task.id) from None
        except google_errors.AlreadyExists:
            ours = self._ours(owner, task.id, commit_id, log_expires)
            if ours is not None:
                return replace(stored, token=ours)
            if message_key is not None and message_key.recorded_by(owner, task.id):
                raise DuplicateMessage(task.id) from None  # its task: the first send's
            self._raise_if_duplicate(owner, message_key)
            raise TaskExists(task.id) from None
        self.cost.add(writes=len(results))
        written = tuple(fields["log"])
        revision = _Revision(owner, task.id, results[0].update_time, written, log_expires)
        return replace(stored, token=revision)

    def commit(
        self,
        current: StoredTask,
        task: Task,
        events: Sequence[Event],
        *,
        message_key: MessageKey | None = None,
    ) -> StoredTask:
        revision = current.token
        # A snapshot this store did not issue for this owner and task (another owner's, or
        # made up) cannot prove what it read: the caller must re-read.
        if (
            not isinstance(revision, _Revision)
            or revision.owner != current.owner
            or revision.task_id != task.id
        ):
            raise VersionConflict(task.id)
        encoded = self._encode_events(events)
        text, size = self._task_text(task)
        now = utc_now()
        new = replace(
            current,
            task=task,
            version=current.version + 1,
            last_seq=current.last_seq + len(events),
            updated_at=now,
            size=size,
        )
        commit_id = new_id()
        log_expires = revision.log_expires
        if log_expires is None or log_expires < now + self.retention:
            # The task will outlive its oldest events and configs: write them again first (a
            # commit that then loses its race has only made them live longer).
            log_expires = now + self.log_retention
            self._refresh_log(current.owner, task.id, log_expires)
        fields = self._task_fields(new, text, commit_id, log_expires)
        # A config put since `current` was read makes this batch lose its race, so a commit
        # that lands knows whether the task has configs. Only such tasks have the field: the
        # news sweep's query finds no other.
        if current.push_configs and notifiable(events):
            fields["pushNewsAt"] = now
        # The document's log (events `tail_first`..current.last_seq) with this commit's events
        # after it: kept there while they fit beside the task (one write); else the old ones
        # are moved into event documents in this batch and the document keeps this commit's
        # (what a listener of it has seen stays out of its way), or, these too big, all are.
        old = list(revision.log)
        tail = [*old, *encoded]
        tail_first = current.last_seq - len(old) + 1
        self._check_size(task.id, text, tail)
        text_bytes = _utf8_size(text)
        moved: list[str] = []
        if logs_in_task(text_bytes, sum(map(_utf8_size, tail))):
            fields["log"] = tail
        elif old and logs_in_task(text_bytes, sum(map(_utf8_size, encoded))):
            fields["log"], moved = encoded, old
        else:
            fields["log"], moved = [], tail
        batch = self._client.batch()
        batch.update(
            self.task_ref(current.owner, task.id),
            fields,
            option=self._client.write_option(last_update_time=revision.update_time),
        )
        self._append(batch, new, tail_first, moved)
        self._claim(batch, current.owner, message_key, task.id, now)
        try:
            results = batch.commit(retry=COMMIT_RETRY)
        except (
            google_errors.FailedPrecondition,
            google_errors.AlreadyExists,
            google_errors.Aborted,
        ) as exc:
            ours = self._ours(current.owner, task.id, commit_id, log_expires)
            if ours is not None:
                return replace(new, token=ours)
            # Aborted: the write met another on the same documents (contention; the emulator
            # says "Transaction lock timeout") and was not applied. The writer re-reads and
            # decides again, as after a lost race: a cancel beside a turn's commit never
            # answers -32603 (seen in `make soak`).
            if isinstance(exc, google_errors.FailedPrecondition | google_errors.Aborted):
                raise VersionConflict(task.id) from None
            self._raise_if_duplicate(current.owner, message_key)
            # Not the message: a concurrent commit took these sequence numbers first.
            raise VersionConflict(task.id) from None
        self.cost.add(writes=len(results))
        update_time = results[0].update_time
        written = tuple(fields["log"])
        revision = _Revision(current.owner, task.id, update_time, written, log_expires)
        return replace(new, token=revision)

    def _ours(
        self, owner: str, task_id: str, commit_id: str, log_expires: datetime
    ) -> _Revision | None:
        """After a batch failed on a document that exists, or a changed update time: whether
        the task document holds this very commit (the client library retried a batch that had
        succeeded): its revision, else None."""
        snapshot = self.task_ref(owner, task_id).get()
        self.cost.add(reads=1)
        if not snapshot.exists or (snapshot.to_dict() or {}).get("commitId") != commit_id:
            return None
        log.info("task %s: a retried commit had succeeded already", task_id)
        written = tuple(snapshot.get("log") or ())
        return _Revision(owner, task_id, snapshot.update_time, written, log_expires)

    def _refresh_log(self, owner: str, task_id: str, until: datetime) -> None:
        """Make the task's events and push configs expire at `until`."""
        task = self.task_ref(owner, task_id)
        events = task.collection(EVENTS).where(filter=FieldFilter("owner", "==", owner))
        refs = [s.reference for s in self._run(events.select(["owner"]))]
        refs += [s.reference for s in self._run(task.collection(PUSH_CONFIGS).select(["owner"]))]
        for start in range(0, len(refs), _BATCH_WRITES):
            batch = self._client.batch()
            for ref in refs[start : start + _BATCH_WRITES]:
                batch.update(ref, {"expireAt": until})
            self.cost.add(writes=len(batch.commit(retry=COMMIT_RETRY)))

    def _check_size(self, task_id: str, text: str, encoded: list[str]) -> None:
        """Refuse a commit too big for one request, before anything is written: the task's
        JSON `text` and the events it writes (the task document's log included)."""
        size = _utf8_size(text) + sum(map(_utf8_size, encoded))
        if size > COMMIT_BUDGET:
            raise LimitExceeded(
                f"task {task_id}: a commit of {size} bytes of events is more than one Firestore "
                f"request carries ({COMMIT_BUDGET} bytes); commit the "
                "events in smaller steps (A2A_COMMIT_INTERVAL_SECONDS shorter, artifacts in "
                "chunks)"
            )

    def find_message(self, owner: str, key: MessageKey) -> str | None:
        recorded = self._recorded(owner, key)
        if recorded is not None:
            return recorded
        derived = key.task_id(owner)  # no record: the task that is its record, if any
        task = self.task_ref(owner, derived).get()
        self.cost.add(reads=1)
        return derived if task.exists and task.get("owner") == owner else None

    def events(self, owner: str, task_id: str, after_seq: int = 0) -> list[LoggedEvent]:
        return self._read_log(owner, task_id, after_seq, None)

    def tail(self, owner: str, task_id: str, after_seq: int = 0) -> FirestoreTail:
        return FirestoreTail(owner, task_id, after_seq, read=self._log_page, watches=self.watches)

    def _log_page(self, owner: str, task_id: str, after_seq: int) -> list[LoggedEvent]:
        """The events after `after_seq` of the first PAGE_DOCUMENTS event documents, and the
        task document's log when they reach it."""
        return self._read_log(owner, task_id, after_seq, PAGE_DOCUMENTS)

    def _read_log(
        self, owner: str, task_id: str, after_seq: int, documents: int | None
    ) -> list[LoggedEvent]:
        """The task's events after `after_seq`: its document read first (one read), then, when
        it no longer holds them all, the event documents before its log (at most `documents`
        of them)."""
        snapshot = self.task_ref(owner, task_id).get(field_paths=["owner", "lastSeq", "log"])
        self.cost.add(reads=1)
        fields = (snapshot.to_dict() or {}) if snapshot.exists else {}
        if fields.get("owner") != owner:
            return []
        return self._log(owner, task_id, fields, after_seq, documents)

    def _log(
        self,
        owner: str,
        task_id: str,
        fields: dict[str, Any],
        after_seq: int,
        documents: int | None = None,
    ) -> list[LoggedEvent]:
        """The events after `after_seq` of the task whose document's `fields` were read: those
        its `log` holds, and those before it from its event documents (at most `documents` of
        them: then, short of the log, none of it).

        One version: event documents are only ever created, each by the batch that emptied
        the document's log of its events, so those before the log this document holds are
        all in event documents by now, and those after it (later commits') are left out."""
        after_seq = max(after_seq, 0)
        held = _held_log(fields, after_seq)
        found: list[LoggedEvent] = []
        if after_seq < held.first - 1:
            query = self._log_query(owner, task_id, after_seq, before=held.first)
            if documents is not None:
                query = query.limit(documents)
            found = [e for snapshot in self._run(query) for e in _logged(snapshot, after_seq)]
            if found and found[-1].seq < held.first - 1:
                return found  # a page: the rest at the next read
        return found + [logged for logged, _ in held.events]

    def expired_leases(
        self, before: datetime, limit: int, after: StoredTask | None = None
    ) -> list[StoredTask]:
        # One range on one field: Firestore's automatic single-field index serves it (ties go
        # by document name, which every index ends with).
        query = (
            self._client.collection(TASKS)
            .where(filter=FieldFilter("lease.expires", "<", before))
            .order_by("lease.expires")
            .order_by("__name__")
            .limit(limit)
        )
        if after is not None and after.lease is not None and after.lease.expires is not None:
            query = query.start_after(
                [after.lease.expires, self.task_ref(after.owner, after.task.id)]
            )
        return [self._stored(snapshot) for snapshot in self._run(query)]

    def push_news(
        self, since: datetime, before: datetime, limit: int, after: TaskNews | None = None
    ) -> list[TaskNews]:
        # As expired_leases: one field's automatic index, which holds only the tasks with it;
        # the fields the check reads, not the task (a big one is rebuilt from its log).
        query = (
            self._client.collection(TASKS)
            .where(filter=FieldFilter("pushNewsAt", ">=", since))
            .where(filter=FieldFilter("pushNewsAt", "<", before))
            .order_by("pushNewsAt")
            .order_by("__name__")
            .select(["owner", "taskId", "lastSeq", "pushNewsAt"])
            .limit(limit)
        )
        if after is not None:
            query = query.start_after([after.at, self.task_ref(after.owner, after.task_id)])
        return [
            TaskNews(s.get("owner"), s.get("taskId"), s.get("lastSeq"), s.get("pushNewsAt"))
            for s in self._run(query)
        ]

    def _log_query(self, owner: str, task_id: str, after_seq: int, *, before: int) -> Any:
        """The event documents holding events after `after_seq` and before `before` (where
        the task document's log starts), oldest first."""
        return (
            self.task_ref(owner, task_id)
            .collection(EVENTS)
            .where(filter=FieldFilter("owner", "==", owner))
            .where(filter=FieldFilter("last", ">", after_seq))
            .where(filter=FieldFilter("last", "<", before))
            .order_by("last")
        )

    def _stored(self, snapshot: Any) -> StoredTask:
        owner: str = snapshot.get("owner")
        fields = snapshot.to_dict()
        text: str = snapshot.get("task")
        task = model_json.decode(Task, text)
        size = None
        if snapshot.get("inLog"):
            task = self._rebuild(owner, task, fields)
        else:  # the document holds the whole history (older ones with nulls: a loose bound)
            size = _utf8_size(text)
        return StoredTask(
            task,
            owner,
            snapshot.get("version"),
            snapshot.get("lastSeq"),
            snapshot.get("dialect"),
            snapshot.get("createdAt"),
            snapshot.get("updatedAt"),
            _decode_lease(fields.get("lease")),
            tuple(fields.get("pending") or ()),  # absent in documents stored before it
            push_configs=fields.get("pushConfigs", True),  # absent before it: unknown
            size=size,
            token=_Revision(
                owner,
                task.id,
                snapshot.update_time,
                tuple(fields.get("log") or ()),
                fields.get("logExpireAt"),
            ),
        )

    def _rebuild(self, owner: str, outline: Task, fields: dict[str, Any]) -> Task:
        """History and artifacts of a task too big for its document, folded from its log as
        the document's `fields` hold it (`_log`: the version that document reports, never a
        later commit's events).

        The fold starts from the outline without a status message: the log's first status
        update must not move a later message into history. The stored status is the truth.
        """
        start = replace(outline, status=replace(outline.status, message=None))
        logged = self._log(owner, outline.id, fields, 0)
        folded = lifecycle.apply_all(start, (e.event for e in logged))
        return replace(folded, status=outline.status)

    def _task_text(self, task: Task) -> tuple[str, int | None]:
        """The task's JSON as its document keeps it, and its size when that is the whole task
        (None: the task outgrew `task_budget`, and the document keeps only its status and
        metadata, `inLog`)."""
        data = model_json.encode(task)
        if len(data) > self._task_budget:
            return model_json.encode(replace(task, history=(), artifacts=())).decode(), None
        return data.decode(), len(data)

    def _task_fields(
        self, stored: StoredTask, text: str, commit_id: str, log_expires: datetime
    ) -> dict[str, Any]:
        """The task document's fields: `stored`, its task's JSON `text` (`_task_text`)."""
        task = stored.task
        return {
            "owner": stored.owner,
            "taskId": task.id,
            "contextId": task.context_id,
            "state": task.status.state.value,
            "statusTimestamp": task.status.timestamp,
            "version": stored.version,
            "lastSeq": stored.last_seq,
            "dialect": stored.dialect,
            "createdAt": stored.created_at,
            "updatedAt": stored.updated_at,
            "expireAt": stored.updated_at + self.retention,
            "task": text,
            "inLog": stored.size is None,  # `text` is the outline: the rest is in the log
            "lease": _encode_lease(stored.lease),
            "pending": list(stored.pending),
            "commitId": commit_id,
            "logExpireAt": log_expires,
        }

    def _encode_events(self, events: Sequence[Event]) -> list[str]:
        """The events as stored, refusing any that no event document could hold."""
        encoded = []
        for event in events:
            for field, parts in _parts_of(event):
                for index, part in enumerate(parts):
                    size = len(model_json.encode(part))
                    if size > self._part_limit:
                        raise InvalidParamsError(
                            f"a part of {size} bytes is larger than this store's limit of "
                            f"{self._part_limit} bytes per part",
                            field=f"{field}[{index}]",
                        )
            text = _encode_event(event)
            size = _utf8_size(text)
            if size > EVENT_DOCUMENT_BUDGET:
                raise InvalidParamsError(
                    f"an event of {size} bytes is larger than this store's limit of "
                    f"{EVENT_DOCUMENT_BUDGET} bytes per message, status or artifact update",
                    field=KIND_OF[type(event)],
                )
            encoded.append(text)
        return encoded

    def _append(self, batch: Any, stored: StoredTask, first_seq: int, encoded: list[str]) -> None:
        """Add the event documents of one commit to its batch."""
        log = self.task_ref(stored.owner, stored.task.id).collection(EVENTS)
        for first, chunk in _pack(first_seq, encoded):
            batch.create(
                log.document(f"{first:010d}"),
                {
                    "owner": stored.owner,
                    "first": first,
                    "last": first + len(chunk) - 1,
                    "events": chunk,
                    "expireAt": stored.updated_at + self.log_retention,
                },
            )

    def _claim(
        self, batch: Any, owner: str, key: MessageKey | None, task_id: str, now: datetime
    ) -> None:
        if key is None:
            return
        ids.require(key.message_id, "message id")
        if key.recorded_by(owner, task_id):
            return  # the task document is the record
        # A record that named a task the client moved on from is replaced, unconditionally
        # (ports.MessageKey.replaces).
        write = batch.create if key.replaces is None else batch.set
        write(
            self._message_ref(owner, key),
            {
                "owner": owner,
                "messageId": key.message_id,
                "digest": key.digest,
                "taskId": task_id,
                "expireAt": now + self.retention,
            },
        )

    def _raise_if_duplicate(self, owner: str, key: MessageKey | None) -> None:
        """After a batch failed on an existing document: was it this message's record? (Not
        when the batch replaced the record.)"""
        if key is None or key.replaces is not None:
            return
        task_id = self._recorded(owner, key)
        if task_id is not None:
            raise DuplicateMessage(task_id)

    def _recorded(self, owner: str, key: MessageKey) -> str | None:
        """The task the message's own record names (one read), if it has one."""
        snapshot = self._message_ref(owner, key).get()
        self.cost.add(reads=1)
        if not snapshot.exists or snapshot.get("owner") != owner:
            return None
        task_id: str = snapshot.get("taskId")
        return task_id

    def _message_ref(self, owner: str, key: MessageKey) -> Any:
        name = document_id(owner, key.message_id, key.digest)
        return self._client.collection(IDEMPOTENCY).document(name)

    def _run(self, query: Any) -> list[Any]:
        snapshots = list(query.stream())
        self.cost.add(reads=max(1, len(snapshots)))
        return snapshots

    def _count(self, query: Any) -> int:
        total: int = query.count().get()[0][0].value
        self.cost.add(reads=max(1, math.ceil(total / _COUNT_ENTRIES_PER_READ)))
        return total

    def live_tasks(self, owner: str, limit: int) -> int:
        # Equalities only (`in` is a disjunction of them): served by merging single-field
        # indexes, no composite index of its own.
        live = self._client.collection(TASKS).where(filter=FieldFilter("owner", "==", owner))
        live = live.where(filter=FieldFilter("state", "in", _LIVE_STATES))
        return self._count(live.limit(limit))

    # Last in the class: below it, `list` in an annotation would mean this method.
    def list(self, owner: str, query: TaskQuery) -> TaskPage:
        cursor = decode_token(query)
        tasks = self._client.collection(TASKS)
        matching = tasks.where(filter=FieldFilter("owner", "==", owner))
        if query.context_id is not None:
            matching = matching.where(filter=FieldFilter("contextId", "==", query.context_id))
        if query.state is not None:
            matching = matching.where(filter=FieldFilter("state", "==", query.state.value))
        if query.status_after is not None:
            matching = matching.where(
                filter=FieldFilter("statusTimestamp", ">", query.status_after)
            )
        # The document id (owner and task id) breaks ties between equal timestamps, so a
        # cursor, which holds the task id, is exact.
        matching = matching.order_by(
            "statusTimestamp", direction=firestore.Query.DESCENDING
        ).order_by("__name__", direction=firestore.Query.DESCENDING)
        page = matching
        if cursor is not None:
            page = page.start_after(
                {
                    "statusTimestamp": cursor.timestamp,
                    "__name__": self.task_ref(owner, cursor.task_id),
                }
            )
        total = self._count(matching)
        snapshots = self._run(page.limit(query.page_size))
        stored = [self._stored(s) for s in snapshots]
        # The count, not a read one task ahead, tells whether another page follows. A task
        # inserted meanwhile can at worst make the next page empty, never hide a task.
        returned = (cursor.returned if cursor else 0) + len(stored)
        token = ""
        if len(stored) == query.page_size and returned < total:
            last = stored[-1].task
            token = encode_token(query, Cursor(last.status.timestamp, last.id, returned))
        return TaskPage(stored, token, total)


def _pack(first_seq: int, encoded: list[str]) -> list[tuple[int, list[str]]]:
    """Consecutive events grouped into documents under the budget, with each one's first seq."""
    documents: list[tuple[int, list[str]]] = []
    chunk: list[str] = []
    size = 0
    for text in encoded:
        length = _utf8_size(text)
        if chunk and size + length > EVENT_DOCUMENT_BUDGET:
            documents.append((first_seq, chunk))
            first_seq, chunk, size = first_seq + len(chunk), [], 0
        chunk.append(text)
        size += length
    if chunk:
        documents.append((first_seq, chunk))
    return documents


def _utf8_size(text: str) -> int:
    """The bytes of `text` in UTF-8, copying nothing when it is ASCII (most JSON)."""
    return len(text) if text.isascii() else len(text.encode())


def _held(snapshot: Any, owner: str, after_seq: int) -> Held | None:
    """What a snapshot of the owner's task document holds of the task's log (None: no such
    task), its events after `after_seq` (a listener's: `firestore_tail.LogWatch`)."""
    fields = (snapshot.to_dict() or {}) if snapshot.exists else {}
    if fields.get("owner") != owner:
        return None
    return _held_log(fields, after_seq)


def _held_log(fields: dict[str, Any], after_seq: int) -> Held:
    """The log a task document's `fields` hold: its events `first`..`lastSeq`, those before in
    event documents. (A document without `log`, written before documents kept one, holds
    none: `first` is past `lastSeq`.)"""
    texts: list[str] = fields.get("log") or []
    last: int = fields["lastSeq"]
    first = last - len(texts) + 1
    events = [
        (LoggedEvent(seq, _decode_event(text)), _utf8_size(text))
        for seq, text in enumerate(
            texts[max(after_seq - first + 1, 0) :], start=max(first, after_seq + 1)
        )
    ]
    return Held(first, last, events)


def _logged(snapshot: Any, after_seq: int) -> list[LoggedEvent]:
    """The events of one event document with a sequence number above `after_seq`."""
    first: int = snapshot.get("first")
    return [
        LoggedEvent(first + offset, _decode_event(text))
        for offset, text in enumerate(snapshot.get("events"))
        if first + offset > after_seq
    ]


def _parts_of(event: Event) -> list[tuple[str, tuple[Part, ...]]]:
    """The parts an event carries, with the field that holds them."""
    if isinstance(event, Message):
        return [("message.parts", event.parts)]
    if isinstance(event, StatusUpdate):
        message = event.status.message
        return [] if message is None else [("status.message.parts", message.parts)]
    return [("artifact.parts", event.artifact.parts)]


def _encode_lease(lease: Lease | None) -> dict[str, Any] | None:
    if lease is None:
        return None
    return {
        "turn": lease.turn,
        "holder": lease.holder,
        "expires": lease.expires,
        "attempt": lease.attempt,
        "final": lease.final,
        "messageId": lease.message_id,
        "redrives": lease.redrives,
        "outbox": lease.outbox,
        "inline": lease.inline,
    }


def _decode_lease(fields: dict[str, Any] | None) -> Lease | None:
    # Documents written before leases existed have no field: no lease.
    if not fields:
        return None
    return Lease(
        turn=fields["turn"],
        holder=fields["holder"],
        expires=fields["expires"],
        attempt=fields["attempt"],
        final=fields["final"],
        # Leases stored before these fields existed have none.
        message_id=fields.get("messageId", ""),
        redrives=fields.get("redrives", 0),
        outbox=fields.get("outbox", False),
        inline=fields.get("inline", False),
    )


def _encode_event(event: Event) -> str:
    return f'{{"kind":"{KIND_OF[type(event)]}","event":{model_json.encode(event).decode()}}}'


def _decode_event(text: str) -> Event:
    stored = json.loads(text)
    event: Event = model_json.from_dict(_MODEL_OF[stored["kind"]], stored["event"])
    return event
