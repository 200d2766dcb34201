"""Push notifications delivered to a real webhook: in order, with their headers, signed,
retried until taken, and never posted twice once taken (embedded backend)."""

from __future__ import annotations

import collections
import contextlib
import heapq
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from shared import push_delivery
from shared.jobs import Outcome, PushJob
from shared.model import (
    ArtifactUpdate,
    Message,
    Part,
    PushAuthentication,
    PushConfig,
    Role,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
    utc_now,
)
from shared.ports import Delivery
from shared.push_delivery import (
    BACKOFF_FIRST,
    EVENTS_PER_DELIVERY,
    IN_FLIGHT_SHARED,
    MAX_ANSWER_HEAD_BYTES,
    MAX_FAILURES,
    REQUEUE_SOON,
    STORE_MARGIN_SECONDS,
    TIMEOUT_SECONDS,
    WAIT_SECONDS,
    Deliverer,
    OwnerRate,
    OwnerSlots,
    PinnedSender,
)
from shared.push_notify import SWEEP_AFTER, SWEEP_BATCH, PushNotifier, PushSweeper
from shared.push_url import PushTarget, PushURLRefused, resolve_push_url
from shared.queue.inline import InlineQueue
from shared.store.memory import MemoryTaskStore
from shared.store.memory_push import MemoryPushConfigStore
from shared.store.notifying import NotifyingTaskStore
from tests.clock import ManualClock
from tests.conftest import Client
from tests.test_ids import text_id
from tests.test_push_signing import EC_KEY
from tests.webhook import Webhook


@pytest.fixture
def hook() -> Any:
    webhook = Webhook()
    yield webhook
    webhook.close()


def agent(make_client: Any, **settings: Any) -> Client:
    values = {
        "handler": "tests.handlers.slow",
        "push_allowed_hosts": ("localhost",),
        "commit_interval": 0.05,
        **settings,
    }
    client: Client = make_client(**values)
    return client


def start(client: Client, hook: Webhook, text: str, **config: Any) -> str:
    params = {
        "message": {"messageId": text_id(text), "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"taskPushNotificationConfig": {"url": hook.url(), **config}},
    }
    task_id: str = client.result("SendMessage", params, version="1.0")["task"]["id"]
    return task_id


def drained(client: Client) -> None:
    """Wait until the app's in-process push queue has nothing left to do: no delivery or retry
    is under way, so nothing more will be posted."""
    store = client.app.service.ports.store
    assert isinstance(store, NotifyingTaskStore)
    assert isinstance(store.on_commit, PushNotifier)
    queue = store.on_commit.queue
    assert isinstance(queue, InlineQueue)
    assert queue.join(30), "the push queue did not drain in 30 s"


def news(client: Client, task_id: str) -> list[dict[str, Any]]:
    """The task's status and artifact events, as the v1.0 webhook should receive them."""
    from shared.dialects.v1_0 import V1

    store = client.app.service.ports.store
    task = store.get("anonymous", task_id)
    assert task is not None
    return [
        V1.stream_update(e.event, task.task)
        for e in store.events("anonymous", task_id)
        if isinstance(e.event, StatusUpdate | ArtifactUpdate)
    ]


def test_every_event_arrives_once_in_order_with_its_headers(
    make_client: Any, hook: Webhook
) -> None:
    client = agent(make_client, push_signing_key=EC_KEY)
    task_id = start(
        client,
        hook,
        "steps=5 delay=0.1",
        token="tok-1",
        authentication={"scheme": "Bearer", "credentials": "sekret"},
    )
    expected = news(client, task_id)
    assert len(expected) >= 7  # working, five steps, the artifact, completed
    got = hook.wait_accepted(len(expected))
    drained(client)  # nothing more (no duplicates) comes after
    assert [r.json for r in hook.accepted()] == expected
    jwks = client.http.get("/.well-known/jwks.json").json()
    for received in got:
        assert received.headers["Content-Type"] == "application/a2a+json"
        assert received.headers["X-A2A-Notification-Token"] == "tok-1"
        assert received.headers["Authorization"] == "Bearer sekret"
        token = received.headers["X-A2A-Notification-Signature"]
        [key] = jwks["keys"]
        claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=["ES256"], audience=hook.url())
        assert claims["taskId"] == task_id
        from shared.push_signing import body_hash

        assert claims["bodySha256"] == body_hash(received.body)


def test_a_v03_config_receives_the_task(make_client: Any, hook: Webhook) -> None:
    client = agent(make_client)
    message = {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "steps=1"}]}
    params = {"message": message, "configuration": {"pushNotificationConfig": {"url": hook.url()}}}
    task = client.result("message/send", params)
    received = hook.wait_until(
        lambda got: any(r.json["status"]["state"] == "completed" for r in got)
    )
    body = received[-1].json
    assert body["kind"] == "task" and body["id"] == task["id"]
    assert received[-1].headers["Content-Type"] == "application/json"


