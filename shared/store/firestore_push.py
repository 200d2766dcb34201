"""Push configs in Firestore: `tasks/{docId}/pushConfigs/{document_id(configId)}`.

The task document is the owner's (its id derives from owner and task id: shared.store.
firestore), so a config id is scoped per task and owner by where the document lives; the
document records `owner`, `taskId` and `configId` too, and every read checks the owner.
Each document holds the config as JSON, the dialect it was made in, the last event sequence
delivered to it (`delivered`), the sending lease (`sendingHolder`, `sendingUntil`: one
delivery at a time, taken with an update-time precondition; only its holder records progress
and gives it back, checked the same way), `createdAt` (lists are oldest
first) and `expireAt` for the TTL policy (as the task's events: they live as long as the
task, shared.store.firestore). It shares the task store's client and cost counter.

A new config sets `pushConfigs` on its task document in the same batch, without a
precondition: a commit whose snapshot was read before it then fails its own update-time
precondition and re-reads, so every commit after the config exists sees the flag, and a
commit that does not see it has no config to notify (shared.push_notify skips the read).
The flag is never cleared: a task whose configs were deleted reads an empty list.

A put given a limit reads the task document, then counts the task's configs, and writes a
new config's batch with a precondition on that read's update time: every new config changes
the task document (`pushConfigsAdded`, a counter, beside the flag), so of concurrent puts
that counted the same configs one commits and the others re-read (as a task commit racing it
does), and the limit holds. That costs what the service's list before the put did: the
task's document and its configs read, two writes.

With an `owner_limit` (A2A_MAX_PUSH_CONFIGS_PER_OWNER), a new config is counted against the
owner's configs on every task: one aggregation query over the collection group (`owner`
equal: its single-field index is declared in infra/firestore.indexes.json). Within
OWNER_RACE_MARGIN of the limit, the batch that writes it also writes the owner's document
(`pushOwners/{document_id(owner)}`, with a precondition on the update time read before a
second count, or none existed), so of concurrent puts of one owner that counted alike one
commits and the others count again; further below, no burst of fewer concurrent puts could
pass the limit, and they are written without waiting on one another. Configs of an expired
task count until the TTL deletes them (`expireAt`, a day after at most).

Lagging is state too: `wanted` is the newest event a delivery was asked for (raised with a
server-side maximum, so concurrent commits need no read), `sweepAt` (epoch seconds, lowered
with a server-side minimum; absent when nothing lags) when a sweep re-drives the config, found
by one collection-group query on it; `lastError` and `failedAt` record the last failed attempt;
`failures` (failed attempts in a row, across events) and `backoffUntil` (no POST before it)
are the config's back-off, cleared by any delivered event and when the config is replaced.
`end_delivery(unless_wanted=True)` keeps the lease when `wanted` passed `delivered` while the
holder sent (read, then released under a precondition on the read, which a `want` fails).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from google.api_core import exceptions as google_errors
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter
from google.cloud.firestore_v1.transforms import Maximum, Minimum

from shared import ids, model_json
from shared.conflicts import retry_on_conflict
from shared.errors import PushConfigQuotaError
from shared.model import PushConfig, utc_now
from shared.ports import StoredPushConfig, TooManyPushConfigs, VersionConflict
from shared.store.cost import Cost
from shared.store.firestore import LOG_SLACK, PUSH_CONFIGS, TASKS, document_id

# One document per owner near its limit of push configs: what its concurrent new configs
# serialize on there.
PUSH_OWNERS = "pushOwners"
# How far below its limit an owner's new configs are written without waiting on one another:
# a burst of more concurrent puts than this (an instance serves 80 requests at once as
# deployed) would be needed to pass the limit from there. Nearer, they serialize: of 50
# concurrent sends of one owner, each with a push config, every one would otherwise re-read
# and count again after each commit, and most would give up (TooManyConflicts).
OWNER_RACE_MARGIN = 100


class FirestorePushConfigStore:
    def __init__(
        self,
        client: firestore.Client,
        *,
        retention: timedelta,
        cost: Cost,
        owner_limit: int | None = None,
    ) -> None:
        self._client = client
        # As the task's events: they live as long as the task (shared.store.firestore).
        self._retention = retention * LOG_SLACK
        self.cost = cost
        self._owner_limit = owner_limit

    def _owner_count(self, owner: str) -> int:
        """The owner's configs on all its tasks; raises PushConfigQuotaError at the limit."""
        assert self._owner_limit is not None
        query = self._client.collection_group(PUSH_CONFIGS).where(
            filter=FieldFilter("owner", "==", owner)
        )
        # (The library's annotations make count() a class, not the query it returns.)
        [[counted]] = cast(Any, query.count()).get()
        self.cost.add(reads=1)  # one read a thousand index entries
        if counted.value >= self._owner_limit:
            raise PushConfigQuotaError(int(counted.value), self._owner_limit)
        return int(counted.value)

    def _owner_room(self, owner: str) -> Any:
        """None when the owner's configs are far below its limit (OWNER_RACE_MARGIN): no
        burst of concurrent puts smaller than that can pass it, and they need not wait on one
        another. Nearer, the owner's document as read before its configs are counted again,
        which the write's precondition holds. Raises PushConfigQuotaError at the limit."""
        assert self._owner_limit is not None
        if self._owner_count(owner) + OWNER_RACE_MARGIN < self._owner_limit:
            return None
        snapshot = self._client.collection(PUSH_OWNERS).document(document_id(owner)).get()
        self.cost.add(reads=1)
        self._owner_count(owner)
        return snapshot

    def require_room(self, owner: str) -> None:
        if self._owner_limit is not None:
            self._owner_count(owner)

    def _task(self, owner: str, task_id: str) -> Any:
        return self._client.collection(TASKS).document(document_id(owner, task_id))

    def _configs(self, owner: str, task_id: str) -> Any:
        return self._task(owner, task_id).collection(PUSH_CONFIGS)

    def _ref(self, owner: str, task_id: str, config_id: str) -> Any:
        return self._configs(owner, task_id).document(document_id(config_id))

    def put(
        self,
        owner: str,
        config: PushConfig,
        *,
        dialect: str,
        delivered_seq: int = 0,
        limit: int | None = None,
    ) -> StoredPushConfig:
        ids.require(config.task_id, "task id")
        ids.require(config.id, "push config id")
        return retry_on_conflict(
            lambda: self._put(owner, config, dialect, delivered_seq, limit),
            subject=f"push config {config.task_id}/{config.id}",
        )

    def _put(
        self, owner: str, config: PushConfig, dialect: str, delivered_seq: int, limit: int | None
    ) -> StoredPushConfig:
        ref = self._ref(owner, config.task_id, config.id)
        task_ref = self._task(owner, config.task_id)
        task = None
        if limit is None:
            old = self._snapshot(ref, owner)
        else:
            # The task first, then its configs: a new config written after this read flags
            # the task in its batch, so our batch's precondition on this read fails.
            task = task_ref.get()
            found = [s.to_dict() or {} for s in self._configs(owner, config.task_id).stream()]
            self.cost.add(reads=1 + max(1, len(found)))
            mine = [data for data in found if data.get("owner") == owner]
            old = next((data for data in mine if data.get("configId") == config.id), None)
            if old is None and len(mine) >= limit:
                raise TooManyPushConfigs(config.task_id, len(mine), limit)
        now = utc_now()
        delivered = int(old["delivered"]) if old else delivered_seq
        wanted = max(int(old.get("wanted", 0)), delivered) if old else delivered
        fields: dict[str, Any] = {
            "owner": owner,
            "taskId": config.task_id,
            "configId": config.id,
            "config": model_json.encode(config).decode(),
            "dialect": dialect,
            "delivered": delivered,
            "wanted": wanted,
            "lastError": firestore.DELETE_FIELD,
            "failedAt": firestore.DELETE_FIELD,
            "failures": firestore.DELETE_FIELD,  # replacing a config retries it at once
            "backoffUntil": firestore.DELETE_FIELD,
            "createdAt": old["createdAt"] if old else now,
            "expireAt": now + self._retention,
        }
        if wanted > delivered:  # lagging: replacing the config retries it at the next sweep
            fields["sweepAt"] = now.timestamp()
        stored = StoredPushConfig(config, owner, dialect, delivered, wanted)
        # Merged, so a delivery under way keeps its sending lease. A replaced config leaves
        # the count as it was, and its task was flagged when it was created.
        if old is not None or (task is not None and not task.exists):
            # (Or no task: callers check it exists, it may have expired since; no commit can
            # notify the config, and the flag would make a document of a missing task.)
            ref.set(fields, merge=True)
            self.cost.add(writes=1)
            return stored
        batch = self._client.batch()
        batch.set(ref, fields, merge=True)
        if self._owner_limit is not None:
            # Counted, then written with a precondition on the owner's document as read
            # before the count: a racing new config of the owner changed it, and this one
            # counts again.
            counted = self._owner_room(owner)
            added = {"pushConfigsAdded": firestore.Increment(1), "expireAt": fields["expireAt"]}
            if counted is None:
                pass  # far below the limit
            elif counted.exists:
                option = self._client.write_option(last_update_time=counted.update_time)
                batch.update(counted.reference, added, option=option)
            else:
                batch.create(counted.reference, added)
        # Every new config changes its task (a write that changes nothing keeps the update
        # time): of two racing for the last place, one fails the precondition on its read,
        # reads again and counts the other's config.
        flag = {"pushConfigs": True, "pushConfigsAdded": firestore.Increment(1)}
        if task is None:
            batch.update(task_ref, flag)
        else:
            option = self._client.write_option(last_update_time=task.update_time)
            batch.update(task_ref, flag, option=option)
        try:
            self.cost.add(writes=len(batch.commit()))
        except (google_errors.FailedPrecondition, google_errors.Conflict):
            # (Conflict: the owner's document, absent when read, was created since.)
            raise VersionConflict(f"{config.task_id}/{config.id}") from None
        except google_errors.NotFound:
            # No task (see above), gone since it was read, or not read (no limit).
            ref.set(fields, merge=True)
            self.cost.add(writes=1)
        return stored

    def get(self, owner: str, task_id: str, config_id: str) -> StoredPushConfig | None:
        data = self._snapshot(self._ref(owner, task_id, config_id), owner)
        return _decode(data) if data is not None else None

    def list(self, owner: str, task_id: str) -> list[StoredPushConfig]:
        # The owner is in the collection's path already; checked again on each document
        # rather than queried, which would need a composite index for nothing.
        snapshots = list(self._configs(owner, task_id).order_by("createdAt").stream())
        self.cost.add(reads=max(1, len(snapshots)))
        found = (s.to_dict() or {} for s in snapshots)
        return [_decode(data) for data in found if data.get("owner") == owner]

    def delete(self, owner: str, task_id: str, config_id: str) -> bool:
        ref = self._ref(owner, task_id, config_id)
        if self._snapshot(ref, owner) is None:
            return False
        ref.delete()
        self.cost.add(writes=1)
        return True

    def begin_delivery(
        self, owner: str, task_id: str, config_id: str, holder: str, until: datetime
    ) -> StoredPushConfig | None:
        ref = self._ref(owner, task_id, config_id)

        def attempt() -> StoredPushConfig | None:
            snapshot = ref.get()
            self.cost.add(reads=1)
            data = (snapshot.to_dict() or {}) if snapshot.exists else {}
            if data.get("owner") != owner:
                return None
            taken_until = data.get("sendingUntil")
            if data.get("sendingHolder") and taken_until is not None and taken_until > utc_now():
                return None
            try:
                ref.update(
                    {"sendingHolder": holder, "sendingUntil": until},
                    option=self._client.write_option(last_update_time=snapshot.update_time),
                )
            except google_errors.FailedPrecondition:
                # Another write came between our read and ours (a commit's `want`, or
                # another delivery taking the lease): read again and see which.
                raise VersionConflict(f"{task_id}/{config_id}") from None
            self.cost.add(writes=1)
            return _decode(data)

        return retry_on_conflict(attempt, subject=f"push config {task_id}/{config_id}")

    def delivered(self, owner: str, task_id: str, config_id: str, holder: str, seq: int) -> None:
        def fields(data: dict[str, Any]) -> dict[str, Any]:
            # The webhook took one: it backs off no more.
            taken = {
                "delivered": seq,
                "failures": firestore.DELETE_FIELD,
                "backoffUntil": firestore.DELETE_FIELD,
            }
            if seq < int(data.get("wanted", 0)):
                return taken
            caught_up = firestore.DELETE_FIELD
            return {**taken, "sweepAt": caught_up, "lastError": caught_up, "failedAt": caught_up}

        self._as_holder(owner, task_id, config_id, holder, fields)

    def end_delivery(
        self, owner: str, task_id: str, config_id: str, holder: str, *, unless_wanted: bool = False
    ) -> StoredPushConfig | None:
        # Read, then released under a precondition on that read: a `want` written in between
        # changes the document, so the release fails, reads again and sees it.
        def fields(data: dict[str, Any]) -> dict[str, Any] | None:
            if unless_wanted and int(data.get("wanted", 0)) > int(data["delivered"]):
                return None  # kept: the holder sends what was wanted meanwhile
            return {"sendingHolder": None, "sendingUntil": None}

        kept = self._as_holder(owner, task_id, config_id, holder, fields)
        return _decode(kept) if kept is not None else None

    def want(self, owner: str, task_id: str, config_id: str, seq: int, sweep_at: datetime) -> None:
        ref = self._ref(owner, task_id, config_id)
        try:
            # Server-side transforms: commits racing on one config need neither a read nor
            # a precondition. The path derives from the owner, so this is the owner's config.
            ref.update({"wanted": Maximum(seq), "sweepAt": Minimum(sweep_at.timestamp())})
        except google_errors.NotFound:
            return  # deleted: nothing to deliver
        self.cost.add(writes=1)

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
        fields: dict[str, Any] = {
            "failures": firestore.Increment(1),
            "backoffUntil": backoff_until if backoff_until is not None else firestore.DELETE_FIELD,
        }
        if retry_at is not None:
            fields["sweepAt"] = retry_at.timestamp()
        else:
            fields.update(sweepAt=firestore.DELETE_FIELD, lastError=error, failedAt=at)
        self._as_holder(owner, task_id, config_id, holder, lambda data: fields)

    def lagging(
        self, now: datetime, limit: int, after: StoredPushConfig | None = None
    ) -> builtins.list[StoredPushConfig]:
        query = (
            self._client.collection_group(PUSH_CONFIGS)
            .where(filter=FieldFilter("sweepAt", "<=", now.timestamp()))
            .order_by("sweepAt")
            .order_by("__name__")  # ties by document path, which every index ends with
            .limit(limit)
        )
        if after is not None and after.sweep_at is not None:
            ref = self._ref(after.owner, after.config.task_id, after.config.id)
            # The float it was stored as: a datetime from it gives the same float back.
            query = query.start_after([after.sweep_at.timestamp(), ref])
        snapshots = list(query.stream())
        self.cost.add(reads=max(1, len(snapshots)))
        found = []
        for snapshot in snapshots:
            data = snapshot.to_dict() or {}
            stored = _decode(data)
            if stored.wanted_seq > stored.delivered_seq:
                found.append(replace(stored, sweep_at=datetime.fromtimestamp(data["sweepAt"], UTC)))
                continue
            # Wanted after it was delivered (a late commit callback): nothing lags. Unless
            # written since, which a precondition on this read tells.
            try:
                snapshot.reference.update(
                    {"sweepAt": firestore.DELETE_FIELD},
                    option=self._client.write_option(last_update_time=snapshot.update_time),
                )
                self.cost.add(writes=1)
            except google_errors.FailedPrecondition:
                pass
        return found

    def _as_holder(
        self,
        owner: str,
        task_id: str,
        config_id: str,
        holder: str,
        fields: Callable[[dict[str, Any]], dict[str, Any] | None],
    ) -> dict[str, Any] | None:
        """Update the config (the `fields` of what it holds) while `holder` holds its sending
        lease, else do nothing: read the holder, then write with a precondition on that read's
        update time, so a takeover in between fails the write. One read and one write; another
        lost race re-reads. `fields` answering None writes nothing: what was read is answered
        then (else None)."""
        ref = self._ref(owner, task_id, config_id)

        def attempt() -> dict[str, Any] | None:
            snapshot = ref.get()
            self.cost.add(reads=1)
            data = (snapshot.to_dict() or {}) if snapshot.exists else {}
            if data.get("owner") != owner or data.get("sendingHolder") != holder:
                return None  # gone, or a stale delivery whose lease was taken over
            update = fields(data)
            if update is None:
                return data
            try:
                ref.update(
                    update,
                    option=self._client.write_option(last_update_time=snapshot.update_time),
                )
            except google_errors.FailedPrecondition:
                raise VersionConflict(f"{task_id}/{config_id}") from None
            self.cost.add(writes=1)
            return None

        return retry_on_conflict(attempt, subject=f"push config {task_id}/{config_id}")

    def _snapshot(self, ref: Any, owner: str) -> dict[str, Any] | None:
        """The document's fields when it is the owner's config, else None."""
        snapshot = ref.get()
        self.cost.add(reads=1)
        data = (snapshot.to_dict() or {}) if snapshot.exists else None
        return data if data is not None and data.get("owner") == owner else None


def _instant(value: Any) -> datetime | None:
    """A stored time as a plain datetime (Firestore answers its own subclass)."""
    return datetime.fromtimestamp(value.timestamp(), UTC) if value is not None else None


def _decode(data: dict[str, Any]) -> StoredPushConfig:
    return StoredPushConfig(
        model_json.decode(PushConfig, data["config"]),
        str(data["owner"]),
        str(data["dialect"]),
        int(data["delivered"]),
        int(data.get("wanted", data["delivered"])),
        data.get("lastError"),
        _instant(data.get("failedAt")),
        failures=int(data.get("failures", 0)),
        backoff_until=_instant(data.get("backoffUntil")),
    )
