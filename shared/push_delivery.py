"""Push notifications: from a task's committed events to POSTs on the clients' webhooks.

Deliveries are queued by shared.push_notify. The `deliver` function (or, on the embedded
backend, an in-process queue) runs `Deliverer.deliver`, which sends everything the config has
not received yet, in sequence order, through a PushSender (http.client unless one is given):

- one delivery per config at a time (a sending lease on the config), so a later event
  never overtakes an earlier one; a delivery that finds the lease taken queues itself again
  for `WAIT_SECONDS` later and answers done, spending none of the queue's attempts (Cloud
  Tasks counts every answer but a 2xx as one); one that has more to send than one delivery
  takes queues the rest the same way;
- the config records the last sequence delivered, so a retried delivery never posts again
  what a webhook already accepted (at least once, and once after success);
- any non-2xx answer, a timeout (10 s) or a refused connection fails the delivery, and the
  queue retries it with backoff; after the queue's last attempt the config records the
  error and its time (`lastError`, `failedAt`: its owner sees them; a refused or unreachable
  host only as REFUSED or UNREACHABLE) and the log says so at ERROR, naming the webhook as
  `scheme://host/…` (its path and query often hold a secret); the URL is checked against
  SSRF again before each POST and at every redirect, its host resolved once, and the POST
  connects to the checked addresses (shared.push_url); a redirect to another origin goes
  without the config's credentials (`Authorization`, the token);
- an owner's POSTs in a minute are counted (OwnerRate, per instance): past its setting, the
  rest of a delivery is queued again for when the minute has room (RESCHEDULED).

Payloads follow the dialect the config was made in: v1.0 gets one `StreamResponse` per event
(`application/a2a+json`); v0.3 and v0.1 get the task as it stands (`application/json`).
Headers: `X-A2A-Notification-Token` (the config's token), `Authorization: <scheme>
<credentials>` (its authentication), and `X-A2A-Notification-Signature` (a JWT over the body,
when a signing key is configured).
"""

from __future__ import annotations

import collections
import functools
import http.client
import json
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

from shared.clock import SYSTEM, Clock
from shared.dialects.registry import BY_NAME
from shared.jobs import Outcome, PushJob
from shared.model import ArtifactUpdate, StatusUpdate, new_id
from shared.observability import tracing
from shared.observability.context import TRACEPARENT, note, owner_tag
from shared.ports import (
    DelayingTaskQueue,
    Delivery,
    PushConfigStore,
    StoredPushConfig,
    TaskStore,
)
from shared.push_notify import RETRY_WINDOW
from shared.push_signing import SIGNATURE_HEADER, NotificationSigner
from shared.push_url import DEFAULT_PORTS, PushTarget, PushURLRefused, shown

log = logging.getLogger("a2a.push")

A2A_JSON = "application/a2a+json"
TOKEN_HEADER = "X-A2A-Notification-Token"
TIMEOUT_SECONDS = 10
MAX_REDIRECTS = 3
# A delivery posts at most this many events (the queue's retry goes on from there), and
# stops early when the next POST might outlast its function's timeout.
EVENTS_PER_DELIVERY = 20
# A delivery that finds its config busy comes back this much later (a delivery under way takes
# seconds; a hanging webhook holds the config for a POST's timeout).
WAIT_SECONDS = 2.0
# What a config records of its last failure (the error names a URL, which may be long).
MAX_ERROR_CHARS = 500


# What a config records of a failure the owner may not learn more of (lastError): never
# which internal address a name resolved to, nor whether it resolved at all (either would map
# the network the deliverer sits in for the caller). The log says which.
REFUSED = "refused: not a public address"
UNREACHABLE = "could not connect"


class _OwnerRateReached(Exception):
    """The owner's POSTs of this minute are all taken; `marked`: the last event the config
    got (where the next delivery goes on from)."""

    def __init__(self, marked: int) -> None:
        super().__init__(marked)
        self.marked = marked


class DeliveryFailed(Exception):
    """The webhook did not accept a notification: `recorded` is what its config records (its
    owner sees it), the message what the log says."""

    def __init__(self, message: str, recorded: str | None = None) -> None:
        super().__init__(message)
        self.recorded = recorded or message


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