@pytest.fixture
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing config's back-off from 50 ms (5 s as shipped): these tests wait for a real
    webhook across several failures, on the system clock."""
    monkeypatch.setattr(push_delivery, "BACKOFF_FIRST", 0.05)


@pytest.mark.usefixtures("quick_backoff")
def test_a_webhook_answering_500_is_retried(make_client: Any, hook: Webhook) -> None:
    hook.answers.extend([500, 500])
    client = agent(make_client)
    task_id = start(client, hook, "steps=1 delay=0")
    expected = news(client, task_id)
    hook.wait_accepted(len(expected))
    assert [r.status for r in hook.received[:2]] == [500, 500]
    drained(client)
    assert [r.json for r in hook.accepted()] == expected


@pytest.mark.usefixtures("quick_backoff")
def test_a_webhook_down_then_up_gets_everything_once(make_client: Any, hook: Webhook) -> None:
    hook.down()
    client = agent(make_client)
    task_id = start(client, hook, "steps=3 delay=0.05")
    expected = news(client, task_id)
    hook.wait_refused(3)  # deliveries fail (connection reset) and are retried with backoff
    assert hook.received == []
    hook.up()
    hook.wait_accepted(len(expected), timeout=30)
    drained(client)
    assert [r.json for r in hook.accepted()] == expected


def lone_task(url: str) -> tuple[MemoryTaskStore, MemoryPushConfigStore]:
    """A working task with one event and one config, on stores of its own: no in-process
    delivery can hold the config's sending lease (BUSY) or post before the test's."""
    store, configs = MemoryTaskStore(), MemoryPushConfigStore()
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))
    working = StatusUpdate(task_id="t", context_id="c", status=task.status)
    store.create("anonymous", task, [working], dialect="1.0")
    configs.put("anonymous", PushConfig(id="p", task_id="t", url=url), dialect="1.0")
    return store, configs


LONE_JOB = {"owner": "anonymous", "taskId": "t", "configId": "p", "seq": 1}


def test_a_url_refused_at_send_time_is_not_posted(hook: Webhook) -> None:
    store, configs = lone_task(hook.url())

    def refuse(url: str) -> PushTarget:
        # The host's DNS changed since the config was set.
        raise PushURLRefused("the host resolves to a loopback address")

    deliverer = Deliverer(store, configs, resolve_url=refuse)
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.FAILED
    assert hook.received == []
    stored = configs.get("anonymous", "t", "p")
    assert stored is not None and stored.delivered_seq == 0  # the retry will send it all


class Scripted:
    """A PushSender answering each URL as scripted, posting nothing anywhere."""

    def __init__(self, answers: dict[str, tuple[int, str | None]]) -> None:
        self.answers = answers
        self.posted: list[str] = []
        self.targets: list[PushTarget] = []
        self.headers: list[dict[str, str]] = []

    def post(
        self, target: PushTarget, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, str | None]:
        self.posted.append(target.url)
        self.targets.append(target)
        self.headers.append(dict(headers))
        return self.answers[target.url]


PUBLIC = "93.184.216.34"


def test_redirects_are_followed_and_every_target_is_checked() -> None:
    store, configs = lone_task("https://a.example.com/hook")
    checked: list[str] = []

    def check(url: str) -> PushTarget:
        checked.append(url)
        answer = "10.0.0.1" if "internal" in url else PUBLIC
        return resolve_push_url(url, resolve=lambda host, port: [answer])

    sender = Scripted(
        {
            "https://a.example.com/hook": (307, "/moved"),
            "https://a.example.com/moved": (302, "https://b.example.com/final"),
            "https://b.example.com/final": (204, None),
        }
    )
    deliverer = Deliverer(store, configs, resolve_url=check, sender=sender)
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.DELIVERED
    assert sender.posted == checked == list(sender.answers)

    store, configs = lone_task("https://a.example.com/hook")
    sender = Scripted({"https://a.example.com/hook": (301, "http://internal.example.com/")})
    deliverer = Deliverer(store, configs, resolve_url=check, sender=sender)
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.FAILED
    assert sender.posted == ["https://a.example.com/hook"]  # the refused target got nothing

    store, configs = lone_task("https://a.example.com/hook")
    loop = Scripted({"https://a.example.com/hook": (302, "/hook")})
    deliverer = Deliverer(store, configs, resolve_url=check, sender=loop)
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.FAILED
    assert len(loop.posted) == 4  # the first POST and three redirects, then it gives up
    stored = configs.get("anonymous", "t", "p")
    assert stored is not None and stored.delivered_seq == 0


def test_a_deleted_config_gets_nothing(make_client: Any, hook: Webhook) -> None:
    client = agent(make_client)
    task_id = start(client, hook, "steps=0 delay=0")
    configs = client.app.service.ports.push_configs
    assert configs is not None
    deliverer = Deliverer(client.app.service.ports.store, configs, resolve_url=resolve_push_url)
    payload = {"owner": "anonymous", "taskId": task_id, "configId": "gone", "seq": 5}
    assert deliverer.deliver(payload, Delivery()) is Outcome.NOTHING_TO_DO
    with pytest.raises(ValueError, match="configId"):
        deliverer.deliver({"owner": "x", "taskId": task_id}, Delivery())


def test_a_commit_of_many_events_is_delivered_whole(make_client: Any, hook: Webhook) -> None:
    # One commit (the interval outlasts the turn) with more events than one delivery posts.
    client = agent(make_client, commit_interval=30)
    task_id = start(client, hook, "steps=30 delay=0")
    expected = news(client, task_id)
    assert len(expected) > 30
    hook.wait_accepted(len(expected), timeout=30)
    drained(client)
    assert [r.json for r in hook.accepted()] == expected


def test_a_rebinding_name_never_gets_the_post_to_loopback(monkeypatch: Any) -> None:
    """The resolver answers public, then loopback (a DNS rebinding): the POST connects to the
    public address that passed the check, and nothing resolves the name a second time."""
    store, configs = lone_task("https://rebind.example.com/hook")
    answers = iter([[PUBLIC], ["127.0.0.1"], ["127.0.0.1"]])
    resolved: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        resolved.append(host)
        return next(answers)

    connected: list[tuple[str, int]] = []

    def connect(address: tuple[str, int], *args: Any, **kwargs: Any) -> Any:
        connected.append(address)
        raise ConnectionRefusedError("no network in tests")

    def getaddrinfo(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the name was resolved a second time")

    monkeypatch.setattr(socket, "create_connection", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    clock = ManualClock()
    deliverer = Deliverer(
        store,
        configs,
        resolve_url=lambda url: resolve_push_url(url, resolve=rebinding),
        clock=clock,
    )
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.FAILED  # refused: retried
    assert connected == [(PUBLIC, 443)]
    assert resolved == ["rebind.example.com"]
    # The retry (once the config's back-off passed) resolves again, gets loopback, and
    # connects nowhere.
    clock.advance(BACKOFF_FIRST)
    assert deliverer.deliver(LONE_JOB, Delivery(attempt=1)) is Outcome.FAILED
    assert connected == [(PUBLIC, 443)]


def test_credentials_do_not_follow_a_redirect_to_another_origin() -> None:
    store, configs = lone_task("https://a.example.com/hook")
    configs.put(
        "anonymous",
        PushConfig(
            id="p",
            task_id="t",
            url="https://a.example.com/hook",
            token="secret-token",
            authentication=PushAuthentication(schemes=("Bearer",), credentials="secret-key"),
        ),
        dialect="1.0",
    )
    sender = Scripted(
        {
            "https://a.example.com/hook": (307, "/moved"),  # same origin: credentials kept
            "https://a.example.com/moved": (308, "https://b.example.com/x"),
            "https://b.example.com/x": (302, "https://a.example.com/back"),
            "https://a.example.com/back": (204, None),
        }
    )
    deliverer = Deliverer(
        store,
        configs,
        resolve_url=lambda url: resolve_push_url(url, resolve=lambda host, port: [PUBLIC]),
        sender=sender,
    )
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.DELIVERED
    with_credentials = [
        "Authorization" in h and "X-A2A-Notification-Token" in h for h in sender.headers
    ]
    assert with_credentials == [True, True, False, False]  # once dropped, never sent again
    assert sender.headers[0]["Authorization"] == "Bearer secret-key"
    assert "secret" not in json.dumps(sender.headers[2:])


def test_a_port_not_allowed_fails_the_delivery_without_connecting() -> None:
    store, configs = lone_task("https://hooks.example.com:8443/hook")
    sender = Scripted({})
    deliverer = Deliverer(
        store,
        configs,
        resolve_url=lambda url: resolve_push_url(url, resolve=lambda host, port: [PUBLIC]),
        sender=sender,
    )
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.FAILED
    assert sender.posted == []


def self_signed(tmp: Path, host: str) -> tuple[Path, Path]:
    """A certificate for `host` (and its key), signed by itself."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_https_goes_to_the_checked_address_and_verifies_the_host_name(tmp_path: Path) -> None:
    """A TLS webhook for hooks.example.com served on 127.0.0.1: the pinned POST reaches it
    with SNI and the Host header of the name, and a name its certificate does not cover is
    refused even at the same address."""
    cert, key = self_signed(tmp_path, "hooks.example.com")
    seen: list[tuple[str | None, str]] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.headers["Host"], self.path))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(cert, key)
    server.socket = serving.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        trusting = ssl.create_default_context(cafile=str(cert))
        sender = PinnedSender(trusting)
        good = PushTarget(
            f"https://hooks.example.com:{port}/h?x=1",
            "https",
            "hooks.example.com",
            port,
            ("127.0.0.1",),
        )
        assert sender.post(good, b"{}", {"Content-Type": "application/json"}, 5) == (204, None)
        assert seen == [(f"hooks.example.com:{port}", "/h?x=1")]
        other = PushTarget(
            f"https://other.example.com:{port}/h",
            "https",
            "other.example.com",
            port,
            ("127.0.0.1",),
        )
        with pytest.raises(ssl.SSLCertVerificationError):
            sender.post(other, b"{}", {}, 5)
        with pytest.raises(ssl.SSLCertVerificationError):  # the system's roots: untrusted
            PinnedSender().post(good, b"{}", {}, 5)
        assert len(seen) == 1
    finally:
        server.shutdown()
        server.server_close()


