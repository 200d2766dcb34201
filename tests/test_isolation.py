"""The isolation matrix: two owners, every method in every dialect and binding, in each
identity mode that tells callers apart (API keys, Google ID tokens, OIDC tokens), on the
embedded backend and on the Firestore emulator. Owner B, knowing owner A's task, context and
push config ids, gets no read, no write, no delivery and no existence hint: each answer is,
byte for byte, the answer about an id that exists nowhere; and A's tasks, configs and
webhook are exactly as they were afterwards."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from shared import tasks_auth
from shared.app import build
from shared.identity.api_key import hashed
from shared.model import new_id
from shared.ports import TaskStore
from shared.settings import Settings
from shared.store.memory import MemoryTaskStore
from tests.conftest import Client
from tests.identity.issuer import Issuer, serve
from tests.test_push_delivery import drained
from tests.webhook import Webhook

OWNER_A, OWNER_B = "owner-a", "owner-b"
AUDIENCE = "https://us-central1-demo.cloudfunctions.net/a2a"  # google mode's, fixed


@dataclass(frozen=True)
class Owners:
    """How two callers become two owners in one identity mode: the settings, and the
    headers each one sends."""

    settings: dict[str, Any]
    as_a: dict[str, str]
    as_b: dict[str, str]


def two_owners(mode: str, issuer: Issuer | None) -> Owners:
    """The one place that says how a caller becomes an owner here, per A2A_AUTH mode."""
    if mode == "api-key":
        keys = {hashed("key-a"): OWNER_A, hashed("key-b"): OWNER_B}
        return Owners(
            {"auth": "api-key", "api_keys": keys}, {"X-API-Key": "key-a"}, {"X-API-Key": "key-b"}
        )
    assert issuer is not None

    def bearer(**claims: Any) -> dict[str, str]:
        # Valid for 10 minutes: longer than the test.
        return {"Authorization": f"Bearer {issuer.token(**claims)}"}

    if mode == "google":
        settings = {"auth": "google", "audience": (AUDIENCE,)}
        google = {"iss": "accounts.google.com", "aud": AUDIENCE, "email_verified": True}
        return Owners(settings, bearer(**google, email=OWNER_A), bearer(**google, email=OWNER_B))
    settings = {"auth": "oidc", "oidc_issuer": issuer.url, "oidc_audience": "agent"}
    return Owners(settings, bearer(aud="agent", sub=OWNER_A), bearer(aud="agent", sub=OWNER_B))


@dataclass
class World:
    client: Client
    hook: Webhook
    task: str  # A's task (input-required: it can be continued, canceled, subscribed to)
    context: str
    config: str  # A's config on it
    legacy: str  # A's v0.1 task, named by A
    as_a: dict[str, str]  # the headers that make a request A's
    as_b: dict[str, str]


# Every identity mode that tells callers apart (none makes everyone one owner), on the
# embedded backend; the API-key mode on the Firestore emulator too (the store side of
# isolation does not depend on how the owner was found).
WORLDS = [("memory", "api-key"), ("firestore", "api-key"), ("memory", "google"), ("memory", "oidc")]


@pytest.fixture(params=WORLDS, ids=[f"{b}-{m}" for b, m in WORLDS])
def world(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    backend, mode = request.param
    with contextlib.ExitStack() as stack:
        issuer = (
            stack.enter_context(contextlib.contextmanager(serve)()) if mode != "api-key" else None
        )
        if mode == "google":
            assert issuer is not None
            monkeypatch.setattr(tasks_auth, "GOOGLE_CERTS_URL", issuer.url + "/certs")
        owners = two_owners(mode, issuer)
        store: TaskStore
        values: dict[str, Any] = {
            "handler": "functions.handlers.sample",
            "push_allowed_hosts": ("localhost",),
            "stream_seconds": 5,  # a stream that should not be open ends anyway
            **owners.settings,
        }
        if backend == "firestore":
            from shared.store.firestore import FirestoreTaskStore

            emulator = request.getfixturevalue("clean_firestore")
            store = FirestoreTaskStore(emulator.project)
            values |= {"backend": "firestore", "project": emulator.project}
        else:
            store = MemoryTaskStore()
        hook = Webhook()
        client = Client(build(Settings(**values), store=store))
        try:
            yield set_up(client, hook, owners)
        finally:
            client.app.close()
            hook.close()


def message(text: str, **fields: Any) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}], "messageId": new_id(), **fields}


def set_up(client: Client, hook: Webhook, owners: Owners) -> World:
    """A's task with an inline config, a second config, and a v0.1 task A named itself."""
    inline = {"url": hook.url("/a"), "id": "cfg-a1", "token": "a-token"}
    sent = client.result(
        "SendMessage",
        {
            "message": message("new phone"),
            "configuration": {"taskPushNotificationConfig": inline},
        },
        version="1.0",
        headers=owners.as_a,
    )["task"]
    client.result(
        "tasks/pushNotificationConfig/set",
        {"taskId": sent["id"], "pushNotificationConfig": {"url": hook.url("/a")}},
        headers=owners.as_a,
    )
    client.result(
        "tasks/send",
        {"id": "my-task-1", "message": message("new phone")},
        headers=owners.as_a,
    )
    drained(client)
    return World(
        client, hook, sent["id"], sent["contextId"], "cfg-a1", "my-task-1", owners.as_a, owners.as_b
    )


