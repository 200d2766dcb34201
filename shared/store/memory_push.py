"""The embedded push config store: the PushConfigStore contract in one process's memory.

Configs are keyed by (owner, task id, config id), so one owner's ids never meet another's.
Every access holds its lock (deliveries and requests call it from many threads), and the
sending lease is checked as in Firestore: only its holder records progress or gives it back.
A put given a limit counts the task's configs and stores the new one under one hold of the
lock, so the limit holds however many puts race. Each config's sweep time (when a sweep
re-drives it if it still lags) is kept beside it.
Bound to the task store (`tasks`), a new config marks its task as having push configs after
it is stored, as Firestore's batch does (shared.store.firestore_push), so that a commit whose
task is unmarked has none to notify.

Bounded: an owner holds at most `owner_limit` configs on all its tasks (A2A_MAX_PUSH_CONFIGS_
PER_OWNER; counted and written under the same hold of the lock, like the per-task limit;
at the limit, its configs of tasks the task store forgot go first: they can never be
delivered nor deleted again), and the store at most `max_bytes` (its share of
A2A_MEMORY_MAX_BYTES, shared.app), counted as what each config's objects take in the process:
past it, the owner holding the most bytes loses its least recently written config, as the
task store forgets its least recently written tasks.
"""

from __future__ import annotations

import builtins
import sys
import threading
from dataclasses import replace
from datetime import datetime

from shared import ids
from shared.errors import PushConfigQuotaError
from shared.model import PushConfig, utc_now
from shared.ports import StoredPushConfig, TooManyPushConfigs
from shared.store.cost import Cost
from shared.store.memory import MemoryTaskStore

_Key = tuple[str, str, str]  # owner, task id, config id
# What a config takes besides its own objects: its entries in the store's dicts (its task's
# configs, its owner's sizes, the tasks': the slots of a key, a value and the hash, in tables
# kept at most two-thirds full), its keys, and its task's dict of configs (most tasks have
# one config).
_ENTRIES = (
    3 * 3 * 8 * 3 // 2
    + sys.getsizeof(("", "", ""))
    + sys.getsizeof(("", ""))
    + sys.getsizeof({"": None})
)


def weigh(stored: StoredPushConfig) -> int:
    """What one stored config takes in the process: its objects and their texts."""
    config = stored.config
    texts = [config.id, config.task_id, config.url, config.token, stored.last_error]
    size = sys.getsizeof(stored) + sys.getsizeof(config) + _ENTRIES
    auth = config.authentication
    if auth is not None:
        size += sys.getsizeof(auth) + sys.getsizeof(auth.schemes)
        texts += [*auth.schemes, auth.credentials]
    return size + sum(sys.getsizeof(text) for text in texts if text is not None)