def public(url: str) -> PushTarget:
    """Every host is a public address (nothing is posted: the tests' senders are scripted)."""
    return resolve_push_url(url, resolve=lambda host, port: [PUBLIC])


class Recorded:
    """A DelayingTaskQueue that only records what is queued (name, payload, delay)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, dict[str, Any], float]] = []

    def enqueue(self, name: str, payload: dict[str, Any], *, delay: float = 0.0) -> bool:
        if any(entry[0] == name for entry in self.entries):
            return False
        self.entries.append((name, payload, delay))
        return True

    def close(self) -> None:
        pass


def test_a_delivery_finding_its_config_busy_comes_back_later_without_spending_an_attempt() -> None:
    store, configs = lone_task("https://a.example.com/hook")
    configs.want("anonymous", "t", "p", 1, utc_now())
    until = utc_now() + timedelta(minutes=1)
    assert configs.begin_delivery("anonymous", "t", "p", "another delivery", until)
    sender = Scripted({"https://a.example.com/hook": (204, None)})
    deliverer = Deliverer(store, configs, resolve_url=public, sender=sender)
    # Without a queue to come back through, the queue's own retry does (an attempt spent).
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.BUSY
    queue = Recorded()
    deliverer.queue = queue
    outcome = deliverer.deliver(LONE_JOB, Delivery(attempt=3))
    assert outcome is Outcome.RESCHEDULED and outcome.accepted
    [(name, payload, delay)] = queue.entries
    assert payload == LONE_JOB and delay == WAIT_SECONDS
    assert name.startswith(PushJob.from_payload(LONE_JOB).name + "-w")
    assert sender.posted == []
    configs.end_delivery("anonymous", "t", "p", "another delivery")
    assert deliverer.deliver(payload, Delivery()) is Outcome.DELIVERED
    assert sender.posted == ["https://a.example.com/hook"]
    # Caught up: a delivery that finds the config busy now has nothing to wait for.
    assert configs.begin_delivery("anonymous", "t", "p", "a third", until)
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.NOTHING_TO_DO
    assert len(queue.entries) == 1


def test_the_last_failed_attempt_is_recorded_on_the_config_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, configs = lone_task("https://a.example.com/hook")
    configs.want("anonymous", "t", "p", 1, utc_now())
    sender = Scripted({"https://a.example.com/hook": (500, None)})
    clock = ManualClock()
    deliverer = Deliverer(store, configs, resolve_url=public, sender=sender, clock=clock)
    assert deliverer.deliver(LONE_JOB, Delivery(attempt=0)) is Outcome.FAILED
    stored = configs.get("anonymous", "t", "p")
    assert stored is not None and stored.failed_at is None  # the queue retries
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    clock.advance(BACKOFF_FIRST)
    assert deliverer.deliver(LONE_JOB, Delivery(attempt=3, final=True)) is Outcome.FAILED
    stored = configs.get("anonymous", "t", "p")
    assert stored is not None
    assert (stored.last_error, stored.failed_at) == ("the webhook answered HTTP 500", clock.now())
    [error] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "task t, config p failed at the queue's last attempt (4)" in error.getMessage()
    # The next event retries (after the config's back-off: 2 failures in a row, 10 s): a
    # delivery that gets through forgets the failure.
    sender.answers["https://a.example.com/hook"] = (200, None)
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.NOTHING_TO_DO  # backing off
    clock.advance(2 * BACKOFF_FIRST)
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.DELIVERED
    stored = configs.get("anonymous", "t", "p")
    assert stored is not None and (stored.last_error, stored.failed_at) == (None, None)


def test_a_delivery_with_more_than_its_share_queues_the_rest() -> None:
    store, configs = lone_task("https://a.example.com/hook")
    stored = store.get("anonymous", "t")
    assert stored is not None
    more = [
        StatusUpdate(task_id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))
        for _ in range(EVENTS_PER_DELIVERY + 5)
    ]
    stored = store.commit(stored, stored.task, more)
    configs.want("anonymous", "t", "p", stored.last_seq, utc_now())
    sender = Scripted({"https://a.example.com/hook": (204, None)})
    deliverer = Deliverer(store, configs, resolve_url=public, sender=sender)
    deliverer.queue = queue = Recorded()
    job = {**LONE_JOB, "seq": stored.last_seq}
    assert deliverer.deliver(job, Delivery()) is Outcome.RESCHEDULED
    assert len(sender.posted) == EVENTS_PER_DELIVERY
    [(_, payload, delay)] = queue.entries
    assert (payload, delay) == (job, 0.0)
    assert deliverer.deliver(payload, Delivery()) is Outcome.DELIVERED
    assert len(sender.posted) == stored.last_seq


def test_the_notifier_records_the_lag_before_it_queues_and_the_sweeper_redrives_it() -> None:
    store, configs = lone_task("https://a.example.com/hook")
    configs.put(
        "anonymous", PushConfig(id="q", task_id="t", url="https://b.example.com/"), dialect="0.3"
    )
    clock = ManualClock()
    lost = Recorded()  # the enqueue "succeeds", and the entry is then lost with the queue
    notify = NotifyingTaskStore(store, PushNotifier(configs, lost, clock=clock))
    stored = notify.get("anonymous", "t")
    assert stored is not None
    done = StatusUpdate(task_id="t", context_id="c", status=TaskStatus(state=TaskState.COMPLETED))
    stored = notify.commit(stored, stored.task, [done])
    assert [payload["configId"] for _, payload, _ in lost.entries] == ["p", "q"]
    queue = Recorded()
    sweep = PushSweeper(configs, queue)
    assert sweep(clock.now()) == 0  # a delivery gets its time first
    clock.advance(SWEEP_AFTER.total_seconds())
    assert sweep(clock.now()) == 2
    assert sorted((p["configId"], p["seq"]) for _, p, _ in queue.entries) == [("p", 2), ("q", 2)]
    assert sweep(clock.now()) == 0  # swept again in the same window: nothing more
    # Delivered: nothing lags, nothing to sweep, however late.
    sender = Scripted(
        {"https://a.example.com/hook": (204, None), "https://b.example.com/": (204, None)}
    )
    deliverer = Deliverer(store, configs, resolve_url=public, sender=sender)
    for _, payload, _ in queue.entries:
        assert deliverer.deliver(payload, Delivery()) is Outcome.DELIVERED
    clock.advance(3600 * 24)
    assert sweep(clock.now()) == 0


class Aborting(MemoryPushConfigStore):
    """A push config store whose `want` fails, as Firestore aborts a write that waited on a
    config locked by a delivery's transaction (seen in `make soak`)."""

    def want(self, owner: str, task_id: str, config_id: str, seq: int, sweep_at: datetime) -> None:
        raise RuntimeError("409 Transaction lock timeout.")


