"""Push notifications: from a task's committed events to POSTs on the clients' webhooks.

Deliveries are queued by shared.push_notify. The `deliver` function (or, on the embedded
backend, an in-process queue) runs `Deliverer.deliver`, which sends everything the config has
not received yet, in sequence order, through a PushSender (http.client unless one is given):

- one delivery per config at a time (a sending lease on the config), so a later event
  never overtakes an earlier one; the holder gives the lease back only once nothing more is
  wanted (`end_delivery(unless_wanted=True)`): events a commit wanted while it sent go out
  at once, in the same delivery, so the commit's own delivery, finding the lease taken, has
  nothing left to wait for (it queues itself again for `WAIT_SECONDS` later all the same, in
  case the holder dies, and answers done, spending none of the queue's attempts: Cloud Tasks
  counts every answer but a 2xx as one); one that has more to send than one delivery takes
  queues the rest the same way;
- the config records the last sequence delivered, so a retried delivery never posts again
  what a webhook already accepted (at least once, and once after success);
- any non-2xx answer, a POST not answered within `TIMEOUT_SECONDS` (the whole exchange:
  connecting, sending, and the answer's head, however slowly it trickles), an answer head
  over `MAX_ANSWER_HEAD_BYTES` (or over http.client's 100 lines), or a refused connection
  fails the delivery, and the queue retries it with backoff. The config backs off across
  its events (`failures` in a row, no POST before `backoff_until`: `BACKOFF_FIRST` seconds,
  doubling up to `BACKOFF_MAX`): a delivery that finds it backing off posts nothing and
  queues one delivery for the config when its back-off ends (named by config and that
  time, so its events share it), so a webhook that keeps failing gets one POST a back-off
  however many events come. After `max_failures` in a row (or the queue's last attempt)
  the config records the error and its time (`lastError`, `failedAt`: its owner sees
  them; a refused or unreachable host only as REFUSED or UNREACHABLE) and the log says so
  at ERROR, naming the webhook as `scheme://host/…` (its path and query often hold a
  secret); the URL is checked against SSRF again before each POST and at every redirect,
  its host resolved once, and the POST connects to the checked addresses (shared.push_url);
  a redirect to another origin goes without the config's credentials (`Authorization`, the
  token);
- an owner's POSTs in a minute are counted (OwnerRate, per instance): past its setting, the
  rest of a delivery is queued again for when the minute has room (RESCHEDULED); and so
  are its deliveries under way (OwnerSlots, per instance): once the instance has
  `IN_FLIGHT_SHARED` under way, an owner's delivery past its `IN_FLIGHT_PER_OWNER` is
  queued again for when one of them must have ended, so one owner's slow webhooks never
  hold every delivery thread and another owner's are served at once;
- a delivery starts no POST that could outlast its function's request timeout.

Payloads follow the dialect the config was made in: v1.0 gets one `StreamResponse` per event
(`application/a2a+json`); v0.3 and v0.1 get the task as it stands (`application/json`).
Headers: `X-A2A-Notification-Token` (the config's token), `Authorization: <scheme>
<credentials>` (its authentication), and `X-A2A-Notification-Signature` (a JWT over the body,
when a signing key is configured).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import http.client
import io
import json
import logging
import socket
import ssl
import threading
import time
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
# One POST's exchange, redirects included, from connecting to the answer's head: a wall-clock
# deadline, not a timeout per read (a webhook trickling a header line every 5 s held a POST
# 45 s under a 10 s read timeout).
TIMEOUT_SECONDS = 10
MAX_REDIRECTS = 3
# What a webhook may send before its answer's head ends (http.client also stops at 100
# header lines): a webhook's answer is a status; anything longer is no answer.
MAX_ANSWER_HEAD_BYTES = 16 * 1024
# What is read of an answer's body, so the connection ends cleanly.
MAX_ANSWER_DRAIN_BYTES = 64 * 1024
# Deliveries under way on one instance: `make run` delivers on 16 threads, a deployed
# `deliver` instance takes 40 requests at once (infra/deploy.toml). While fewer than
# IN_FLIGHT_SHARED are under way any owner may start one (a single-tenant agent's bursts go
# at once); past it, an owner with IN_FLIGHT_PER_OWNER under way waits: however slow one
# owner's webhooks, it holds at most 8 of make run's 16 threads, and other owners the rest.
IN_FLIGHT_PER_OWNER = 4
IN_FLIGHT_SHARED = 8
# A failing config's back-off (its failed attempts in a row, across its events): the push
# queue's own, as deployed (min_backoff 5 s, max_backoff 3600 s, doubling), and its attempts
# (A2A_PUSH_MAX_ATTEMPTS' default: a day of retries) before the config records the failure.
BACKOFF_FIRST = 5.0
BACKOFF_MAX = 3600.0
MAX_FAILURES = 34
# Store writes after a delivery's last POST (its progress, the lease) fit in this much of
# the function's request timeout.
STORE_MARGIN_SECONDS = 5.0
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
        resolved again), following no redirect, the whole exchange within `timeout` seconds
        (wall-clock): the HTTP status and the Location header (None when absent). Raises
        OSError when no answer came (refused, reset, timed out, a head over its limits)."""
        ...


