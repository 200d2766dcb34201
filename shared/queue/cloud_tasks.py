"""The TaskQueue on Google Cloud Tasks: one HTTP task per delivery, POSTed to one target URL.

Import this module only when a Cloud Tasks queue is configured: it loads the Google client,
which the embedded backend must not pay for at cold start. With CLOUD_TASKS_EMULATOR_HOST
set it talks plain gRPC to the emulator (the client has no emulator variable of its own, and
setting only its endpoint would open TLS); otherwise to the real service.

An enqueue that meets an outage (unavailable, timed out, throttled) is tried again with
backoff for up to `ENQUEUE_BUDGET` seconds, well within a request's own deadline; past it
the error reaches the caller, who records the work as still to enqueue (the task's outbox,
shared.turn_queue.TurnQueue). An attempt that timed out may have created the entry: the next
one then finds its name taken, which is success.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from typing import Any

import grpc  # type: ignore[import-untyped]
from google.api_core import exceptions as google_errors
from google.api_core.exceptions import AlreadyExists
from google.cloud import tasks_v2
from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport

from shared.clock import SYSTEM, Clock
from shared.observability import tracing
from shared.observability.context import TRACEPARENT
from shared.queue import encode

log = logging.getLogger("a2a.queue")

ENQUEUE_BUDGET = 20.0  # seconds an enqueue goes on trying through an outage
_ATTEMPT_TIMEOUT = 5.0  # seconds one create may take before it counts as failed
_FIRST_PAUSE, _MAX_PAUSE = 0.2, 2.0  # seconds between attempts, doubling
# What an outage looks like; anything else (a bad request, no permission) is no use retrying.
_TRANSIENT = (
    google_errors.ServiceUnavailable,
    google_errors.DeadlineExceeded,
    google_errors.InternalServerError,
    google_errors.TooManyRequests,
    google_errors.ResourceExhausted,
    google_errors.Aborted,
)


class CloudTasksQueue:
    def __init__(
        self,
        queue: str,
        url: str,
        service_account: str,
        *,
        emulator_host: str | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        """Deliveries to `url` through `queue` (projects/P/locations/L/queues/Q), each with
        an OIDC token minted for `service_account` and addressed to `url` (Cloud Run accepts
        a token only for its own URL)."""
        self._queue = queue
        self._url = url
        self._service_account = service_account
        self._clock = clock
        self._emulator_host = emulator_host
        # Made at the first enqueue: a worker that never hands a turn over never needs one
        # (nor the credentials it looks up).
        self._made: tasks_v2.CloudTasksClient | None = None
        self._lock = threading.Lock()

    @property
    def _client(self) -> tasks_v2.CloudTasksClient:
        with self._lock:
            if self._made is None:
                if self._emulator_host:
                    # The emulator is local: gRPC must not route it through the http_proxy.
                    channel = grpc.insecure_channel(
                        self._emulator_host, options=[("grpc.enable_http_proxy", 0)]
                    )
                    transport = CloudTasksGrpcTransport(channel=channel)
                    self._made = tasks_v2.CloudTasksClient(transport=transport)
                else:
                    self._made = tasks_v2.CloudTasksClient()
            return self._made

    def close(self) -> None:
        with self._lock:
            if self._made is not None:
                self._made.transport.close()  # type: ignore[no-untyped-call]

    def enqueue(self, name: str, payload: dict[str, Any], *, delay: float = 0.0) -> bool:
        with tracing.span("enqueue", queue=self._queue, entry=name):
            return self._enqueue(name, payload, delay)

    def _enqueue(self, name: str, payload: dict[str, Any], delay: float) -> bool:
        # The trace goes with the task: its target's work joins the trace of the request
        # that queued it (shared.observability).
        headers = {"Content-Type": "application/json"}  # Cloud Tasks' default is not JSON
        traceparent = tracing.traceparent()
        if traceparent is not None:
            headers[TRACEPARENT] = traceparent
        task = tasks_v2.Task(
            name=f"{self._queue}/tasks/{name}",
            http_request=tasks_v2.HttpRequest(
                url=self._url,
                http_method=tasks_v2.HttpMethod.POST,
                headers=headers,
                body=encode(name, payload),
                oidc_token=tasks_v2.OidcToken(
                    service_account_email=self._service_account, audience=self._url
                ),
            ),
        )
        if delay > 0:
            task.schedule_time = self._clock.now() + timedelta(seconds=delay)
        deadline = self._clock.monotonic() + ENQUEUE_BUDGET
        pause, never = _FIRST_PAUSE, threading.Event()
        while True:
            left = deadline - self._clock.monotonic()
            try:
                self._client.create_task(
                    parent=self._queue, task=task, timeout=max(min(_ATTEMPT_TIMEOUT, left), 0.5)
                )
            except AlreadyExists:
                return False
            except _TRANSIENT as exc:
                if deadline - self._clock.monotonic() <= pause:
                    raise
                log.warning("enqueue of %s failed (%s); trying again", name, exc)
                self._clock.wait(never, pause)
                pause = min(pause * 2, _MAX_PAUSE)
                continue
            return True