def test_a_lag_that_cannot_be_recorded_still_queues_every_config_s_delivery() -> None:
    store = MemoryTaskStore()
    configs = Aborting(tasks=store)
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))
    store.create("anonymous", task, [], dialect="1.0")
    for config_id in ("p", "q"):
        hook = PushConfig(id=config_id, task_id="t", url="https://a.example.com/")
        configs.put("anonymous", hook, dialect="1.0")
    queue = Recorded()
    notify = NotifyingTaskStore(store, PushNotifier(configs, queue))
    stored = notify.get("anonymous", "t")
    assert stored is not None
    done = StatusUpdate(task_id="t", context_id="c", status=TaskStatus(state=TaskState.COMPLETED))
    notify.commit(stored, stored.task, [done])
    assert [payload["configId"] for _, payload, _ in queue.entries] == ["p", "q"]


def test_one_sweep_redrives_every_lagging_config_past_a_full_page() -> None:
    configs, now = MemoryPushConfigStore(), ManualClock().now()
    for n in range(SWEEP_BATCH + 50):
        hook = PushConfig(id="p", task_id=f"t{n}", url="https://a.example.com/")
        configs.put("anonymous", hook, dialect="1.0")
        configs.want("anonymous", f"t{n}", "p", 2, now)
    queue = Recorded()
    assert PushSweeper(configs, queue)(now) == SWEEP_BATCH + 50
    assert len({p["taskId"] for _, p, _ in queue.entries}) == SWEEP_BATCH + 50