def _left(deadline: float) -> float:
    """Seconds left until `deadline` (time.monotonic); TimeoutError once it passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"the webhook did not answer within {TIMEOUT_SECONDS} s")
    return left


class _Deadlined(io.RawIOBase):
    """An answer's bytes from a socket, each read waiting only what is left of the POST's
    deadline, and at most `limit` bytes in all (raised as the body is drained)."""

    def __init__(self, sock: socket.socket, deadline: float, limit: int) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline
        self.limit = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.limit <= 0:
            raise OSError(
                f"the webhook's answer head is over {MAX_ANSWER_HEAD_BYTES} bytes; "
                "a webhook answers with a status"
            )
        self._sock.settimeout(_left(self._deadline))
        with memoryview(buffer) as view:
            read = self._sock.recv_into(view[: self.limit])
        self.limit -= read
        return read


class _Answer(http.client.HTTPResponse):
    """http.client's answer, read through _Deadlined (its `deadline` set per connection)."""

    deadline: float

    def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        self.fp.close()  # the socket's own reader, unused: its hold on the socket goes
        self.raw = _Deadlined(sock, self.deadline, MAX_ANSWER_HEAD_BYTES)
        self.fp = io.BufferedReader(self.raw)


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
    """HTTP to the checked addresses, the whole exchange within `deadline` (time.monotonic):
    connecting, sending and each read wait only what is left of it. The Host header still
    names the URL's host."""

    def __init__(self, target: PushTarget, deadline: float) -> None:
        super().__init__(target.host, target.port, timeout=_left(deadline))
        self._addresses = target.addresses
        self._deadline = deadline
        self.response_class = type("_Answer", (_Answer,), {"deadline": deadline})

    def _socket(self) -> socket.socket:
        sock = _connect(self._addresses, self.port, _left(self._deadline))
        sock.settimeout(_left(self._deadline))  # a TLS handshake's, at most
        return sock

    def connect(self) -> None:
        self.sock = self._socket()

    def send(self, data: Any) -> None:
        if self.sock is not None:
            self.sock.settimeout(_left(self._deadline))  # sendall's total, since 3.5
        super().send(data)


