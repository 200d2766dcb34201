"""Push configs in Firestore: `tasks/{docId}/pushConfigs/{document_id(configId)}`.

The task document is the owner's (its id derives from owner and task id: shared.store.
firestore), so a config id is scoped per task and owner by where the document lives; the
document records `owner`, `taskId` and `configId` too, and every read checks the owner.
Each document holds the config as JSON, the dialect it was made in, the last event sequence
delivered to it (`delivered`), the sending lease (`sendingHolder`, `sendingUntil`: one
delivery at a time, taken with an update-time precondition; only its holder records progress
and gives it back, checked the same way), `createdAt` (lists are oldest
first) and `expireAt` for the TTL policy. It shares the task store's client and cost counter.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from google.api_core import exceptions as google_errors
from google.cloud import firestore

from shared import ids
from shared.conflicts import retry_on_conflict
from shared.model import PushConfig, utc_now
from shared.ports import StoredPushConfig, VersionConflict
from shared.store.cost import Cost
from shared.store.firestore import TASKS, document_id

PUSH_CONFIGS = "pushConfigs"


class FirestorePushConfigStore:
    def __init__(self, client: firestore.Client, *, retention: timedelta, cost: Cost) -> None:
        self._client = client
        self._retention = retention
        self.cost = cost

    def _configs(self, owner: str, task_id: str) -> Any:
        task = document_id(owner, task_id)
        return self._client.collection(TASKS).document(task).collection(PUSH_CONFIGS)

    def _ref(self, owner: str, task_id: str, config_id: str) -> Any:
        return self._configs(owner, task_id).document(document_id(config_id))

    def put(
        self, owner: str, config: PushConfig, *, dialect: str, delivered_seq: int = 0
    ) -> StoredPushConfig:
        ids.require(config.task_id, "task id")
        ids.require(config.id, "push config id")
        ref = self._ref(owner, config.task_id, config.id)
        old = self._snapshot(ref, owner)
        now = utc_now()
        delivered = int(old["delivered"]) if old else delivered_seq
        # Merged, so a delivery under way keeps its sending lease.
        ref.set(
            {
                "owner": owner,
                "taskId": config.task_id,
                "configId": config.id,
                "config": config.model_dump_json(),
                "dialect": dialect,
                "delivered": delivered,
                "createdAt": old["createdAt"] if old else now,
                "expireAt": now + self._retention,
            },
            merge=True,
        )
        self.cost.add(writes=1)
        return StoredPushConfig(config, owner, dialect, delivered)

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
            return None  # another delivery took it between our read and write
        self.cost.add(writes=1)
        return _decode(data)

    def delivered(self, owner: str, task_id: str, config_id: str, holder: str, seq: int) -> None:
        self._as_holder(owner, task_id, config_id, holder, {"delivered": seq})

    def end_delivery(self, owner: str, task_id: str, config_id: str, holder: str) -> None:
        fields = {"sendingHolder": None, "sendingUntil": None}
        self._as_holder(owner, task_id, config_id, holder, fields)

    def _as_holder(
        self, owner: str, task_id: str, config_id: str, holder: str, fields: dict[str, Any]
    ) -> None:
        """Update the config while `holder` holds its sending lease, else do nothing: read the
        holder, then write with a precondition on that read's update time, so a takeover in
        between fails the write. One read and one write; another lost race re-reads."""
        ref = self._ref(owner, task_id, config_id)

        def attempt() -> None:
            snapshot = ref.get()
            self.cost.add(reads=1)
            data = (snapshot.to_dict() or {}) if snapshot.exists else {}
            if data.get("owner") != owner or data.get("sendingHolder") != holder:
                return  # gone, or a stale delivery whose lease was taken over
            try:
                ref.update(
                    fields, option=self._client.write_option(last_update_time=snapshot.update_time)
                )
            except google_errors.FailedPrecondition:
                raise VersionConflict(f"{task_id}/{config_id}") from None
            self.cost.add(writes=1)

        retry_on_conflict(attempt, subject=f"push config {task_id}/{config_id}")

    def _snapshot(self, ref: Any, owner: str) -> dict[str, Any] | None:
        """The document's fields when it is the owner's config, else None."""
        snapshot = ref.get()
        self.cost.add(reads=1)
        data = (snapshot.to_dict() or {}) if snapshot.exists else None
        return data if data is not None and data.get("owner") == owner else None


def _decode(data: dict[str, Any]) -> StoredPushConfig:
    return StoredPushConfig(
        PushConfig.model_validate_json(data["config"]),
        str(data["owner"]),
        str(data["dialect"]),
        int(data["delivered"]),
    )