def test_a_message_only_commit_queues_nothing() -> None:
    store, configs = lone_task("https://a.example.com/hook")
    queue = Recorded()
    notify = NotifyingTaskStore(store, PushNotifier(configs, queue))
    stored = notify.get("anonymous", "t")
    assert stored is not None
    message = Message(
        message_id="m", role=Role.USER, parts=(Part(text="more"),), task_id="t", context_id="c"
    )
    notify.commit(stored, stored.task, [message])
    assert queue.entries == []
    assert configs.lagging(utc_now() + timedelta(days=1), 10) == []


class Unreachable:
    """A PushSender whose every connection is refused."""

    def post(
        self, target: PushTarget, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, str | None]:
        raise ConnectionRefusedError(111, "Connection refused")


@pytest.mark.parametrize(
    ("host", "recorded"),
    [
        ("loopback.example.com", "refused: not a public address"),
        ("private.example.com", "refused: not a public address"),
        ("nowhere.example.com", "refused: not a public address"),  # does not resolve
        ("public.example.com", "could not connect"),
    ],
)
def test_last_error_never_tells_how_a_host_was_refused(
    host: str, recorded: str, caplog: pytest.LogCaptureFixture
) -> None:
    # An owner reading lastError must not learn which internal names exist: one that
    # resolves to loopback and one that does not resolve read alike.
    table = {
        "loopback.example.com": ["127.0.0.1"],
        "private.example.com": ["10.1.2.3"],
        "public.example.com": [PUBLIC],
    }

    def resolve(url: str) -> PushTarget:
        def answer(name: str, port: int) -> list[str]:
            if name not in table:
                raise OSError("Name or service not known")
            return table[name]

        return resolve_push_url(url, resolve=answer)

    url = f"https://{host}/hooks/T0/secret-path?token=s3cret"
    store, configs = lone_task(url)
    configs.want("anonymous", "t", "p", 1, utc_now())
    deliverer = Deliverer(store, configs, resolve_url=resolve, sender=Unreachable())
    with caplog.at_level(logging.WARNING, logger="a2a.push"):
        assert deliverer.deliver(LONE_JOB, Delivery(attempt=2, final=True)) is Outcome.FAILED
    stored = configs.get("anonymous", "t", "p")
    assert stored is not None and stored.last_error == recorded
    # The operator's log says which, and names the webhook without its path or query.
    [line] = [r.getMessage() for r in caplog.records if r.name == "a2a.push"]
    assert f"push to https://{host}/… for task t" in line
    assert "secret-path" not in line and "s3cret" not in line
    assert ("does not resolve" in line) == (host == "nowhere.example.com")


def test_a_failed_attempt_logs_the_webhook_without_its_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = "https://hooks.slack.com/services/T000/B000/XXXXSECRET"
    store, configs = lone_task(url)
    configs.want("anonymous", "t", "p", 1, utc_now())
    sender = Scripted({url: (500, None)})
    deliverer = Deliverer(store, configs, resolve_url=public, sender=sender)
    with caplog.at_level(logging.WARNING, logger="a2a.push"):
        assert deliverer.deliver(LONE_JOB, Delivery(attempt=0)) is Outcome.FAILED
    [line] = [r.getMessage() for r in caplog.records if r.name == "a2a.push"]
    assert "https://hooks.slack.com/… for task t, config p failed (attempt 1, 1 in a row" in line
    assert "XXXXSECRET" not in line and "/services" not in line


def test_an_owners_posts_per_minute_are_bounded_and_the_rest_waits_its_turn() -> None:
    # The finding: 12 requests made 221 POSTs in 40 s against a webhook answering 500. Past
    # the owner's minute the delivery is queued again for when it has room, never dropped.
    store, configs = lone_task("https://a.example.com/hook")
    stored = store.get("anonymous", "t")
    assert stored is not None
    working = StatusUpdate(task_id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))
    stored = store.commit(stored, stored.task, [working] * 4)
    configs.want("anonymous", "t", "p", stored.last_seq, utc_now())
    clock = ManualClock()
    sender = Scripted({"https://a.example.com/hook": (204, None)})
    deliverer = Deliverer(
        store, configs, resolve_url=public, sender=sender, clock=clock, owner_posts_per_minute=3
    )
    deliverer.queue = queue = Recorded()
    job = {**LONE_JOB, "seq": stored.last_seq}
    assert deliverer.deliver(job, Delivery()) is Outcome.RESCHEDULED
    assert len(sender.posted) == 3
    [(_, payload, delay)] = queue.entries
    assert payload == job and delay == OwnerRate.WINDOW  # when the first POST leaves the minute
    # Another owner's webhooks are not held up by this one's.
    other = PushConfig(id="p", task_id="t2", url="https://b.example.com/hook")
    task2 = Task(id="t2", context_id="c", status=TaskStatus(state=TaskState.WORKING))
    store.create(
        "bob",
        task2,
        [StatusUpdate(task_id="t2", context_id="c", status=task2.status)],
        dialect="1.0",
    )
    configs.put("bob", other, dialect="1.0")
    configs.want("bob", "t2", "p", 1, utc_now())
    sender.answers["https://b.example.com/hook"] = (204, None)
    bobs = {"owner": "bob", "taskId": "t2", "configId": "p", "seq": 1}
    assert deliverer.deliver(bobs, Delivery()) is Outcome.DELIVERED
    # Still within alice's minute: nothing posted, queued again.
    assert deliverer.deliver(payload, Delivery()) is Outcome.RESCHEDULED
    assert len(sender.posted) == 4
    clock.advance(OwnerRate.WINDOW)
    assert deliverer.deliver(payload, Delivery()) is Outcome.DELIVERED
    assert len(sender.posted) == 4 + stored.last_seq - 3
    delivered = configs.get("anonymous", "t", "p")
    assert delivered is not None and delivered.delivered_seq == stored.last_seq