class _PinnedHTTPS(_PinnedHTTP, http.client.HTTPSConnection):
    """HTTPS to the checked addresses, with SNI and certificate verification against the
    URL's host name, as if it had been resolved here."""

    def __init__(self, target: PushTarget, deadline: float, tls: ssl.SSLContext) -> None:
        http.client.HTTPSConnection.__init__(
            self, target.host, target.port, timeout=_left(deadline), context=tls
        )
        self._addresses = target.addresses
        self._deadline = deadline
        self.response_class = type("_Answer", (_Answer,), {"deadline": deadline})
        self._tls = tls

    def connect(self) -> None:
        self.sock = self._tls.wrap_socket(self._socket(), server_hostname=self.host)


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
        deadline = time.monotonic() + timeout
        connection: _PinnedHTTP
        if target.scheme == "https":
            connection = _PinnedHTTPS(target, deadline, self._tls)
        else:
            connection = _PinnedHTTP(target, deadline)
        parts = urlsplit(target.url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            connection.request("POST", path, body=body, headers=dict(headers))
            response = connection.getresponse()
            assert isinstance(response, _Answer)
            status, location = response.status, response.getheader("Location")
            # Drain a little, so the connection ends cleanly (within the deadline too).
            response.raw.limit = MAX_ANSWER_DRAIN_BYTES
            with contextlib.suppress(OSError, http.client.HTTPException):
                response.read(MAX_ANSWER_DRAIN_BYTES)
            return status, location
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


# The soonest a delivery whose owner holds its share is queued again.
REQUEUE_SOON = 0.1


class OwnerSlots:
    """Deliveries under way on this instance, by owner: while fewer than `shared` are, any
    owner may start one; past it, at most `per_owner` of one owner. Only owners with one
    under way are kept: nothing grows with owners gone."""

    def __init__(
        self, per_owner: int, shared: int = IN_FLIGHT_SHARED, clock: Clock = SYSTEM
    ) -> None:
        self.per_owner = per_owner
        self.shared = shared
        self._clock = clock
        self._lock = threading.Lock()
        self._started: dict[str, list[float]] = {}
        # Seconds the owner's last delivery took, while it has one under way: how soon a
        # slot of its is likely free again (its webhooks may answer in milliseconds).
        self._took: dict[str, float] = {}
        self._under_way = 0

    def take(self, owner: str) -> float | None:
        """Count one delivery of `owner` under way: the time it started (what `give` takes
        back), or None (nothing counted) when the instance is busy and the owner has its
        share under way."""
        with self._lock:
            started = self._started.get(owner, [])
            if self._under_way >= self.shared and len(started) >= self.per_owner:
                return None
            now = self._clock.monotonic()
            self._started[owner] = [*started, now]
            self._under_way += 1
            return now

    def give(self, owner: str, started: float) -> None:
        with self._lock:
            under_way = self._started[owner]
            under_way.remove(started)
            self._under_way -= 1
            if under_way:
                self._took[owner] = self._clock.monotonic() - started
            else:
                del self._started[owner]
                self._took.pop(owner, None)

    def wait(self, owner: str) -> float:
        """Seconds until a slot of the owner's is likely free (one still taken queues the
        delivery again): twice what its last delivery took, when one of its ended while
        others were under way (webhooks that answer at once: their burst drains without
        waiting out a slow one's deadline); else until its oldest delivery under way has had
        its first POST's time."""
        with self._lock:
            started = self._started.get(owner)
            if not started:
                return 0.0
            deadline = max(min(started) + TIMEOUT_SECONDS - self._clock.monotonic(), 1.0)
            took = self._took.get(owner)
            return deadline if took is None else min(deadline, max(2 * took, REQUEUE_SOON))


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
        owner_in_flight: int = IN_FLIGHT_PER_OWNER,
        max_failures: int = MAX_FAILURES,
    ) -> None:
        """`queue` (set after construction, as the in-process queue targets this deliverer)
        is the push queue deliveries come from: where a busy or unfinished one goes again.
        Without one, such a delivery answers BUSY and the queue's retry comes back.
        `owner_posts_per_minute`: the POSTs (failed ones too) this instance makes to one
        owner's webhooks in a minute; past it, the rest of a delivery is queued again for when
        the minute has room (A2A_MAX_PUSH_DELIVERIES_PER_OWNER_PER_MINUTE).
        `owner_in_flight`: one owner's deliveries under way at once on this instance.
        `max_failures`: a config's failed attempts in a row before it records the failure
        and waits for its next event (A2A_PUSH_MAX_ATTEMPTS)."""
        self.queue: DelayingTaskQueue | None = None
        self._clock = clock
        self.rate = OwnerRate(owner_posts_per_minute, clock)
        self.slots = OwnerSlots(owner_in_flight, clock=clock)
        self._max_failures = max_failures
        self._store = store
        self._sender = sender or PinnedSender()
        self._configs = configs
        self._resolve_url = resolve_url
        self._signer = signer
        # Posting stops while one more POST's exchange (its redirects within it) and the
        # store's writes after it still fit in the request: none outlives the function's
        # request timeout.
        self._budget = max(function_timeout - TIMEOUT_SECONDS - STORE_MARGIN_SECONDS, 1.0)
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
        started = self.slots.take(job.owner)
        if started is None:
            # The owner's webhooks hold their share of this instance's deliveries: come back
            # when one of them must have ended, and leave the threads to other owners.
            note(ownerInFlight=True)
            return self._again(job, "f", self.slots.wait(job.owner))
        try:
            return self._deliver_leased(job, delivery)
        finally:
            self.slots.give(job.owner, started)

    def _deliver_leased(self, job: PushJob, delivery: Delivery) -> Outcome:
        holder = new_id()
        config = self._configs.begin_delivery(
            job.owner, job.task_id, job.config_id, holder, self._clock.now() + self._lease
        )
        if config is None:
            # Gone or caught up (nothing to do), or another delivery sends to it now (which
            # sends what this one's commit wanted before it lets the config go).
            current = self._configs.get(job.owner, job.task_id, job.config_id)
            if current is None or current.delivered_seq >= job.seq:
                return Outcome.NOTHING_TO_DO
            return self._again(job, "w", WAIT_SECONDS)
        deadline = self._clock.monotonic() + self._budget
        released = False
        try:
            while True:
                if config.delivered_seq >= max(job.seq, config.wanted_seq):
                    return Outcome.NOTHING_TO_DO
                if config.backoff_until is not None and config.backoff_until > self._clock.now():
                    return self._backing_off(job, config)
                before = config.delivered_seq
                marked = self._send_pending(job, config, holder, deadline)
                if marked is not None:
                    break
                kept = self._configs.end_delivery(
                    job.owner, job.task_id, job.config_id, holder, unless_wanted=True
                )
                if kept is None:
                    released = True
                    return Outcome.DELIVERED
                if kept.delivered_seq == before:
                    return Outcome.DELIVERED  # wanted, but no event past it: nothing to send
                # A commit wanted more while this one sent: on with it, under the same lease.
                config = kept
        except DeliveryFailed as exc:
            self._failed(job, config, holder, delivery, exc)
            return Outcome.FAILED
        except _OwnerRateReached as reached:
            marked = reached.marked
        finally:
            if not released:
                self._configs.end_delivery(job.owner, job.task_id, job.config_id, holder)
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

    def _backing_off(self, job: PushJob, config: StoredPushConfig) -> Outcome:
        """The config failed its last attempts: nothing is posted before its back-off ends.
        One delivery, named by the config and that time, comes back then for all its events
        (each event's delivery that finds it backing off queues the same name). Once the
        config recorded its failure (`max_failures` in a row), none comes back: its next
        event does, through the sweep of the config its commit made lag."""
        assert config.backoff_until is not None
        note(backingOff=True)
        if config.failed_at is not None:
            return Outcome.NOTHING_TO_DO
        until = config.backoff_until
        carrier = PushJob(job.owner, job.task_id, job.config_id, max(job.seq, config.wanted_seq))
        if self.queue is None:
            return Outcome.BUSY
        delay = max((until - self._clock.now()).total_seconds(), 0.0)
        try:
            self.queue.enqueue(
                f"{carrier.name}-b{int(until.timestamp())}", carrier.payload(), delay=delay
            )
        except Exception:
            log.exception("could not queue the delivery %s again; the queue retries it", job.name)
            return Outcome.BUSY
        return Outcome.RESCHEDULED

    def _again(self, job: PushJob, why: str, delay: float) -> Outcome:
        """Queue the job again, under a name of its own, and let this delivery go: no
        attempt of the queue is spent on waiting."""
        if self.queue is None:
            return Outcome.BUSY
        # In milliseconds: a job may be queued again several times a second (REQUEUE_SOON),
        # and a name is taken once.
        now = int(self._clock.now().timestamp() * 1000)
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
        failures = config.failures + 1
        given_up = failures >= self._max_failures
        final = delivery.final or given_up
        # The config's back-off, across its events: BACKOFF_FIRST, doubling, to BACKOFF_MAX.
        backoff = min(BACKOFF_FIRST * 2 ** min(failures - 1, 32), BACKOFF_MAX)
        self._configs.attempt_failed(
            job.owner,
            job.task_id,
            job.config_id,
            holder,
            error.recorded[:MAX_ERROR_CHARS],
            at=now,
            retry_at=None if final else now + RETRY_WINDOW,
            backoff_until=now + timedelta(seconds=backoff),
        )
        note(failures=failures)
        if final:
            log.error(
                "push to %s for task %s, config %s failed %s: %s; the config records it, and "
                "the next event or an update of the config retries",
                shown(config.config.url),
                job.task_id,
                job.config_id,
                f"{failures} times in a row"
                if given_up and not delivery.final
                else f"at the queue's last attempt ({delivery.attempt + 1})",
                error,
            )
            return
        log.warning(
            "push to %s for task %s, config %s failed (attempt %d, %d in a row; next in %.0f s "
            "at the earliest): %s",
            shown(config.config.url),
            job.task_id,
            job.config_id,
            delivery.attempt + 1,
            failures,
            backoff,
            error,
        )

    def _send_pending(
        self, job: PushJob, config: StoredPushConfig, holder: str, deadline: float
    ) -> int | None:
        """Post what the config has not received, up to EVENTS_PER_DELIVERY events and the
        delivery's `deadline` for starting a POST: None when it is now up to date, else the
        last event it got."""
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
            if self._clock.monotonic() > deadline:
                return marked
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
        # One deadline for the whole exchange, its redirects within it.
        ends = self._clock.monotonic() + TIMEOUT_SECONDS
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
                    left = ends - self._clock.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"no answer within {TIMEOUT_SECONDS} s")
                    status, location = self._sender.post(target, body, headers, left)
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
