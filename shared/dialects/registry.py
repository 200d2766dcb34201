"""Every dialect by name, the methods each version calls by which operation, and the
versions a client may ask for."""

from __future__ import annotations

from shared.dialects.base import Dialect
from shared.dialects.v0_1 import V01
from shared.dialects.v0_3 import V03, V03_LEGACY
from shared.dialects.v1_0 import V1
from shared.errors import VersionNotSupportedError

BY_NAME: dict[str, Dialect] = {d.name: d for d in (V1, V03, V03_LEGACY, V01)}

# Versions a client may name in the A2A-Version header (Major.Minor).
SUPPORTED_VERSIONS = ("1.0", "0.3", "0.2", "0.1")

# method -> (operation, dialect). Operations are named in shared.bindings.operations.
METHODS: dict[str, tuple[str, Dialect]] = {
    # A2A 1.0
    "SendMessage": ("send", V1),
    "SendStreamingMessage": ("stream", V1),
    "GetTask": ("get", V1),
    "ListTasks": ("list", V1),
    "CancelTask": ("cancel", V1),
    "SubscribeToTask": ("subscribe", V1),
    "CreateTaskPushNotificationConfig": ("push_set", V1),
    "GetTaskPushNotificationConfig": ("push_get", V1),
    "ListTaskPushNotificationConfigs": ("push_list", V1),
    "DeleteTaskPushNotificationConfig": ("push_delete", V1),
    "GetExtendedAgentCard": ("extended_card", V1),
    # A2A 0.2 / 0.3 (tasks/get, tasks/cancel and tasks/resubscribe also serve v0.1)
    "message/send": ("send", V03),
    "message/stream": ("stream", V03),
    "tasks/get": ("get", V03),
    "tasks/cancel": ("cancel", V03),
    "tasks/resubscribe": ("subscribe", V03),
    "tasks/pushNotificationConfig/set": ("push_set", V03),
    "tasks/pushNotificationConfig/get": ("push_get", V03),
    "tasks/pushNotificationConfig/list": ("push_list", V03),
    "tasks/pushNotificationConfig/delete": ("push_delete", V03),
    "agent/getAuthenticatedExtendedCard": ("extended_card", V03),
    # A2A 0.1
    "tasks/send": ("send", V01),
    "tasks/sendSubscribe": ("stream", V01),
    "tasks/pushNotification/set": ("push_set", V01),
    "tasks/pushNotification/get": ("push_get", V01),
    # Informal forms from the seeds (wire reference, section 7)
    "tasks/pushNotificationConfig": ("push_verbless", V03),
    "messages/list": ("messages", V03),
}


def version_supported(value: str) -> bool:
    """Whether an A2A-Version header names a version we speak (a patch part is tolerated)."""
    major_minor = ".".join(value.strip().split(".")[:2])
    return major_minor in SUPPORTED_VERSIONS


def require_version(version: str | None) -> None:
    """Refuse an A2A-Version header naming a version we don't speak (none: the method says)."""
    if version and not version_supported(version):
        raise VersionNotSupportedError(
            f"A2A-Version {version} is not supported; this agent speaks 1.0 and 0.3",
            metadata={"requestedVersion": version, "supportedVersions": "1.0,0.3"},
        )