class MemoryPushConfigStore:
    def __init__(
        self,
        cost: Cost | None = None,
        *,
        tasks: MemoryTaskStore | None = None,
        owner_limit: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        # Counted as Firestore would bill `tasks/{id}/pushConfigs/{id}` (shared.store.cost).
        self.cost = cost or Cost()
        self._tasks = tasks
        if tasks is not None:
            tasks.track_push_configs()
        self._owner_limit = owner_limit
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        # (owner, task id) -> config id -> config; dicts keep insertion order, so lists are
        # oldest first
        self._configs: dict[tuple[str, str], dict[str, StoredPushConfig]] = {}
        self._sending: dict[_Key, tuple[str, datetime]] = {}  # -> holder, until
        self._sweep_at: dict[_Key, datetime] = {}  # lagging configs -> when a sweep is due
        # owner -> its configs' keys -> their bytes, the least recently written first
        self._sizes: dict[str, dict[_Key, int]] = {}
        self._owner_bytes: dict[str, int] = {}
        self.bytes = 0  # every config's, against max_bytes

    def _count(self, owner: str) -> int:
        return len(self._sizes.get(owner, ()))

    def _weighed(self, key: _Key, stored: StoredPushConfig, *, written: bool) -> None:
        """Count `stored`'s bytes for `key` (`written`: as the owner's most recent write)."""
        owner = key[0]
        sizes = self._sizes.setdefault(owner, {})
        old = sizes.pop(key, 0) if written else sizes.get(key, 0)
        size = weigh(stored)
        sizes[key] = size
        self._owner_bytes[owner] = self._owner_bytes.get(owner, 0) + size - old
        self.bytes += size - old

    def _forget(self, key: _Key) -> None:
        """Drop the config of `key` and everything kept of it (the lock held)."""
        owner, task_id, config_id = key
        configs = self._configs.get((owner, task_id), {})
        configs.pop(config_id, None)
        if not configs:
            self._configs.pop((owner, task_id), None)
        self._sending.pop(key, None)
        self._sweep_at.pop(key, None)
        sizes = self._sizes.get(owner, {})
        size = sizes.pop(key, 0)
        self.bytes -= size
        self._owner_bytes[owner] = self._owner_bytes.get(owner, 0) - size
        if not sizes:
            self._sizes.pop(owner, None)
            self._owner_bytes.pop(owner, None)

    def _trim(self, keep: _Key) -> None:
        """While over max_bytes: the owner holding the most bytes loses its least recently
        written config (never `keep`, the one just written). The lock held."""
        while self._max_bytes is not None and self.bytes > self._max_bytes:
            for owner in sorted(self._owner_bytes, key=self._owner_bytes.__getitem__)[::-1]:
                victim = next((k for k in self._sizes[owner] if k != keep), None)
                if victim is not None:
                    self._forget(victim)
                    break
            else:
                return  # `keep` alone

    def _forget_orphans(self, owner: str) -> None:
        """Drop the owner's configs of tasks the task store no longer has (forgotten: their
        owner can neither be notified nor delete them)."""
        tasks = self._tasks
        if tasks is None:
            return
        with self._lock:
            task_ids = {key[1] for key in self._sizes.get(owner, ())}
        gone = {task_id for task_id in task_ids if tasks.get(owner, task_id) is None}
        with self._lock:
            for key in [k for k in self._sizes.get(owner, ()) if k[1] in gone]:
                self._forget(key)

    def require_room(self, owner: str) -> None:
        limit = self._owner_limit
        if limit is None:
            return
        self.cost.add(reads=1)  # as Firestore's count query
        with self._lock:
            count = self._count(owner)
        if count >= limit:
            self._forget_orphans(owner)  # as `put` does at the limit
            with self._lock:
                count = self._count(owner)
        if count >= limit:
            raise PushConfigQuotaError(count, limit)

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
        key = (owner, config.task_id, config.id)
        owner_limit = self._owner_limit
        with self._lock:
            full = owner_limit is not None and self._count(owner) >= owner_limit
        if full:
            self._forget_orphans(owner)
        with self._lock:
            configs = self._configs.get((owner, config.task_id), {})
            # Counted and written under one hold of the lock: concurrent puts cannot both
            # take the last place. Billed as Firestore's: the task, then its configs.
            self.cost.add(reads=1 if limit is None else 1 + max(1, len(configs)))
            old = configs.get(config.id)
            if old is None and limit is not None and len(configs) >= limit:
                raise TooManyPushConfigs(config.task_id, len(configs), limit)
            if old is None and owner_limit is not None and self._count(owner) >= owner_limit:
                raise PushConfigQuotaError(self._count(owner), owner_limit)
            self.cost.add(writes=1)
            stored = (
                replace(
                    old,
                    config=config,
                    dialect=dialect,
                    last_error=None,
                    failed_at=None,
                    failures=0,
                    backoff_until=None,
                )
                if old is not None
                else StoredPushConfig(config, owner, dialect, delivered_seq, delivered_seq)
            )
            self._configs.setdefault((owner, config.task_id), configs)[config.id] = stored
            self._weighed(key, stored, written=True)
            if stored.wanted_seq > stored.delivered_seq:
                self._sweep_at[key] = utc_now()
            self._trim(keep=key)
        # After the config is stored: a commit that sees the mark finds the config.
        tasks = self._tasks
        if old is None and tasks is not None and tasks.mark_push_configs(owner, config.task_id):
            self.cost.add(writes=1)  # the task document, in Firestore's batch
        return stored

    def _find(self, owner: str, task_id: str, config_id: str) -> StoredPushConfig | None:
        return self._configs.get((owner, task_id), {}).get(config_id)

    def get(self, owner: str, task_id: str, config_id: str) -> StoredPushConfig | None:
        self.cost.add(reads=1)
        with self._lock:
            return self._find(owner, task_id, config_id)

    def list(self, owner: str, task_id: str) -> list[StoredPushConfig]:
        with self._lock:
            configs = list(self._configs.get((owner, task_id), {}).values())
        self.cost.add(reads=max(1, len(configs)))
        return configs

    def delete(self, owner: str, task_id: str, config_id: str) -> bool:
        with self._lock:
            deleted = self._find(owner, task_id, config_id) is not None
            if deleted:
                self._forget((owner, task_id, config_id))
        self.cost.add(reads=1, writes=int(deleted))
        return deleted

    def begin_delivery(
        self, owner: str, task_id: str, config_id: str, holder: str, until: datetime
    ) -> StoredPushConfig | None:
        self.cost.add(reads=1)
        key = (owner, task_id, config_id)
        with self._lock:
            stored = self._find(*key)
            taken = self._sending.get(key)
            if stored is None or (taken is not None and taken[1] > utc_now()):
                return None
            self._sending[key] = (holder, until)
        self.cost.add(writes=1)
        return stored

    def delivered(self, owner: str, task_id: str, config_id: str, holder: str, seq: int) -> None:
        self.cost.add(writes=1)
        key = (owner, task_id, config_id)
        with self._lock:
            stored = self._find(*key)
            taken = self._sending.get(key)
            if stored is not None and taken is not None and taken[0] == holder:
                stored = replace(stored, delivered_seq=seq, failures=0, backoff_until=None)
                if seq >= stored.wanted_seq:
                    stored = replace(stored, last_error=None, failed_at=None)
                    self._sweep_at.pop(key, None)
                self._configs[(owner, task_id)][config_id] = stored

    def end_delivery(
        self, owner: str, task_id: str, config_id: str, holder: str, *, unless_wanted: bool = False
    ) -> StoredPushConfig | None:
        key = (owner, task_id, config_id)
        with self._lock:
            taken = self._sending.get(key)
            if taken is None or taken[0] != holder:
                return None
            stored = self._find(*key)
            if unless_wanted and stored is not None and stored.wanted_seq > stored.delivered_seq:
                self.cost.add(reads=1)
                return stored
            del self._sending[key]
        self.cost.add(writes=1)
        return None

    def want(self, owner: str, task_id: str, config_id: str, seq: int, sweep_at: datetime) -> None:
        self.cost.add(writes=1)
        key = (owner, task_id, config_id)
        with self._lock:
            stored = self._find(*key)
            if stored is None:
                return
            self._configs[(owner, task_id)][config_id] = replace(
                stored, wanted_seq=max(stored.wanted_seq, seq)
            )
            self._sweep_at[key] = min(self._sweep_at.get(key, sweep_at), sweep_at)

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
        self.cost.add(writes=1)
        key = (owner, task_id, config_id)
        with self._lock:
            stored = self._find(*key)
            taken = self._sending.get(key)
            if stored is None or taken is None or taken[0] != holder:
                return
            backing_off = replace(stored, failures=stored.failures + 1, backoff_until=backoff_until)
            self._configs[(owner, task_id)][config_id] = backing_off
            if retry_at is not None:
                self._sweep_at[key] = retry_at
                return
            self._sweep_at.pop(key, None)
            failed = replace(backing_off, last_error=error, failed_at=at)
            self._configs[(owner, task_id)][config_id] = failed
            self._weighed(key, failed, written=False)

    def lagging(
        self, now: datetime, limit: int, after: StoredPushConfig | None = None
    ) -> builtins.list[StoredPushConfig]:
        found: builtins.list[StoredPushConfig] = []
        past = None
        if after is not None and after.sweep_at is not None:
            past = (after.sweep_at, (after.owner, after.config.task_id, after.config.id))
        with self._lock:
            due = sorted(
                (at, key)
                for key, at in self._sweep_at.items()
                if at <= now and (past is None or (at, key) > past)
            )[:limit]
            for at, key in due:
                stored = self._find(*key)
                if stored is None or stored.wanted_seq <= stored.delivered_seq:
                    # Wanted after it was delivered (a late commit callback): nothing lags.
                    del self._sweep_at[key]
                    self.cost.add(writes=1)
                else:
                    found.append(replace(stored, sweep_at=at))
        self.cost.add(reads=max(1, len(due)))
        return found