def state_of_a(world: World) -> Any:
    """All that A can see of its own, and the webhook's POSTs."""
    client = world.client
    tasks = client.result("ListTasks", {"historyLength": 100}, version="1.0", headers=world.as_a)
    configs = {
        task_id: client.result(
            "ListTaskPushNotificationConfigs",
            {"taskId": task_id},
            version="1.0",
            headers=world.as_a,
        )
        for task_id in (world.task, world.legacy)
    }
    drained(client)
    posts = [(p.path, p.body) for p in world.hook.accepted()]
    return tasks, configs, posts


# -- B's probes: each takes A's world and (task id, context id, config id), and answers
# (HTTP status, body bytes) --------------------------------------------------------------

Ids = tuple[str, str, str]
Probe = Callable[[World, Ids], tuple[int, bytes]]
Params = Callable[[World, Ids], Any]


def rpc(method: str, params: Params, version: str | None = None) -> Probe:
    def probe(world: World, ids: Ids) -> tuple[int, bytes]:
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params(world, ids)}
        headers = {**world.as_b, **({"A2A-Version": version} if version else {})}
        response = world.client.post(body, headers)
        return response.status_code, response.content

    return probe


def rest(method: str, path: str, body: Params | None = None) -> Probe:
    def probe(world: World, ids: Ids) -> tuple[int, bytes]:
        task, context, config = ids
        url = path.format(task=task, context=context, config=config)
        data = None if body is None else json.dumps(body(world, ids))
        headers = {**world.as_b, "A2A-Version": "1.0", "Content-Type": "application/json"}
        response = world.client.http.request(method, url, content=data, headers=headers)
        return response.status_code, response.content

    return probe


def b_config(world: World, ids: Ids) -> dict[str, Any]:
    """B's webhook, under A's config id."""
    return {"url": world.hook.url("/b"), "id": ids[2], "token": "b-token"}


def follow_up(world: World, ids: Ids) -> dict[str, Any]:
    return {"message": message("Android", taskId=ids[0])}


def with_config(key: str) -> Params:
    return lambda w, i: {**follow_up(w, i), "configuration": {key: b_config(w, i)}}


