"""The embedded push config store: the PushConfigStore contract in one process's memory."""

from __future__ import annotations

import threading
from dataclasses import replace

from shared.model import PushConfig
from shared.ports import StoredPushConfig


class MemoryPushConfigStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # task id -> config id -> config; dicts keep insertion order, so lists are oldest first
        self._configs: dict[str, dict[str, StoredPushConfig]] = {}

    def put(self, config: PushConfig, *, dialect: str) -> StoredPushConfig:
        with self._lock:
            configs = self._configs.setdefault(config.task_id, {})
            old = configs.get(config.id)
            stored = (
                replace(old, config=config, dialect=dialect)
                if old is not None
                else StoredPushConfig(config, dialect, 0)
            )
            configs[config.id] = stored
            return stored

    def get(self, task_id: str, config_id: str) -> StoredPushConfig | None:
        return self._configs.get(task_id, {}).get(config_id)

    def list(self, task_id: str) -> list[StoredPushConfig]:
        return list(self._configs.get(task_id, {}).values())

    def delete(self, task_id: str, config_id: str) -> bool:
        with self._lock:
            return self._configs.get(task_id, {}).pop(config_id, None) is not None