class OwnerRate:
    """POSTs to one owner's webhooks in the last minute, against `per_minute` (this
    instance's: A2A_MAX_PUSH_DELIVERIES_PER_OWNER_PER_MINUTE). Each owner's times sit in a
    window of their own, dropped once the minute passed: nothing grows with owners gone."""

    WINDOW = 60.0  # seconds

    def __init__(self, per_minute: int | None, clock: Clock = SYSTEM) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._lock = threading.Lock()
        self._posts: dict[str, collections.deque[float]] = {}

    def _window(self, owner: str, now: float) -> collections.deque[float]:
        posts = self._posts.get(owner)
        if posts is None:
            posts = self._posts[owner] = collections.deque()
        while posts and posts[0] <= now - self.WINDOW:
            posts.popleft()
        return posts

    def take(self, owner: str) -> bool:
        """Count one POST for `owner`; False (nothing counted) when its minute is full."""
        if self.per_minute is None:
            return True
        with self._lock:
            now = self._clock.monotonic()
            posts = self._window(owner, now)
            if len(posts) >= self.per_minute:
                return False
            posts.append(now)
            for other in [o for o, p in self._posts.items() if not p and o != owner]:
                del self._posts[other]  # owners whose minute passed
            return True

    def wait(self, owner: str) -> float:
        """Seconds until `owner` may POST again (0 when it may now)."""
        with self._lock:
            now = self._clock.monotonic()
            posts = self._window(owner, now)
            if self.per_minute is None or len(posts) < self.per_minute:
                return 0.0
            return max(posts[0] + self.WINDOW - now, 0.0)


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
        clock: Clock = SYSTEM,
        owner_posts_per_minute: int | None = None,
    ) -> None:
        """`queue` (set after construction, as the in-process queue targets this deliverer)
        is the push queue deliveries come from: where a busy or unfinished one goes again.
        Without one, such a delivery answers BUSY and the queue's retry comes back.
        `owner_posts_per_minute`: the POSTs (failed ones too) this instance makes to one
        owner's webhooks in a minute; past it, the rest of a delivery is queued again for when
        the minute has room (A2A_MAX_PUSH_DELIVERIES_PER_OWNER_PER_MINUTE)."""
        self.queue: DelayingTaskQueue | None = None
        self._clock = clock
        self.rate = OwnerRate(owner_posts_per_minute, clock)
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
        note(taskId=job.task_id, owner=owner_tag(job.owner))
        with tracing.span("push delivery", seq=job.seq, attempt=delivery.attempt):
            outcome = self._deliver(job, delivery)
        note(outcome=outcome.value)
        return outcome

    def _deliver(self, job: PushJob, delivery: Delivery) -> Outcome:
        holder = new_id()
        config = self._configs.begin_delivery(
            job.owner, job.task_id, job.config_id, holder, self._clock.now() + self._lease
        )
        if config is None:
            # Gone or caught up (nothing to do), or another delivery sends to it now.
            current = self._configs.get(job.owner, job.task_id, job.config_id)
            if current is None or current.delivered_seq >= job.seq:
                return Outcome.NOTHING_TO_DO
            return self._again(job, "w", WAIT_SECONDS)
        try:
            if config.delivered_seq >= job.seq:
                return Outcome.NOTHING_TO_DO
            marked = self._send_pending(job, config, holder)
        except DeliveryFailed as exc:
            self._failed(job, config, holder, delivery, exc)
            return Outcome.FAILED
        except _OwnerRateReached as reached:
            marked = reached.marked
        finally:
            self._configs.end_delivery(job.owner, job.task_id, job.config_id, holder)
        if marked is None:
            return Outcome.DELIVERED
        # More than one delivery's worth, or the owner's minute is full: the rest goes as a
        # delivery of its own (when the minute has room again), nothing dropped.
        wait = self.rate.wait(job.owner)
        if wait:
            note(ownerRateReached=True)
            log.info(
                "push for task %s, config %s waits %.1f s: its owner's webhooks had %d POSTs "
                "in the last minute (A2A_MAX_PUSH_DELIVERIES_PER_OWNER_PER_MINUTE)",
                job.task_id,
                job.config_id,
                wait,
                self.rate.per_minute,
            )
        return self._again(job, f"m{marked}-", wait)

    def _again(self, job: PushJob, why: str, delay: float) -> Outcome:
        """Queue the job again, under a name of its own, and let this delivery go: no
        attempt of the queue is spent on waiting."""
        if self.queue is None:
            return Outcome.BUSY
        now = int(self._clock.now().timestamp())
        try:
            self.queue.enqueue(f"{job.name}-{why}{now}", job.payload(), delay=delay)
        except Exception:
            # Not queued again (the queue is down, or this function may not enqueue): the
            # queue's own retry comes back instead, spending an attempt.
            log.exception("could not queue the delivery %s again; the queue retries it", job.name)
            return Outcome.BUSY
        return Outcome.RESCHEDULED

    def _failed(
        self,
        job: PushJob,
        config: StoredPushConfig,
        holder: str,
        delivery: Delivery,
        error: DeliveryFailed,
    ) -> None:
        now = self._clock.now()
        self._configs.attempt_failed(
            job.owner,
            job.task_id,
            job.config_id,
            holder,
            error.recorded[:MAX_ERROR_CHARS],
            at=now,
            retry_at=None if delivery.final else now + RETRY_WINDOW,
        )
        if delivery.final:
            log.error(
                "push to %s for task %s, config %s failed at the queue's last attempt (%d): "
                "%s; the config records it, and the next event or an update of the config "
                "retries",
                shown(config.config.url),
                job.task_id,
                job.config_id,
                delivery.attempt + 1,
                error,
            )
            return
        log.warning(
            "push to %s for task %s, config %s failed (attempt %d): %s",
            shown(config.config.url),
            job.task_id,
            job.config_id,
            delivery.attempt + 1,
            error,
        )

    def _send_pending(self, job: PushJob, config: StoredPushConfig, holder: str) -> int | None:
        """Post what the config has not received, up to EVENTS_PER_DELIVERY events and the
        time budget: None when it is now up to date, else the last event it got."""
        deadline = self._clock.monotonic() + self._budget
        stored = self._store.get(job.owner, job.task_id)
        if stored is None:
            return None
        logged = self._store.events(job.owner, job.task_id, config.delivered_seq)
        batch = logged[:EVENTS_PER_DELIVERY]
        if not batch:
            return None
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
                if self._clock.monotonic() > deadline:
                    return marked  # out of time: the next delivery carries on from `marked`
                update = dialect.stream_update(event, stored.task)
                self._post(job.owner, url, update, config, content_type=A2A_JSON, marked=marked)
                self._configs.delivered(job.owner, job.task_id, config_id, holder, seq)
                marked = seq
        elif news:
            # v0.x: the task as it stands, once for everything new.
            task = dialect.task(stored.task)
            json_type = "application/json"
            self._post(job.owner, url, task, config, content_type=json_type, marked=marked)
        if marked < batch[-1].seq:
            # Messages joining the history are no news for a webhook, but they are passed too.
            marked = batch[-1].seq
            self._configs.delivered(job.owner, job.task_id, config_id, holder, marked)
        return None if len(logged) <= EVENTS_PER_DELIVERY else marked

    def _post(
        self,
        owner: str,
        url: str,
        payload: dict[str, Any],
        config: StoredPushConfig,
        *,
        content_type: str,
        marked: int,
    ) -> None:
        """POST `payload` (and follow its redirects), each POST counted in the owner's
        minute: a full one raises _OwnerRateReached(marked) before anything is sent."""
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
                raise DeliveryFailed(f"URL refused: {exc}", REFUSED) from None
            if not self.rate.take(owner):
                raise _OwnerRateReached(marked)
            if self._signer is not None:
                headers[SIGNATURE_HEADER] = self._signer.sign(
                    task_id=config.config.task_id, body=body, audience=url
                )
            try:
                with tracing.span("webhook POST", **{"http.request.method": "POST"}):
                    # The webhook's own tracing joins the trace of the message (W3C).
                    traceparent = tracing.traceparent()
                    if traceparent is not None:
                        headers[TRACEPARENT] = traceparent
                    status, location = self._sender.post(target, body, headers, TIMEOUT_SECONDS)
            except OSError as exc:
                raise DeliveryFailed(f"no answer from the webhook ({exc})", UNREACHABLE) from None
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