PROBES: dict[str, Probe] = {
    # v1.0 JSON-RPC
    "1.0 GetTask": rpc("GetTask", lambda w, i: {"id": i[0]}, "1.0"),
    "1.0 CancelTask": rpc("CancelTask", lambda w, i: {"id": i[0]}, "1.0"),
    "1.0 SendMessage": rpc("SendMessage", follow_up, "1.0"),
    "1.0 SendMessage inline config": rpc(
        "SendMessage", with_config("taskPushNotificationConfig"), "1.0"
    ),
    "1.0 SendMessage with context": rpc(
        "SendMessage", lambda w, i: {"message": message("x", taskId=i[0], contextId=i[1])}, "1.0"
    ),
    "1.0 SendStreamingMessage": rpc("SendStreamingMessage", follow_up, "1.0"),
    "1.0 SendStreamingMessage inline config": rpc(
        "SendStreamingMessage", with_config("taskPushNotificationConfig"), "1.0"
    ),
    "1.0 SubscribeToTask": rpc("SubscribeToTask", lambda w, i: {"id": i[0]}, "1.0"),
    "1.0 ListTasks by context": rpc("ListTasks", lambda w, i: {"contextId": i[1]}, "1.0"),
    "1.0 ListTasks by context and state": rpc(
        "ListTasks",
        lambda w, i: {"contextId": i[1], "status": "TASK_STATE_INPUT_REQUIRED"},
        "1.0",
    ),
    "1.0 CreateTaskPushNotificationConfig": rpc(
        "CreateTaskPushNotificationConfig",
        lambda w, i: {"taskId": i[0], **b_config(w, i)},
        "1.0",
    ),
    "1.0 GetTaskPushNotificationConfig": rpc(
        "GetTaskPushNotificationConfig", lambda w, i: {"taskId": i[0], "id": i[2]}, "1.0"
    ),
    "1.0 ListTaskPushNotificationConfigs": rpc(
        "ListTaskPushNotificationConfigs", lambda w, i: {"taskId": i[0]}, "1.0"
    ),
    "1.0 DeleteTaskPushNotificationConfig": rpc(
        "DeleteTaskPushNotificationConfig", lambda w, i: {"taskId": i[0], "id": i[2]}, "1.0"
    ),
    # v0.3 JSON-RPC
    "0.3 message/send": rpc("message/send", follow_up),
    "0.3 message/send inline config": rpc("message/send", with_config("pushNotificationConfig")),
    "0.3 message/stream": rpc("message/stream", follow_up),
    "0.3 tasks/get": rpc("tasks/get", lambda w, i: {"id": i[0]}),
    "0.3 tasks/cancel": rpc("tasks/cancel", lambda w, i: {"id": i[0]}),
    "0.3 tasks/resubscribe": rpc("tasks/resubscribe", lambda w, i: {"id": i[0]}),
    "0.3 pushNotificationConfig/set": rpc(
        "tasks/pushNotificationConfig/set",
        lambda w, i: {"taskId": i[0], "pushNotificationConfig": b_config(w, i)},
    ),
    "0.3 pushNotificationConfig/set default id": rpc(
        "tasks/pushNotificationConfig/set",
        lambda w, i: {"taskId": i[0], "pushNotificationConfig": {"url": w.hook.url("/b")}},
    ),
    "0.3 pushNotificationConfig/get": rpc(
        "tasks/pushNotificationConfig/get",
        lambda w, i: {"id": i[0], "pushNotificationConfigId": i[2]},
    ),
    "0.3 pushNotificationConfig/get first": rpc(
        "tasks/pushNotificationConfig/get", lambda w, i: {"id": i[0]}
    ),
    "0.3 pushNotificationConfig/list": rpc(
        "tasks/pushNotificationConfig/list", lambda w, i: {"id": i[0]}
    ),
    "0.3 pushNotificationConfig/delete": rpc(
        "tasks/pushNotificationConfig/delete",
        lambda w, i: {"id": i[0], "pushNotificationConfigId": i[2]},
    ),
    # v0.1 JSON-RPC (its sends name a task they may create, in B's namespace: tested below)
    "0.1 tasks/pushNotification/set": rpc(
        "tasks/pushNotification/set",
        lambda w, i: {"id": i[0], "pushNotificationConfig": {"url": w.hook.url("/b")}},
    ),
    "0.1 tasks/pushNotification/get": rpc("tasks/pushNotification/get", lambda w, i: {"id": i[0]}),
    # the seeds' informal forms
    "seeds tasks/get by taskId": rpc("tasks/get", lambda w, i: {"taskId": i[0]}),
    "seeds messages/list": rpc("messages/list", lambda w, i: {"taskId": i[0]}),
    "seeds message/send by taskId": rpc(
        "message/send", lambda w, i: {"taskId": i[0], "message": message("x")}
    ),
    "seeds pushNotificationConfig get": rpc(
        "tasks/pushNotificationConfig", lambda w, i: {"taskId": i[0]}
    ),
    "seeds pushNotificationConfig set": rpc(
        "tasks/pushNotificationConfig",
        lambda w, i: {"taskId": i[0], "pushNotificationConfig": b_config(w, i)},
    ),
    # HTTP+JSON
    "REST get": rest("GET", "/tasks/{task}"),
    "REST cancel": rest("POST", "/tasks/{task}:cancel"),
    "REST subscribe GET": rest("GET", "/tasks/{task}:subscribe"),
    "REST subscribe POST": rest("POST", "/tasks/{task}:subscribe"),
    "REST list by context": rest("GET", "/tasks?contextId={context}"),
    "REST send": rest("POST", "/message:send", follow_up),
    "REST send inline config": rest(
        "POST", "/message:send", with_config("taskPushNotificationConfig")
    ),
    "REST stream": rest("POST", "/message:stream", follow_up),
    "REST create config": rest("POST", "/tasks/{task}/pushNotificationConfigs", b_config),
    "REST list configs": rest("GET", "/tasks/{task}/pushNotificationConfigs"),
    "REST get config": rest("GET", "/tasks/{task}/pushNotificationConfigs/{config}"),
    "REST delete config": rest("DELETE", "/tasks/{task}/pushNotificationConfigs/{config}"),
    # the seeds' server-sent events
    "GET /sse": rest("GET", "/sse?taskId={task}"),
}


