"""Push notifications delivered to a real webhook: in order, with their headers, signed,
retried until taken, and never posted twice once taken (embedded backend)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jwt
import pytest

from shared.jobs import Outcome
from shared.model import (
    ArtifactUpdate,
    PushConfig,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
)
from shared.ports import Delivery
from shared.push_delivery import Deliverer, PushNotifier
from shared.push_url import PushURLRefused
from shared.queue.inline import InlineQueue
from shared.store.memory import MemoryTaskStore
from shared.store.memory_push import MemoryPushConfigStore
from shared.store.notifying import NotifyingTaskStore
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
    store = client.app.service.store
    assert isinstance(store, NotifyingTaskStore)
    assert isinstance(store.on_commit, PushNotifier)
    queue = store.on_commit.queue
    assert isinstance(queue, InlineQueue)
    assert queue.join(30), "the push queue did not drain in 30 s"


def news(client: Client, task_id: str) -> list[dict[str, Any]]:
    """The task's status and artifact events, as the v1.0 webhook should receive them."""
    from shared.dialects.v1_0 import V1

    store = client.app.service.store
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
    jwks = client.http.get("/.well-known/jwks.json").get_json()
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

    def refuse(url: str) -> None:
        # The host's DNS changed since the config was set.
        raise PushURLRefused("resolves to 127.0.0.1, a loopback address")

    deliverer = Deliverer(store, configs, check_url=refuse)
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.FAILED
    assert hook.received == []
    stored = configs.get("anonymous", "t", "p")
    assert stored is not None and stored.delivered_seq == 0  # the retry will send it all


class Scripted:
    """A PushSender answering each URL as scripted, posting nothing anywhere."""

    def __init__(self, answers: dict[str, tuple[int, str | None]]) -> None:
        self.answers = answers
        self.posted: list[str] = []

    def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, str | None]:
        self.posted.append(url)
        return self.answers[url]


def test_redirects_are_followed_and_every_target_is_checked() -> None:
    store, configs = lone_task("https://a.example.com/hook")
    checked: list[str] = []

    def check(url: str) -> None:
        checked.append(url)
        if "internal" in url:
            raise PushURLRefused("resolves to 10.0.0.1, a private address")

    sender = Scripted(
        {
            "https://a.example.com/hook": (307, "/moved"),
            "https://a.example.com/moved": (302, "https://b.example.com/final"),
            "https://b.example.com/final": (204, None),
        }
    )
    deliverer = Deliverer(store, configs, check_url=check, sender=sender)
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.DELIVERED
    assert sender.posted == checked == list(sender.answers)

    store, configs = lone_task("https://a.example.com/hook")
    sender = Scripted({"https://a.example.com/hook": (301, "http://internal.example.com/")})
    deliverer = Deliverer(store, configs, check_url=check, sender=sender)
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.FAILED
    assert sender.posted == ["https://a.example.com/hook"]  # the refused target got nothing

    store, configs = lone_task("https://a.example.com/hook")
    loop = Scripted({"https://a.example.com/hook": (302, "/hook")})
    deliverer = Deliverer(store, configs, check_url=check, sender=loop)
    assert deliverer.deliver(LONE_JOB, Delivery()) is Outcome.FAILED
    assert len(loop.posted) == 4  # the first POST and three redirects, then it gives up
    stored = configs.get("anonymous", "t", "p")
    assert stored is not None and stored.delivered_seq == 0


def test_a_deleted_config_gets_nothing(make_client: Any, hook: Webhook) -> None:
    client = agent(make_client)
    task_id = start(client, hook, "steps=0 delay=0")
    configs = client.app.service.push_configs
    assert configs is not None
    deliverer = Deliverer(client.app.service.store, configs, check_url=lambda url: None)
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