def test_failed_posts_count_in_the_owners_minute() -> None:
    store, configs = lone_task("https://a.example.com/hook")
    configs.want("anonymous", "t", "p", 1, utc_now())
    clock = ManualClock()
    sender = Scripted({"https://a.example.com/hook": (500, None)})
    deliverer = Deliverer(
        store, configs, resolve_url=public, sender=sender, clock=clock, owner_posts_per_minute=2
    )
    deliverer.queue = Recorded()
    for failures in range(2):
        assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.FAILED
        clock.advance(BACKOFF_FIRST * 2**failures)  # the config's back-off
    # The queue's retry comes back within the minute: rescheduled, no POST, no attempt spent.
    assert deliverer.deliver(LONE_JOB, Delivery(attempt=2)) is Outcome.RESCHEDULED
    assert len(sender.posted) == 2


# -- slow webhooks (issue 36, 5) ------------------------------------------------------------


class RawWebhook:
    """A TCP server that reads a request's head, then answers with `answer(connection)`,
    written by the test: a webhook misbehaving below HTTP."""

    def __init__(self, answer: Any) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._answer = answer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self._server.accept()
                with connection:
                    connection.recv(65536)
                    with contextlib.suppress(OSError):
                        self._answer(connection, self._stop)

    def target(self) -> PushTarget:
        url = f"http://hook.example.com:{self.port}/h"
        return PushTarget(url, "http", "hook.example.com", self.port, ("127.0.0.1",))

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close does not)
        self._server.close()
        self._thread.join(5)
        assert not self._thread.is_alive()


def test_a_trickling_webhook_is_cut_at_the_posts_deadline() -> None:
    # The finding: a header line every 5 s held one POST 45 s under a 10 s read timeout.
    # Here a line every 0.2 s against a 1 s deadline, for 5 s, then a 200.
    def trickle(connection: socket.socket, stop: threading.Event) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\n")
        for _ in range(25):
            if stop.wait(0.2):
                return
            connection.sendall(b"X-Pad: a\r\n")
        connection.sendall(b"Content-Length: 0\r\n\r\n")

    hook = RawWebhook(trickle)
    try:
        began = time.monotonic()
        with pytest.raises(OSError, match=r"timed out|did not answer within"):
            PinnedSender().post(hook.target(), b"{}", {}, 1.0)
        took = time.monotonic() - began
        assert took < 2.0, took  # the deadline (1 s) and a read's worth, never the 5 s
    finally:
        hook.close()


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * (MAX_ANSWER_HEAD_BYTES + 1) + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X-Pad: a\r\n" * 101 + b"\r\n",
    ],
    ids=["bytes", "lines"],
)
def test_an_answer_head_over_its_limits_is_no_answer(head: bytes) -> None:
    def answer(connection: socket.socket, stop: threading.Event) -> None:
        connection.sendall(head)

    hook = RawWebhook(answer)
    try:
        with pytest.raises(OSError, match=r"answer head is over|answer is not HTTP"):
            PinnedSender().post(hook.target(), b"{}", {}, 5.0)
        # Within the limits, the same webhook's answer is taken.
        ok = b"HTTP/1.1 204 No Content\r\n" + b"X-Pad: a\r\n" * 90 + b"\r\n"
        hook._answer = lambda connection, stop: connection.sendall(ok)
        assert PinnedSender().post(hook.target(), b"{}", {}, 5.0) == (204, None)
    finally:
        hook.close()


class Held:
    """A PushSender whose POSTs to `slow` URLs wait until released; others answer 204."""

    def __init__(self, slow: str) -> None:
        self.slow = slow
        self.release = threading.Event()
        self.waiting = threading.Semaphore(0)
        self.posted: list[str] = []
        self._lock = threading.Lock()

    def post(
        self, target: PushTarget, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, str | None]:
        with self._lock:
            self.posted.append(target.url)
        if self.slow in target.url:
            self.waiting.release()
            assert self.release.wait(30)
        return 204, None


def owned_tasks(
    store: MemoryTaskStore, configs: MemoryPushConfigStore, owner: str, count: int, url: str
) -> list[dict[str, Any]]:
    jobs = []
    for n in range(count):
        task = Task(id=f"t{n}", context_id="c", status=TaskStatus(state=TaskState.WORKING))
        store.create(
            owner,
            task,
            [StatusUpdate(task_id=task.id, context_id="c", status=task.status)],
            dialect="1.0",
        )
        configs.put(owner, PushConfig(id="p", task_id=task.id, url=f"{url}/{n}"), dialect="1.0")
        configs.want(owner, task.id, "p", 1, utc_now())
        jobs.append({"owner": owner, "taskId": task.id, "configId": "p", "seq": 1})
    return jobs