def normalized(answer: tuple[int, bytes], ids: Ids) -> tuple[int, bytes]:
    """The answer with the ids asked about replaced by placeholders."""
    status, body = answer
    for index, value in enumerate(ids):
        body = body.replace(value.encode(), f"<id{index}>".encode())
    return status, body


@pytest.mark.parametrize("name", list(PROBES))
def test_b_gets_the_answer_about_nothing_and_a_keeps_everything(world: World, name: str) -> None:
    probe = PROBES[name]
    before = state_of_a(world)
    asked = [
        # A's task, its context and its config; ids of the same lengths that exist nowhere
        ((world.task, world.context, world.config), (new_id(), new_id(), "cfg-zz")),
        # A's own v0.1 name, and A's v0.3 default config id (the task id)
        ((world.legacy, world.context, world.task), ("my-task-2", new_id(), new_id())),
    ]
    for foreign_ids, missing_ids in asked:
        foreign = probe(world, foreign_ids)
        absent = probe(world, missing_ids)
        assert foreign[0] < 500, foreign
        assert normalized(foreign, foreign_ids) == normalized(absent, missing_ids), (
            foreign,
            absent,
        )
        for secret in (b"a-token", b"new phone", world.hook.url("/a").encode()):
            assert secret not in foreign[1]
    assert state_of_a(world) == before


def test_a_keeps_its_deliveries_after_every_attempt_of_b(world: World) -> None:
    """After all of B's attempts, A's next turn goes to A's two configs, and nothing to B."""
    for probe in PROBES.values():
        probe(world, (world.task, world.context, world.config))
    drained(world.client)
    seen = len(world.hook.accepted())
    world.client.result(
        "SendMessage",
        {"message": message("Android", taskId=world.task)},
        version="1.0",
        headers=world.as_a,
    )
    drained(world.client)
    posts = world.hook.accepted()[seen:]
    assert posts, "A's configs heard nothing of A's turn"
    assert {p.path for p in posts} == {"/a"}
    assert all(p.headers.get("X-A2A-Notification-Token") in ("a-token", None) for p in posts)
    assert not any(p.path == "/b" for p in world.hook.accepted())


IDS_B: Ids = ("my-task-1", "ctx", "cfg-b1")


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tasks/send", lambda w: {"id": "my-task-1", "pushNotification": b_config(w, IDS_B)}),
        (
            "message/send",  # the seeds' v0.1 id on a v0.3 method
            lambda w: {"id": "my-task-1", "pushNotification": b_config(w, IDS_B)},
        ),
    ],
)
def test_a_task_id_a_names_is_bs_own_when_b_names_it(
    world: World, method: str, params: Callable[[World], dict[str, Any]]
) -> None:
    """v0.1 ids live in each caller's namespace: B's `my-task-1` is a new task of B's, with
    B's config, and A's `my-task-1` neither changes nor hears of it."""
    before = state_of_a(world)
    mine = world.client.result(
        method, {**params(world), "message": message("hello from b")}, headers=world.as_b
    )
    assert mine["id"] == "my-task-1"
    said = world.client.result("messages/list", {"taskId": "my-task-1"}, headers=world.as_b)
    assert said[0]["parts"][0]["text"] == "hello from b"
    assert all("new phone" not in json.dumps(m) for m in said)
    drained(world.client)
    b_posts = [p for p in world.hook.accepted() if p.path == "/b"]
    assert b_posts and all(p.headers["X-A2A-Notification-Token"] == "b-token" for p in b_posts)
    assert all(b"new phone" not in p.body for p in b_posts)
    a_now = state_of_a(world)
    assert a_now[:2] == before[:2]
    assert [p for p in a_now[2] if p[0] == "/a"] == [p for p in before[2] if p[0] == "/a"]
    listed = world.client.result("ListTasks", {}, version="1.0", headers=world.as_b)
    assert [t["id"] for t in listed["tasks"]] == ["my-task-1"]
    b_configs = world.client.result(
        "ListTaskPushNotificationConfigs",
        {"taskId": "my-task-1"},
        version="1.0",
        headers=world.as_b,
    )
    assert [c["url"] for c in b_configs["configs"]] == [world.hook.url("/b")]
