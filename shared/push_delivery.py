"""Push notifications: from a task's committed events to POSTs on the clients' webhooks.

`PushNotifier` is told of the task store's commits (shared.store.notifying, wired in
shared.app): after each commit that logged events, it enqueues one delivery per push config
of the task on the `push` queue, named by task, config and the last sequence number (so a
repeated enqueue adds nothing). The `deliver` function (or, on the embedded backend, an
in-process queue) runs `Deliverer.deliver`, which sends everything the config has not
received yet, in sequence order, through a PushSender (http.client unless one is given):

- one delivery per config at a time (a sending lease on the config), so a later event
  never overtakes an earlier one; a delivery that finds the lease taken is retried later;
- the config records the last sequence delivered, so a retried delivery never posts again
  what a webhook already accepted (at least once, and once after success);
- any non-2xx answer, a timeout (10 s) or a refused connection fails the delivery, and the
  queue retries it with backoff; the URL is checked against SSRF again before each POST and
  at every redirect, its host resolved once, and the POST connects to the checked addresses
  (shared.push_url); a redirect to another origin goes without the config's credentials
  (`Authorization`, the token).

Payloads follow the dialect the config was made in: v1.0 gets one `StreamResponse` per event
(`application/a2a+json`); v0.3 and v0.1 get the task as it stands (`application/json`).
Headers: `X-A2A-Notification-Token` (the config's token), `Authorization: <scheme>
<credentials>` (its authentication), and `X-A2A-Notification-Signature` (a JWT over the body,
when a signing key is configured).
"""

from __future__ import annotations

import functools
import http.client
import json
import logging
import socket
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

from shared.dialects.registry import BY_NAME
from shared.jobs import Outcome, PushJob
from shared.model import ArtifactUpdate, Event, StatusUpdate, new_id, utc_now
from shared.ports import (
    Delivery,
    PushConfigStore,
    StoredPushConfig,
    StoredTask,
    TaskQueue,
    TaskStore,
)
from shared.push_signing import SIGNATURE_HEADER, NotificationSigner
from shared.push_url import DEFAULT_PORTS, PushTarget, PushURLRefused

log = logging.getLogger("a2a.push")

A2A_JSON = "application/a2a+json"
TOKEN_HEADER = "X-A2A-Notification-Token"
TIMEOUT_SECONDS = 10
MAX_REDIRECTS = 3
# A delivery posts at most this many events (the queue's retry goes on from there), and
# stops early when the next POST might outlast its function's timeout.
EVENTS_PER_DELIVERY = 20


class PushNotifier:
    """The commit callback that enqueues deliveries (a NotifyingTaskStore's `on_commit`)."""

    def __init__(self, configs: PushConfigStore, queue: TaskQueue) -> None:
        self._configs = configs
        self.queue = queue

    def __call__(self, stored: StoredTask, events: Sequence[Event]) -> None:
        if not any(isinstance(e, StatusUpdate | ArtifactUpdate) for e in events):
            return  # a message joining the history is not news for a webhook
        for config in self._configs.list(stored.owner, stored.task.id):
            self.enqueue(stored, config.config.id)

    def enqueue(self, stored: StoredTask, config_id: str) -> None:
        job = PushJob(stored.owner, stored.task.id, config_id, stored.last_seq)
        self.queue.enqueue(job.name, job.payload())


class DeliveryFailed(Exception):
    """The webhook did not accept a notification; the message says how."""


class PushSender(Protocol):
    """The HTTP client that POSTs notifications: a seam, so tests can answer without a network."""

    def post(
        self, target: PushTarget, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, str | None]:
        """POST once to `target.url`, connecting only to `target.addresses` (checked, never
        resolved again), following no redirect: the HTTP status and the Location header
        (None when absent). Raises OSError when no answer came (refused, reset, timed out)."""
        ...


def _connect(addresses: Sequence[str], port: int, timeout: float | None) -> socket.socket:
    """A connection to the first of `addresses` that answers."""
    failure: OSError = OSError("no address to connect to")
    for address in addresses:
        try:
            return socket.create_connection((address, port), timeout)
        except OSError as exc:
            failure = exc
    raise failure