def test_one_owners_slow_webhooks_never_hold_every_delivery_thread() -> None:
    # The finding: 20 slow webhooks of one owner on make run's 16 delivery threads: another
    # owner's webhook heard nothing for 90 s.
    store, configs = MemoryTaskStore(), MemoryPushConfigStore()
    slow = owned_tasks(store, configs, "mallory", 20, "https://slow.example.com")
    [prompt] = owned_tasks(store, configs, "alice", 1, "https://fast.example.com")
    sender = Held("slow.example.com")
    deliverer = Deliverer(store, configs, resolve_url=public, sender=sender)
    deliverer.queue = queue = Recorded()
    with ThreadPoolExecutor(16) as threads:  # make run's delivery threads
        futures = [threads.submit(deliverer.deliver, job, Delivery()) for job in slow]
        # Mallory's first ones take the instance's shared slots (any owner may, while fewer
        # than IN_FLIGHT_SHARED are under way), then it is past its share: its other
        # deliveries are queued again, for when one of its own has had its POST's time,
        # and their threads are free at once.
        for _ in range(IN_FLIGHT_SHARED):
            assert sender.waiting.acquire(timeout=10)
        bounced = 20 - IN_FLIGHT_SHARED
        assert finished(futures, bounced)
        assert len(queue.entries) == bounced
        assert all(1 <= delay <= TIMEOUT_SECONDS for _, _, delay in queue.entries)
        # Another owner's webhook is served while mallory's eight still hang.
        assert threads.submit(deliverer.deliver, prompt, Delivery()).result(timeout=10) is (
            Outcome.DELIVERED
        )
        assert sum(f.done() for f in futures) == bounced
        sender.release.set()
        outcomes = [f.result(timeout=10) for f in futures]
    assert sorted(o.value for o in outcomes) == sorted(
        [Outcome.DELIVERED.value] * IN_FLIGHT_SHARED + [Outcome.RESCHEDULED.value] * bounced
    )
    assert sum("slow" in url for url in sender.posted) == IN_FLIGHT_SHARED
    # Their turn comes: each queued delivery finds a free slot and posts.
    for _, payload, _ in queue.entries:
        assert deliverer.deliver(payload, Delivery()) is Outcome.DELIVERED


def finished(futures: list[Future[Outcome]], count: int) -> bool:
    """Whether `count` of the futures finish, each awaited (10 s at most for the next)."""
    while sum(f.done() for f in futures) < count:
        pending = [f for f in futures if not f.done()]
        done, _ = wait(pending, timeout=10, return_when=FIRST_COMPLETED)
        if not done:
            return False
    return True


def test_one_owners_burst_of_fast_webhooks_is_not_held_back() -> None:
    # While the instance has room, a single owner's deliveries all start at once (an agent
    # with one tenant sends its bursts as they come).
    store, configs = MemoryTaskStore(), MemoryPushConfigStore()
    burst = owned_tasks(store, configs, "alice", IN_FLIGHT_SHARED, "https://slow.example.com")
    sender = Held("slow.example.com")
    deliverer = Deliverer(store, configs, resolve_url=public, sender=sender)
    deliverer.queue = queue = Recorded()
    with ThreadPoolExecutor(IN_FLIGHT_SHARED) as threads:
        futures = [threads.submit(deliverer.deliver, job, Delivery()) for job in burst]
        for _ in range(IN_FLIGHT_SHARED):
            assert sender.waiting.acquire(timeout=10)  # all under way together
        sender.release.set()
        assert [f.result(timeout=10) for f in futures] == [Outcome.DELIVERED] * len(burst)
    assert queue.entries == []


class Slow:
    """A PushSender whose every POST takes `seconds` of the clock, answered 204."""

    def __init__(self, clock: ManualClock, seconds: float) -> None:
        self.clock, self.seconds = clock, seconds
        self.posted = 0

    def post(
        self, target: PushTarget, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, str | None]:
        assert timeout <= TIMEOUT_SECONDS
        self.clock.advance(min(self.seconds, timeout))
        self.posted += 1
        return 204, None


def test_no_delivery_outlives_its_functions_request_timeout() -> None:
    store, configs = lone_task("https://a.example.com/hook")
    stored = store.get("anonymous", "t")
    assert stored is not None
    working = StatusUpdate(task_id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))
    stored = store.commit(stored, stored.task, [working] * 9)
    configs.want("anonymous", "t", "p", stored.last_seq, utc_now())
    clock = ManualClock()
    sender = Slow(clock, TIMEOUT_SECONDS)  # every POST takes its whole deadline
    deliverer = Deliverer(
        store, configs, resolve_url=public, sender=sender, clock=clock, function_timeout=60
    )
    deliverer.queue = queue = Recorded()
    began = clock.monotonic()
    job = {**LONE_JOB, "seq": stored.last_seq}
    assert deliverer.deliver(job, Delivery()) is Outcome.RESCHEDULED
    # POSTs start while one more fits with the store's margin: at 0, 10, 20, 30 and 40 s.
    assert sender.posted == 5
    assert clock.monotonic() - began <= 60 - STORE_MARGIN_SECONDS
    [(_, payload, _)] = queue.entries
    assert payload == job  # the rest goes in a delivery of its own


# -- amplification (issue 36, 12) ------------------------------------------------------------


class SimulatedQueue:
    """A push queue on a ManualClock: deliveries run when due, a FAILED or BUSY one retried
    with the in-process queue's backoff (0.1 s doubling to 5 s: faster than Cloud Tasks'),
    up to `attempts`; names taken once."""

    def __init__(self, clock: ManualClock, attempts: int = 34) -> None:
        self.clock = clock
        self.attempts = attempts
        self._due: list[tuple[float, int, dict[str, Any], int]] = []
        self._names: set[str] = set()
        self._order = 0

    def enqueue(self, name: str, payload: dict[str, Any], *, delay: float = 0.0) -> bool:
        if name in self._names:
            return False
        self._names.add(name)
        self._push(self.clock.monotonic() + delay, payload, 0)
        return True

    def _push(self, at: float, payload: dict[str, Any], attempt: int) -> None:
        self._order += 1
        heapq.heappush(self._due, (at, self._order, payload, attempt))

    def run(self, deliverer: Deliverer, until: float) -> None:
        while self._due and self._due[0][0] <= until:
            at, _, payload, attempt = heapq.heappop(self._due)
            self.clock.advance(max(at - self.clock.monotonic(), 0.0))
            final = attempt + 1 >= self.attempts
            outcome = deliverer.deliver(payload, Delivery(attempt=attempt, final=final))
            if not outcome.accepted and not final:
                self._push(at + min(5.0, 0.1 * 2**attempt), payload, attempt + 1)

    def close(self) -> None:
        pass


