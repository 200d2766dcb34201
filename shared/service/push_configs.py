"""Push notification configs for one owner: set, get, list, delete, and the checks a config
sent with a message passes (`PushConfigs.admit`, `PushConfigs.put`).

A config is for a task of the owner's (another owner's task answers as a missing one does),
and hears of the events that come after it is stored. Its URL is checked, and the per-task
limit counted, before anything is written; the store counts again as it writes (atomically,
`PushConfigStore.put(limit=)`), so concurrent requests never pass the limit: a config that
lost the last place between the two is refused with the same error. With push
notifications off (no config store) every operation is refused as unsupported.

A config sent with a message is checked before the message is stored, and stored only once
its task is the owner's: created by this send, or read as the owner's before it is continued
(shared.service.sending).
"""

from __future__ import annotations

import builtins

from shared.errors import InvalidParamsError, PushNotificationNotSupportedError, TaskNotFoundError
from shared.model import PushConfig, new_id
from shared.ports import PushConfigStore, StoredPushConfig, StoredTask, TooManyPushConfigs
from shared.push_url import PushURLRefused, check_push_url
from shared.requests import (
    DeletePushConfigRequest,
    GetPushConfigRequest,
    InlinePushConfig,
    ListPushConfigsRequest,
    SetPushConfigRequest,
)
from shared.service.base import Ports, ServiceSettings
from shared.settings import ENVIRONMENT


class PushConfigs:
    """The owner's push notification configs, and the checks of one sent with a message."""

    def __init__(self, ports: Ports, settings: ServiceSettings) -> None:
        self._ports = ports
        self._limit = settings.max_push_configs_per_task
        self._allowed_hosts = settings.push_allowed_hosts
        self._allowed_ports = settings.push_allowed_ports

    def require(self) -> PushConfigStore:
        """The push config store; PushNotificationNotSupported when push is off."""
        if self._ports.push_configs is None:
            raise PushNotificationNotSupportedError(
                "this agent does not send push notifications (capabilities.pushNotifications "
                "is false)"
            )
        return self._ports.push_configs

    def admit(self, owner: str, config: PushConfig, *, count: bool, quota: bool = False) -> None:
        """Refuse a config whose URL is refused, or (`count`: a send to a task that exists)
        that would be one too many on its task, or (`quota`: a config sent with a message)
        one too many of the owner's (replacing one of the owner's configs is always
        allowed), before a send writes anything: a refused send stores no task. The put
        counts again, atomically (`put`): that is what holds the limits when sends race
        (one that lost the owner's last place between the two leaves its message stored)."""
        store = self.require()
        try:
            check_push_url(
                config.url, allowed_hosts=self._allowed_hosts, allowed_ports=self._allowed_ports
            )
        except PushURLRefused as exc:
            raise InvalidParamsError(
                f"push notification URL refused: {exc}", field="push_config.url"
            ) from None
        new = True
        if count:
            existing = store.list(owner, config.task_id)
            new = all(c.config.id != config.id for c in existing)
            if len(existing) >= self._limit and new:
                raise self._too_many(config.task_id, len(existing))
        if quota and new:
            store.require_room(owner)

    def _too_many(self, task_id: str, count: int) -> InvalidParamsError:
        limit = self._limit
        setting = ENVIRONMENT["max_push_configs_per_task"]
        return InvalidParamsError(
            f"task {task_id} has {count} push notification configs, the limit "
            f"({setting}={limit}); delete one, replace one by its id, or raise {setting}",
            metadata={"limit": str(limit), "setting": setting},
        )

    def put(
        self, owner: str, config: PushConfig, dialect: str, delivered_seq: int
    ) -> StoredPushConfig:
        """Store the config within the per-task limit: the store counts and writes in one
        atomic step, so concurrent puts of new ids cannot pass it together."""
        try:
            return self.require().put(
                owner, config, dialect=dialect, delivered_seq=delivered_seq, limit=self._limit
            )
        except TooManyPushConfigs as exc:
            raise self._too_many(exc.task_id, exc.count) from None

    def resent(self, owner: str, config: InlinePushConfig, first: StoredTask) -> None:
        """A resend's config, put on the task its first send went to when that task has none
        of its id or URL: the first send may have died between storing its task and its
        config. Wanted up to the task's last event, due now: the sweep delivers what the
        task did meanwhile, its later commits the rest."""
        store = self.require()
        push = config.for_task(first.task.id, default_id=new_id())
        present = store.list(owner, first.task.id)
        if any(c.config.id == push.id or c.config.url == push.url for c in present):
            return
        self.admit(owner, push, count=True, quota=True)
        self.put(owner, push, first.dialect, 0)
        if first.last_seq:
            store.want(owner, first.task.id, push.id, first.last_seq, self._ports.clock.now())

    def set(self, owner: str, request: SetPushConfigRequest, dialect: str) -> StoredPushConfig:
        """A config made for a task that exists hears of the events that come after it.
        Refused (URL, limit) before anything is written; the put counts the task's configs."""
        stored = self._ports.stored(owner, request.config.task_id)
        self.admit(owner, request.config, count=False)
        return self.put(owner, request.config, dialect, stored.last_seq)

    def get(self, owner: str, request: GetPushConfigRequest) -> StoredPushConfig:
        """The config, or with no id the task's first one (v0.x get without a config id)."""
        store = self.require()
        task_id, config_id = request.task_id, request.config_id
        self._ports.stored(owner, task_id)
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

    def list(self, owner: str, request: ListPushConfigsRequest) -> builtins.list[StoredPushConfig]:
        store = self.require()
        self._ports.stored(owner, request.task_id)
        return store.list(owner, request.task_id)

    def delete(self, owner: str, request: DeletePushConfigRequest) -> None:
        """Idempotent: deleting a config that is not there succeeds."""
        store = self.require()
        self._ports.stored(owner, request.task_id)
        store.delete(owner, request.task_id, request.config_id)
