"""The TaskQueue on Google Cloud Tasks: one HTTP task per delivery, POSTed to one target URL.

Import this module only when a Cloud Tasks queue is configured: it loads the Google client,
which the embedded backend must not pay for at cold start. With CLOUD_TASKS_EMULATOR_HOST
set it talks plain gRPC to the emulator (the client has no emulator variable of its own, and
setting only its endpoint would open TLS); otherwise to the real service.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import grpc  # type: ignore[import-untyped]
from google.api_core.exceptions import AlreadyExists
from google.cloud import tasks_v2
from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport

from shared.queue import encode

_CREATE_TIMEOUT = 10.0  # seconds; a send must answer well within its own deadline


class CloudTasksQueue:
    def __init__(
        self,
        queue: str,
        url: str,
        service_account: str,
        *,
        emulator_host: str | None = None,
    ) -> None:
        """Deliveries to `url` through `queue` (projects/P/locations/L/queues/Q), each with
        an OIDC token minted for `service_account` and addressed to `url` (Cloud Run accepts
        a token only for its own URL)."""
        self._queue = queue
        self._url = url
        self._service_account = service_account
        if emulator_host:
            # The emulator is local: gRPC must not route it through the machine's http_proxy.
            channel = grpc.insecure_channel(emulator_host, options=[("grpc.enable_http_proxy", 0)])
            transport = CloudTasksGrpcTransport(channel=channel)
            self._client = tasks_v2.CloudTasksClient(transport=transport)
        else:
            self._client = tasks_v2.CloudTasksClient()

    def close(self) -> None:
        self._client.transport.close()  # type: ignore[no-untyped-call]

    def enqueue(self, name: str, payload: dict[str, Any], *, delay: float = 0.0) -> bool:
        task = tasks_v2.Task(
            name=f"{self._queue}/tasks/{name}",
            http_request=tasks_v2.HttpRequest(
                url=self._url,
                http_method=tasks_v2.HttpMethod.POST,
                # Set on every task: Cloud Tasks' default is not JSON.
                headers={"Content-Type": "application/json"},
                body=encode(name, payload),
                oidc_token=tasks_v2.OidcToken(
                    service_account_email=self._service_account, audience=self._url
                ),
            ),
        )
        if delay > 0:
            task.schedule_time = datetime.now(UTC) + timedelta(seconds=delay)
        try:
            self._client.create_task(parent=self._queue, task=task, timeout=_CREATE_TIMEOUT)
        except AlreadyExists:
            return False
        return True