class _PinnedHTTP(http.client.HTTPConnection):
    """HTTP to the checked addresses; the Host header still names the URL's host."""

    def __init__(self, target: PushTarget, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._addresses = target.addresses

    def connect(self) -> None:
        self.sock = _connect(self._addresses, self.port, self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to the checked addresses, with SNI and certificate verification against the
    URL's host name, as if it had been resolved here."""

    def __init__(self, target: PushTarget, timeout: float, tls: ssl.SSLContext) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=tls)
        self._tls = tls
        self._addresses = target.addresses

    def connect(self) -> None:
        sock = _connect(self._addresses, self.port, self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)


class PinnedSender:
    """The PushSender of the standard library's http.client, pinned to checked addresses.
    `tls`: the certificates it trusts (the system's by default)."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._given = tls

    @functools.cached_property
    def _tls(self) -> ssl.SSLContext:
        # Loading the system's certificates takes ~60 ms: at the first https POST, not at
        # every instance's cold start.
        return self._given or ssl.create_default_context()

    def post(
        self, target: PushTarget, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, str | None]:
        connection: http.client.HTTPConnection
        if target.scheme == "https":
            connection = _PinnedHTTPS(target, timeout, self._tls)
        else:
            connection = _PinnedHTTP(target, timeout)
        parts = urlsplit(target.url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            connection.request("POST", path, body=body, headers=dict(headers))
            response = connection.getresponse()
            response.read(64 * 1024)  # drain a little, so the connection ends cleanly
            return response.status, response.getheader("Location")
        except http.client.HTTPException as exc:  # a malformed answer: no answer at all
            raise OSError(f"the webhook's answer is not HTTP ({type(exc).__name__})") from None
        finally:
            connection.close()


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return (
        parts.scheme,
        (parts.hostname or "").lower(),
        parts.port or DEFAULT_PORTS.get(parts.scheme),
    )


class Deliverer:
    def __init__(
        self,
        store: TaskStore,
        configs: PushConfigStore,
        *,
        resolve_url: Callable[[str], PushTarget],
        signer: NotificationSigner | None = None,
        function_timeout: float = 60,
        sender: PushSender | None = None,
    ) -> None:
        self._store = store
        self._sender = sender or PinnedSender()
        self._configs = configs
        self._resolve_url = resolve_url
        self._signer = signer
        # Posting stops while one more POST (and its redirects) still fits in the request.
        self._budget = max(function_timeout - TIMEOUT_SECONDS * (MAX_REDIRECTS + 1), 1.0)
        # A sending lease outlives the request that took it: a delivery killed at its
        # timeout blocks the config no longer than that.
        self._lease = timedelta(seconds=function_timeout + 10)

    def deliver(self, payload: dict[str, Any], delivery: Delivery) -> Outcome:
        """Send the config what it has not received, up to the newest event. Raises
        BadPayload for a payload that is not a delivery."""
        job = PushJob.from_payload(payload)
        holder = new_id()
        config = self._configs.begin_delivery(
            job.owner, job.task_id, job.config_id, holder, utc_now() + self._lease
        )
        if config is None:
            # Gone (nothing to do), or another delivery sends to it now (retry later).
            gone = self._configs.get(job.owner, job.task_id, job.config_id) is None
            return Outcome.NOTHING_TO_DO if gone else Outcome.BUSY
        try:
            if config.delivered_seq >= job.seq:
                return Outcome.NOTHING_TO_DO
            if not self._send_pending(job, config, holder):
                return Outcome.BUSY  # more than one delivery's worth: the retry goes on
        except DeliveryFailed as exc:
            log.warning(
                "push to %s for task %s failed (attempt %d): %s",
                config.config.url,
                job.task_id,
                delivery.attempt + 1,
                exc,
            )
            return Outcome.FAILED
        finally:
            self._configs.end_delivery(job.owner, job.task_id, job.config_id, holder)
        return Outcome.DELIVERED

    def _send_pending(self, job: PushJob, config: StoredPushConfig, holder: str) -> bool:
        """Post what the config has not received, up to EVENTS_PER_DELIVERY events and the
        time budget; True when it is now up to date."""
        deadline = time.monotonic() + self._budget
        stored = self._store.get(job.owner, job.task_id)
        if stored is None:
            return True
        logged = self._store.events(job.owner, job.task_id, config.delivered_seq)
        batch = logged[:EVENTS_PER_DELIVERY]
        if not batch:
            return True
        news = [
            (entry.seq, entry.event)
            for entry in batch
            if isinstance(entry.event, StatusUpdate | ArtifactUpdate)
        ]
        dialect = BY_NAME.get(config.dialect, BY_NAME["1.0"])
        url, config_id = config.config.url, config.config.id
        marked = config.delivered_seq
        if dialect.version == "1.0":
            for seq, event in news:
                if time.monotonic() > deadline:
                    return False  # out of time: the retry carries on from `marked`
                self._post(url, dialect.stream_update(event, stored.task), config, A2A_JSON)
                self._configs.delivered(job.owner, job.task_id, config_id, holder, seq)
                marked = seq
        elif news:
            # v0.x: the task as it stands, once for everything new.
            self._post(url, dialect.task(stored.task), config, "application/json")
        if marked < batch[-1].seq:
            # Messages joining the history are no news for a webhook, but they are passed too.
            self._configs.delivered(job.owner, job.task_id, config_id, holder, batch[-1].seq)
        return len(logged) <= EVENTS_PER_DELIVERY

    def _post(
        self, url: str, payload: dict[str, Any], config: StoredPushConfig, content_type: str
    ) -> None:
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        headers = {"Content-Type": content_type, "User-Agent": "a2a-functions push"}
        if config.config.token:
            headers[TOKEN_HEADER] = config.config.token
        auth = config.config.authentication
        if auth is not None and auth.credentials:
            headers["Authorization"] = f"{auth.schemes[0]} {auth.credentials}"
        origin = _origin(url)
        for _ in range(MAX_REDIRECTS + 1):
            try:
                target = self._resolve_url(url)
            except PushURLRefused as exc:
                raise DeliveryFailed(f"URL refused: {exc}") from None
            if self._signer is not None:
                headers[SIGNATURE_HEADER] = self._signer.sign(
                    task_id=config.config.task_id, body=body, audience=url
                )
            try:
                status, location = self._sender.post(target, body, headers, TIMEOUT_SECONDS)
            except OSError as exc:
                raise DeliveryFailed(f"no answer from the webhook ({exc})") from None
            if 200 <= status < 300:
                return
            if status in (301, 302, 303, 307, 308) and location:
                url = urljoin(url, location)
                if _origin(url) != origin:
                    # The config's credentials are for its own webhook, not wherever that
                    # points: another origin gets the notification without them.
                    headers.pop("Authorization", None)
                    headers.pop(TOKEN_HEADER, None)
                continue
            raise DeliveryFailed(f"the webhook answered HTTP {status}")
        raise DeliveryFailed(f"more than {MAX_REDIRECTS} redirects")