def test_a_failing_webhook_gets_one_post_a_back_off_whatever_events_come() -> None:
    # The finding: 12 sends to a webhook that always answers 500 gave 156 POSTs in 40 s.
    clock = ManualClock()
    store, configs = MemoryTaskStore(), MemoryPushConfigStore()
    jobs = owned_tasks(store, configs, "alice", 12, "https://down.example.com")
    sender = Scripted({f"https://down.example.com/{n}": (500, None) for n in range(12)})
    deliverer = Deliverer(store, configs, resolve_url=public, sender=sender, clock=clock)
    deliverer.queue = queue = SimulatedQueue(clock)
    notifier = PushNotifier(configs, queue, clock=clock)
    start = clock.monotonic()
    for job in jobs:
        queue.enqueue(PushJob.from_payload(job).name, job)
    # Each task commits an event a second: a new delivery each, every time.
    for second in range(1, 40):
        queue.run(deliverer, start + second)
        for job in jobs:
            stored = store.get("alice", job["taskId"])
            assert stored is not None
            update = StatusUpdate(task_id=job["taskId"], context_id="c", status=stored.task.status)
            notifier(store.commit(stored, stored.task, [update]), [update])
    queue.run(deliverer, start + 40)
    # Back-off 5, 10, 20 s: POSTs at 0, 5, 15 and 35 s, for each of the 12 configs, whatever
    # their 40 events each (without it, each event's delivery retried on its own).
    per_config = collections.Counter(sender.posted)
    assert set(per_config.values()) == {4}, per_config
    # A day of it (back-offs of 5 s to 2,560 s, then hourly): at most MAX_FAILURES POSTs a
    # config, then it records the failure, and an event within its back-off posts nothing.
    for hour in range(1, 27):
        queue.run(deliverer, start + 3600 * hour)
    per_config = collections.Counter(sender.posted)
    assert max(per_config.values()) <= MAX_FAILURES, per_config
    assert set(per_config.values()) == {MAX_FAILURES}, per_config
    failed = configs.get("alice", "t0", "p")
    assert failed is not None and failed.last_error == "the webhook answered HTTP 500"
    posted = len(sender.posted)
    for job in jobs:
        queue.enqueue(f"{PushJob.from_payload(job).name}-later", job)
    queue.run(deliverer, start + 3600 * 27)
    assert len(sender.posted) == posted


# -- a commit's delivery while another sends (issue 35) ------------------------------------


def test_events_wanted_while_a_delivery_sends_go_in_that_delivery_at_once() -> None:
    # The finding: a turn's last commit at :01.612 reached the webhook at :03.688: its
    # delivery found the config busy with the commit before and came back 2 s later.
    store, configs = lone_task("https://a.example.com/hook")
    clock = ManualClock()
    notifier = PushNotifier(configs, Recorded(), clock=clock)
    posted: list[int] = []
    later: list[Outcome] = []

    class CommitsWhilePosting:
        def post(
            self, target: PushTarget, body: bytes, headers: Mapping[str, str], timeout: float
        ) -> tuple[int, str | None]:
            posted.append(len(posted) + 1)
            if len(posted) == 1:  # the turn commits its end while the first POST is out
                stored = store.get("anonymous", "t")
                assert stored is not None
                done = StatusUpdate(
                    task_id="t", context_id="c", status=TaskStatus(state=TaskState.COMPLETED)
                )
                notifier(store.commit(stored, stored.task, [done]), [done])
                # ... and its delivery finds the config busy.
                job = {**LONE_JOB, "seq": 2}
                later.append(deliverer.deliver(job, Delivery()))
            return 204, None

    deliverer = Deliverer(
        store, configs, resolve_url=public, sender=CommitsWhilePosting(), clock=clock
    )
    deliverer.queue = queue = Recorded()
    configs.want("anonymous", "t", "p", 1, utc_now())
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.DELIVERED
    assert posted == [1, 2]  # both, in the first delivery, without waiting
    assert later == [Outcome.RESCHEDULED]  # (in case the holder died: it finds nothing)
    stored = configs.get("anonymous", "t", "p")
    assert stored is not None and stored.delivered_seq == stored.wanted_seq == 2
    [(_, payload, _)] = queue.entries
    assert deliverer.deliver(payload, Delivery()) is Outcome.NOTHING_TO_DO
    assert configs.begin_delivery("anonymous", "t", "p", "next", utc_now() + timedelta(minutes=1))


def test_an_owner_whose_webhooks_answer_at_once_is_queued_again_soon() -> None:
    """An owner holding its share comes back when a slot of its is likely free: after twice
    what its last delivery took (a burst to a quick webhook drains: 44 -> 17 s for 300
    notifications after a Cloud Tasks pause, tests/system/test_faults_stack.py), not after
    a slow webhook's whole deadline, which is what an owner waits whose deliveries never
    ended yet."""
    clock = ManualClock()
    slots = OwnerSlots(per_owner=2, shared=2, clock=clock)
    first, second = slots.take("quick"), slots.take("quick")
    assert first is not None and second is not None
    assert slots.take("quick") is None
    assert slots.wait("quick") == TIMEOUT_SECONDS  # none of its deliveries ended yet
    clock.advance(0.03)
    slots.give("quick", first)
    assert slots.wait("quick") == REQUEUE_SOON  # 2 x 0.03 s, no sooner than REQUEUE_SOON
    clock.advance(1.0)
    third = slots.take("quick")
    assert third is not None
    slots.give("quick", second)  # 1.03 s: the next waits twice that
    assert slots.wait("quick") == pytest.approx(2.06)
