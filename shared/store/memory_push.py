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
"""

from __future__ import annotations

import builtins
import threading
from dataclasses import replace
from datetime import datetime

from shared import ids
from shared.model import PushConfig, utc_now
from shared.ports import StoredPushConfig, TooManyPushConfigs
from shared.store.cost import Cost
from shared.store.memory import MemoryTaskStore

_Key = tuple[str, str, str]  # owner, task id, config id


class MemoryPushConfigStore:
    def __init__(self, cost: Cost | None = None, *, tasks: MemoryTaskStore | None = None) -> None:
        # Counted as Firestore would bill `tasks/{id}/pushConfigs/{id}` (shared.store.cost).
        self.cost = cost or Cost()
        self._tasks = tasks
        if tasks is not None:
            tasks.track_push_configs()
        self._lock = threading.Lock()
        # (owner, task id) -> config id -> config; dicts keep insertion order, so lists are
        # oldest first
        self._configs: dict[tuple[str, str], dict[str, StoredPushConfig]] = {}
        self._sending: dict[_Key, tuple[str, datetime]] = {}  # -> holder, until
        self._sweep_at: dict[_Key, datetime] = {}  # lagging configs -> when a sweep is due

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
        with self._lock:
            configs = self._configs.setdefault((owner, config.task_id), {})
            # Counted and written under one hold of the lock: concurrent puts cannot both
            # take the last place. Billed as Firestore's: the task, then its configs.
            self.cost.add(reads=1 if limit is None else 1 + max(1, len(configs)))
            old = configs.get(config.id)
            if old is None and limit is not None and len(configs) >= limit:
                raise TooManyPushConfigs(config.task_id, len(configs), limit)
            self.cost.add(writes=1)
            stored = (
                replace(old, config=config, dialect=dialect, last_error=None, failed_at=None)
                if old is not None
                else StoredPushConfig(config, owner, dialect, delivered_seq, delivered_seq)
            )
            configs[config.id] = stored
            if stored.wanted_seq > stored.delivered_seq:
                self._sweep_at[(owner, config.task_id, config.id)] = utc_now()
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
            configs = self._configs.get((owner, task_id), {})
            deleted = configs.pop(config_id, None) is not None
            self._sweep_at.pop((owner, task_id, config_id), None)
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
                stored = replace(stored, delivered_seq=seq)
                if seq >= stored.wanted_seq:
                    stored = replace(stored, last_error=None, failed_at=None)
                    self._sweep_at.pop(key, None)
                self._configs[(owner, task_id)][config_id] = stored

    def end_delivery(self, owner: str, task_id: str, config_id: str, holder: str) -> None:
        self.cost.add(writes=1)
        key = (owner, task_id, config_id)
        with self._lock:
            taken = self._sending.get(key)
            if taken is not None and taken[0] == holder:
                del self._sending[key]

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
    ) -> None:
        self.cost.add(writes=1)
        key = (owner, task_id, config_id)
        with self._lock:
            stored = self._find(*key)
            taken = self._sending.get(key)
            if stored is None or taken is None or taken[0] != holder:
                return
            if retry_at is not None:
                self._sweep_at[key] = retry_at
                return
            self._sweep_at.pop(key, None)
            self._configs[(owner, task_id)][config_id] = replace(
                stored, last_error=error, failed_at=at
            )

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
