"""Push notifications delivered to a real webhook: in order, with their headers, signed,
retried until taken, and never posted twice once taken (embedded backend)."""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
from collections.abc import Mapping
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
    EVENTS_PER_DELIVERY,
    WAIT_SECONDS,
    Deliverer,
    OwnerRate,
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


def test_a_webhook_answering_500_is_retried(make_client: Any, hook: Webhook) -> None:
    hook.answers.extend([500, 500])
    client = agent(make_client)
    task_id = start(client, hook, "steps=1 delay=0")
    expected = news(client, task_id)
    hook.wait_accepted(len(expected))
    assert [r.status for r in hook.received[:2]] == [500, 500]
    drained(client)
    assert [r.json for r in hook.accepted()] == expected


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
    deliverer = Deliverer(
        store, configs, resolve_url=lambda url: resolve_push_url(url, resolve=rebinding)
    )
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.FAILED  # refused: retried
    assert connected == [(PUBLIC, 443)]
    assert resolved == ["rebind.example.com"]
    # The retry resolves again, gets loopback, and connects nowhere.
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
    assert deliverer.deliver(LONE_JOB, Delivery(attempt=3, final=True)) is Outcome.FAILED
    stored = configs.get("anonymous", "t", "p")
    assert stored is not None
    assert (stored.last_error, stored.failed_at) == ("the webhook answered HTTP 500", clock.now())
    [error] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "task t, config p failed at the queue's last attempt (4)" in error.getMessage()
    # The next event retries: a delivery that gets through forgets the failure.
    sender.answers["https://a.example.com/hook"] = (200, None)
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
    assert "https://hooks.slack.com/… for task t, config p failed (attempt 1)" in line
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
    for _ in range(2):
        assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.FAILED
    # The queue's retry comes back within the minute: rescheduled, no POST, no attempt spent.
    assert deliverer.deliver(LONE_JOB, Delivery(attempt=2)) is Outcome.RESCHEDULED
    assert len(sender.posted) == 2
