"""Push notification configs in every dialect, scoped by owner, with webhook URLs checked."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from a2a.types import a2a_pb2
from hypothesis import given
from hypothesis import strategies as st

from shared.app import build
from shared.dialects import decode
from shared.extensions import DELIVERY_STATUS
from shared.identity.api_key import hashed
from shared.limits import MAX_PUSH_SECRET_BYTES, MAX_PUSH_URL_CHARS
from shared.model import utc_now
from shared.ports import TaskQuery
from shared.service.resends import message_key
from shared.settings import Settings
from shared.store.memory import MemoryTaskStore
from tests import schema
from tests.conftest import Client
from tests.test_ids import text_id

HOOK = "https://hooks.example.com/a2a"
V1 = {"A2A-Version": "1.0"}


@pytest.fixture
def push(make_client: Any) -> Client:
    client: Client = make_client(push_notifications=True, push_allowed_hosts=("hooks.example.com",))
    return client


def new_task(client: Client, text: str = "new phone", **headers: str) -> str:
    params = {
        "message": {"role": "ROLE_USER", "parts": [{"text": text}], "messageId": text_id(text)}
    }
    task_id: str = client.result("SendMessage", params, version="1.0", headers=headers)["task"][
        "id"
    ]
    return task_id


def test_card_says_push_when_enabled(push: Client, make_client: Any) -> None:
    assert push.http.get("/.well-known/agent-card.json").json()["capabilities"]["pushNotifications"]
    assert (
        not make_client(push_notifications=False)
        .http.get("/.well-known/agent-card.json")
        .json()["capabilities"]["pushNotifications"]
    )


def test_v1_create_get_list_delete(push: Client) -> None:
    task_id = new_task(push)
    created = push.result(
        "CreateTaskPushNotificationConfig",
        {
            "taskId": task_id,
            "url": HOOK,
            "token": "tok",
            "authentication": {"scheme": "Bearer", "credentials": "secret"},
        },
        version="1.0",
    )
    config_id = created["id"]
    assert config_id  # assigned by the server
    assert created == {
        "id": config_id,
        "taskId": task_id,
        "url": HOOK,
        "token": "tok",
        "authentication": {"scheme": "Bearer", "credentials": "secret"},
    }
    named = push.result(
        "CreateTaskPushNotificationConfig",
        {"task_id": task_id, "id": "mine", "url": HOOK + "/2"},
        version="1.0",
    )
    assert named["id"] == "mine"
    got = push.result(
        "GetTaskPushNotificationConfig", {"taskId": task_id, "id": config_id}, version="1.0"
    )
    assert got == created
    listed = push.result("ListTaskPushNotificationConfigs", {"taskId": task_id}, version="1.0")
    assert [c["id"] for c in listed["configs"]] == [config_id, "mine"]
    assert listed["nextPageToken"] == ""
    first = push.result(
        "ListTaskPushNotificationConfigs", {"taskId": task_id, "pageSize": 1}, version="1.0"
    )
    assert [c["id"] for c in first["configs"]] == [config_id]
    second = push.result(
        "ListTaskPushNotificationConfigs",
        {"taskId": task_id, "pageSize": 1, "pageToken": first["nextPageToken"]},
        version="1.0",
    )
    assert [c["id"] for c in second["configs"]] == ["mine"] and second["nextPageToken"] == ""
    for _ in range(2):  # idempotent
        answer = push.rpc(
            "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "mine"}, version="1.0"
        )
        assert answer["result"] is None
    error = push.error(
        "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "mine"}, version="1.0"
    )
    assert error["code"] == -32001


def test_v03_set_get_list_delete(push: Client) -> None:
    task_id = new_task(push)
    config = {
        "id": "c1",
        "url": HOOK,
        "authentication": {"schemes": ["Bearer"], "credentials": "x"},
    }
    wrapped = {"taskId": task_id, "pushNotificationConfig": config}
    assert push.result("tasks/pushNotificationConfig/set", wrapped) == wrapped
    got = push.result(
        "tasks/pushNotificationConfig/get", {"id": task_id, "pushNotificationConfigId": "c1"}
    )
    assert got == wrapped
    assert push.result("tasks/pushNotificationConfig/get", {"id": task_id}) == wrapped
    assert push.result("tasks/pushNotificationConfig/list", {"id": task_id}) == [wrapped]
    deleted = push.rpc(
        "tasks/pushNotificationConfig/delete", {"id": task_id, "pushNotificationConfigId": "c1"}
    )
    assert deleted["result"] is None
    assert push.result("tasks/pushNotificationConfig/list", {"id": task_id}) == []


def test_v01_set_and_get_as_in_seed_000(push: Client) -> None:
    task_id = new_task(push)
    config = {"url": HOOK, "authentication": {"schemes": ["jwt"]}}
    answer = push.result(
        "tasks/pushNotification/set", {"id": task_id, "pushNotificationConfig": config}
    )
    assert answer == {"id": task_id, "pushNotificationConfig": config}
    assert push.result("tasks/pushNotification/get", {"id": task_id}) == answer
    # Setting again replaces the task's one v0.1 config.
    push.result(
        "tasks/pushNotification/set",
        {"id": task_id, "pushNotificationConfig": {"url": HOOK + "/b"}},
    )
    assert push.result("tasks/pushNotification/get", {"id": task_id})["pushNotificationConfig"] == {
        "url": HOOK + "/b"
    }


def test_seed_004_verbless_method_sets_then_gets(push: Client) -> None:
    task_id = new_task(push)
    params = {"taskId": task_id, "pushNotificationConfig": {"url": HOOK}}
    set_answer = push.result("tasks/pushNotificationConfig", params)
    assert set_answer["pushNotificationConfig"]["url"] == HOOK
    assert push.result("tasks/pushNotificationConfig", {"taskId": task_id}) == set_answer


@pytest.mark.parametrize(
    ("method", "version", "params"),
    [
        (
            "SendMessage",
            "1.0",
            {"configuration": {"taskPushNotificationConfig": {"url": HOOK, "token": "t"}}},
        ),
        (
            "message/send",
            None,
            {"configuration": {"pushNotificationConfig": {"url": HOOK, "token": "t"}}},
        ),
        ("tasks/send", None, {"id": "v01-task", "pushNotification": {"url": HOOK, "token": "t"}}),
    ],
)
def test_inline_configs_in_a_send(
    push: Client, method: str, version: str | None, params: dict[str, Any]
) -> None:
    message = {"role": "user", "parts": [{"text": "hello"}], "messageId": text_id(method)}
    result = push.result(method, {"message": message, **params}, version=version)
    task_id = result.get("task", result)["id"]
    [config] = push.result("ListTaskPushNotificationConfigs", {"taskId": task_id}, version="1.0")[
        "configs"
    ]
    assert (config["url"], config["token"]) == (HOOK, "t")


def test_several_configs_and_owner_scoping(make_client: Any) -> None:
    app = make_client(
        push_notifications=True,
        push_allowed_hosts=("hooks.example.com",),
        auth="api-key",
        api_keys={hashed("ka"): "alice", hashed("kb"): "bob"},
    )
    task_id = new_task(app, **{"X-API-Key": "ka"})
    for n in range(3):
        app.result(
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": f"c{n}", "url": HOOK},
            version="1.0",
            headers={"X-API-Key": "ka"},
        )
    bob = {"X-API-Key": "kb"}
    for method, params in [
        ("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": HOOK}),
        ("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "c0"}),
        ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "c0"}),
    ]:
        assert app.error(method, params, version="1.0", headers=bob)["code"] == -32001
    listed = app.result(
        "ListTaskPushNotificationConfigs",
        {"taskId": task_id},
        version="1.0",
        headers={"X-API-Key": "ka"},
    )
    assert len(listed["configs"]) == 3


def test_unknown_task_is_not_found(push: Client) -> None:
    error = push.error(
        "CreateTaskPushNotificationConfig", {"taskId": "nope", "url": HOOK}, version="1.0"
    )
    assert error["code"] == -32001


@pytest.mark.parametrize(
    ("method", "version"),
    [
        ("CreateTaskPushNotificationConfig", "1.0"),
        ("tasks/pushNotificationConfig/set", None),
        ("tasks/pushNotification/get", None),
        ("tasks/pushNotificationConfig", None),
    ],
)
def test_push_methods_say_unsupported_when_off(
    make_client: Any, method: str, version: str | None
) -> None:
    off = make_client(push_notifications=False)
    assert off.error(method, {"taskId": "t", "url": HOOK}, version=version)["code"] == -32003


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1/hook", "loopback"),
        ("http://localhost:9000/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("http://192.168.0.7/hook", "private"),
        ("http://169.254.169.254/computeMetadata/v1/", "link-local"),
        ("http://100.64.0.1/hook", "non-public"),
        ("http://[::1]/hook", "loopback"),
        ("http://[::ffff:10.0.0.1]/hook", "private"),
        ("ftp://hooks.example.com/x", "http or https"),
        ("file:///etc/passwd", "http or https"),
        ("https:///nohost", "no host"),
    ],
)
def test_bad_urls_are_refused_naming_the_reason(push: Client, url: str, reason: str) -> None:
    task_id = new_task(push)
    error = push.error(
        "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url}, version="1.0"
    )
    assert error["code"] == -32602
    assert reason in error["message"]


LIMIT_MESSAGE = (
    "Invalid parameters: task {task} has 2 push notification configs, the limit "
    "(A2A_MAX_PUSH_CONFIGS_PER_TASK=2); delete one, replace one by its id, or raise "
    "A2A_MAX_PUSH_CONFIGS_PER_TASK"
)


def follow_up_with_config(task_id: str) -> dict[str, Any]:
    """A 1.0 send to `task_id` that brings a new push config, `c2`."""
    return {
        "message": {
            "role": "ROLE_USER",
            "parts": [{"text": "Android"}],
            "messageId": text_id("Android"),
            "taskId": task_id,
        },
        "configuration": {"taskPushNotificationConfig": {"url": HOOK, "id": "c2"}},
    }


@pytest.fixture
def two_per_task(make_client: Any) -> Client:
    client: Client = make_client(
        push_allowed_hosts=("hooks.example.com",), max_push_configs_per_task=2
    )
    return client


def test_configs_per_task_are_limited_by_the_setting(two_per_task: Client) -> None:
    push = two_per_task
    task_id = new_task(push)
    for n in range(2):
        push.result(
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": f"c{n}", "url": HOOK},
            version="1.0",
        )
    over = {"taskId": task_id, "id": "c2", "url": HOOK}
    error = push.error("CreateTaskPushNotificationConfig", over, version="1.0")
    assert error["code"] == -32602
    assert error["message"] == LIMIT_MESSAGE.format(task=task_id)
    v03 = push.error(
        "tasks/pushNotificationConfig/set",
        {"taskId": task_id, "pushNotificationConfig": {"id": "c2", "url": HOOK}},
    )
    assert (v03["code"], v03["message"]) == (-32602, LIMIT_MESSAGE.format(task=task_id))
    assert v03["data"]["limit"] == "2"
    assert v03["data"]["setting"] == "A2A_MAX_PUSH_CONFIGS_PER_TASK"
    response = push.http.post(
        f"/tasks/{task_id}/pushNotificationConfigs",
        json={"id": "c2", "url": HOOK},
        headers={"A2A-Version": "1.0"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == LIMIT_MESSAGE.format(task=task_id)
    # Replacing one is no new config; after a delete there is room again.
    replaced = {"taskId": task_id, "id": "c1", "url": HOOK + "/new"}
    assert push.result("CreateTaskPushNotificationConfig", replaced, version="1.0")["url"].endswith(
        "/new"
    )
    push.result("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "c0"}, version="1.0")
    push.result("CreateTaskPushNotificationConfig", over, version="1.0")
    listed = push.result("ListTaskPushNotificationConfigs", {"taskId": task_id}, version="1.0")
    assert [c["id"] for c in listed["configs"]] == ["c1", "c2"]


def test_an_inline_config_over_the_limit_leaves_the_task_as_it_was(two_per_task: Client) -> None:
    push = two_per_task
    task_id = new_task(push)  # the phone order asks which phone: input-required
    for n in range(2):
        push.result(
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": f"c{n}", "url": HOOK},
            version="1.0",
        )
    store = push.app.service.ports.store
    before = store.get("anonymous", task_id)
    follow = follow_up_with_config(task_id)
    error = push.error("SendMessage", follow, version="1.0")
    assert (error["code"], error["message"]) == (-32602, LIMIT_MESSAGE.format(task=task_id))
    assert store.get("anonymous", task_id) == before
    refused, _ = decode.send(follow, None)
    assert store.find_message("anonymous", message_key(refused)) is None


def test_a_refused_inline_url_creates_no_task(push: Client) -> None:
    params = {
        "message": {"role": "user", "parts": [{"text": "hi"}], "messageId": text_id("refused")},
        "configuration": {"taskPushNotificationConfig": {"url": "http://10.0.0.1/h"}},
    }
    error = push.error("SendMessage", params, version="1.0")
    assert error["code"] == -32602
    assert push.result("ListTasks", {}, version="1.0")["totalSize"] == 0


def test_an_inline_config_on_a_new_task_hears_every_event(make_client: Any) -> None:
    """Stored once the task is created, yet from its first event on, even for a turn that
    ends at once (the sample agent's echo): a later commit delivers what it has not heard."""
    from tests.test_push_delivery import drained, news
    from tests.webhook import Webhook

    hook = Webhook()
    try:
        client: Client = make_client(push_allowed_hosts=("localhost",))
        params = {
            "message": {"role": "user", "parts": [{"text": "hi"}], "messageId": text_id("all")},
            "configuration": {"taskPushNotificationConfig": {"url": hook.url()}},
        }
        task = client.result("SendMessage", params, version="1.0")["task"]
        drained(client)
        expected = news(client, task["id"])
        assert [p.json for p in hook.accepted()] == expected
        assert expected[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        hook.close()


def fail_for_good(client: Client, task_id: str, config_id: str, error: str) -> datetime:
    """The config's deliveries failed at the queue's last attempt, as the deliverer records."""
    configs = client.app.service.ports.push_configs
    assert configs is not None
    at = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    until = utc_now() + timedelta(minutes=1)
    assert configs.begin_delivery("anonymous", task_id, config_id, "h", until)
    configs.attempt_failed("anonymous", task_id, config_id, "h", error, at=at, retry_at=None)
    configs.end_delivery("anonymous", task_id, config_id, "h")
    return at


@pytest.mark.usefixtures("schema_checked")
def test_a_permanent_delivery_failure_is_shown_to_the_owner_until_the_config_is_updated(
    push: Client,
) -> None:
    task_id = new_task(push)
    config = {"id": "c1", "url": HOOK}
    wrapped = {"taskId": task_id, "pushNotificationConfig": config}
    push.result("tasks/pushNotificationConfig/set", wrapped)
    hostile = "the webhook answered HTTP 500 <script>\u2028" + "x" * 3000
    fail_for_good(push, task_id, "c1", hostile)
    failure = {"lastError": hostile, "failedAt": "2026-01-02T03:04:05.678Z"}
    got = push.result(
        "tasks/pushNotificationConfig/get", {"id": task_id, "pushNotificationConfigId": "c1"}
    )
    assert got == {**wrapped, "metadata": failure}
    assert push.result("tasks/pushNotificationConfig/list", {"id": task_id}) == [got]
    # v1.0's TaskPushNotificationConfig has no field for it: the answer stays in its schema.
    v1 = push.result(
        "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "c1"}, version="1.0"
    )
    assert v1 == {"id": "c1", "taskId": task_id, "url": HOOK}
    listed = push.result("ListTaskPushNotificationConfigs", {"taskId": task_id}, version="1.0")
    assert listed["configs"] == [v1]
    # The owner updates the config: the failure is forgotten (and the next sweep retries).
    assert push.result("tasks/pushNotificationConfig/set", wrapped) == wrapped
    assert push.result("tasks/pushNotificationConfig/get", {"id": task_id}) == wrapped


def test_a_v1_client_sees_the_failure_when_it_activates_the_kits_extension(push: Client) -> None:
    """v1.0 has no field for it: the kit's extension puts it where an extension's data goes,
    in 1.0 Get and List, over JSON-RPC and REST; the rest of each config stays strict."""
    task_id = new_task(push)
    for config_id in ("c1", "c2"):
        params = {"taskId": task_id, "id": config_id, "url": HOOK}
        push.result("CreateTaskPushNotificationConfig", params, version="1.0")
    fail_for_good(push, task_id, "c1", "no answer from the webhook <b>\u2028")
    failure = {
        "lastError": "no answer from the webhook <b>\u2028",
        "failedAt": "2026-01-02T03:04:05.678Z",
    }
    ask = {"A2A-Extensions": f"urn:other, {DELIVERY_STATUS.uri}"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTaskPushNotificationConfig"}
    response = push.post({**body, "params": {"taskId": task_id, "id": "c1"}}, {**V1, **ask})
    assert response.headers["A2A-Extensions"] == DELIVERY_STATUS.uri  # activated: echoed
    got = response.json()["result"]
    assert got == {
        "id": "c1",
        "taskId": task_id,
        "url": HOOK,
        "metadata": {DELIVERY_STATUS.uri: failure},
    }
    schema.check_v1(
        a2a_pb2.TaskPushNotificationConfig, {k: v for k, v in got.items() if k != "metadata"}
    )
    listed = push.result(
        "ListTaskPushNotificationConfigs", {"taskId": task_id}, version="1.0", headers=ask
    )
    assert listed["configs"] == [got, {"id": "c2", "taskId": task_id, "url": HOOK}]
    rest = push.http.get(f"/tasks/{task_id}/pushNotificationConfigs/c1", headers={**V1, **ask})
    assert rest.json() == got
    # Not activated: the strict 1.0 shape, whatever else the header names.
    plain = push.http.get(
        f"/tasks/{task_id}/pushNotificationConfigs/c1", headers={**V1, "A2A-Extensions": "urn:x"}
    )
    assert plain.json() == {"id": "c1", "taskId": task_id, "url": HOOK}
    assert "A2A-Extensions" not in plain.headers


def test_the_card_offers_the_delivery_status_extension_only_with_push(make_client: Any) -> None:
    def offered(client: Client) -> list[Any]:
        card = client.http.get("/.well-known/agent-card.json").json()
        return list(card["capabilities"].get("extensions", []))

    [extension] = offered(make_client())
    assert extension == {
        "uri": DELIVERY_STATUS.uri,
        "description": DELIVERY_STATUS.description,
    }
    assert offered(make_client(push_notifications=False)) == []


def test_a_v01_config_shows_its_failure_too(push: Client) -> None:
    task_id = new_task(push)
    set_params = {"id": task_id, "pushNotificationConfig": {"url": HOOK}}
    push.result("tasks/pushNotification/set", set_params)
    [stored] = push.app.service.ports.push_configs.list("anonymous", task_id)  # type: ignore[union-attr]
    fail_for_good(push, task_id, stored.config.id, "refused")
    got = push.result("tasks/pushNotification/get", {"id": task_id})
    assert got["metadata"] == {"lastError": "refused", "failedAt": "2026-01-02T03:04:05.678Z"}


def test_a_config_that_loses_the_race_for_the_last_place_gets_the_same_error(
    two_per_task: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another request takes the last place between the send's check (a list) and its put:
    # the put counts again, in the same step as its write, and refuses as the check does.
    push = two_per_task
    task_id = new_task(push)
    first = {"taskId": task_id, "id": "c0", "url": HOOK}
    push.result("CreateTaskPushNotificationConfig", first, version="1.0")
    configs = push.app.service.ports.push_configs
    assert configs is not None
    checked = configs.list

    def check_then_lose(owner: str, task: str) -> Any:
        seen = checked(owner, task)
        monkeypatch.setattr(configs, "list", checked)
        other = {"taskId": task_id, "id": "c1", "url": HOOK}
        push.result("CreateTaskPushNotificationConfig", other, version="1.0")
        return seen

    monkeypatch.setattr(configs, "list", check_then_lose)
    follow = follow_up_with_config(task_id)
    error = push.error("SendMessage", follow, version="1.0")
    assert (error["code"], error["message"]) == (-32602, LIMIT_MESSAGE.format(task=task_id))
    listed = push.result("ListTaskPushNotificationConfigs", {"taskId": task_id}, version="1.0")
    assert [c["id"] for c in listed["configs"]] == ["c0", "c1"]


@pytest.fixture(scope="module")
def shared_push() -> Iterator[tuple[Client, str]]:
    """One app and task for the property tests (hypothesis runs them many times)."""
    settings = Settings(
        handler="functions.handlers.sample", push_allowed_hosts=("hooks.example.com",)
    )
    client = Client(build(settings, store=MemoryTaskStore()))
    yield client, new_task(client)
    client.app.close()


# Characters no field of a push config may hold: C0 and C1 controls, DEL, and Unicode's own
# line and paragraph separators (each ends a line somewhere: a log, a header, a terminal).
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
hostile = st.text(
    st.sampled_from("\r\n\t\x00\x1b\x7f\x85\u2028é💥 :/?#%a")
    | st.characters(codec="utf-8", exclude_categories=["Cs"]),
    max_size=40,
)


@given(
    field=st.sampled_from(["url", "token", "credentials", "scheme"]),
    text=hostile,
    rest=st.booleans(),
)
def test_hostile_push_config_fields_are_stored_clean_or_refused_naming_the_field(
    shared_push: tuple[Client, str], field: str, text: str, rest: bool
) -> None:
    client, task_id = shared_push
    config: dict[str, Any] = {"id": "c1", "url": HOOK, "token": "t"}  # replaced each time
    auth = {"scheme": "Bearer", "credentials": "c"}
    if field == "url":
        config["url"] = HOOK + "/" + text
    elif field == "token":
        config["token"] = text
    else:
        config["authentication"] = {**auth, field: text or "x"}
    if "authentication" not in config:
        config["authentication"] = auth
    wire = f"params.{field}" if field in ("url", "token") else f"params.authentication.{field}"
    if rest:
        response = client.post(config, V1, path=f"/tasks/{task_id}/pushNotificationConfigs")
        assert response.status_code in (200, 400), response.status_code
        answer = json.loads(response.content)
        error = answer.get("error") if response.status_code == 400 else None
        if error is not None:
            fields = [v["field"] for d in error["details"] for v in d.get("fieldViolations", [])]
            assert fields == [wire], error
            return
    else:
        payload = client.rpc(
            "CreateTaskPushNotificationConfig", {"taskId": task_id, **config}, version="1.0"
        )
        error = payload.get("error")
        if error is not None:
            assert error["code"] == -32602, error
            fields = [v["field"] for d in error["data"] for v in d.get("fieldViolations", [])]
            assert fields == [wire], error
            return
        answer = payload["result"]
    kept = [answer["url"], answer["token"], *answer["authentication"].values()]
    assert not any(CONTROL.search(value) for value in kept), answer
    assert answer["url"].isascii() and len(answer["url"]) <= MAX_PUSH_URL_CHARS


@pytest.mark.parametrize(
    ("config", "field", "says"),
    [
        ({"url": HOOK + "/" + "a" * MAX_PUSH_URL_CHARS}, "params.url", "the limit 2048"),
        ({"url": HOOK + "/a\r\nX-Evil: 1"}, "params.url", "control character"),
        ({"url": "https://hooks.example.com/\u00e9t\u00e9"}, "params.url", "outside ASCII"),
        ({"token": "x" * (MAX_PUSH_SECRET_BYTES + 1)}, "params.token", "4096 bytes"),
        ({"token": "t\r\nX-Evil: 1"}, "params.token", "control character"),
        ({"token": "caf\u00e9"}, "params.token", "outside ASCII"),
        (
            {"authentication": {"scheme": "Bearer", "credentials": "c" * 3_000_000}},
            "params.authentication.credentials",
            "4096 bytes",
        ),
        (
            {"authentication": {"scheme": "Bearer\n", "credentials": "c"}},
            "params.authentication.scheme",
            "control character",
        ),
        (
            {"authentication": {"schemes": ["Basic"] * 9}},
            "params.authentication.schemes",
            "the limit 8",
        ),
    ],
)
def test_push_config_fields_are_bounded_on_every_binding(
    push: Client, config: dict[str, Any], field: str, says: str
) -> None:
    task_id = new_task(push)
    params = {"taskId": task_id, "url": HOOK, **config}
    error = push.error("CreateTaskPushNotificationConfig", params, version="1.0")
    assert error["code"] == -32602 and f"'{field}'" in error["message"] and says in error["message"]
    v03 = {
        "taskId": task_id,
        "pushNotificationConfig": {k: v for k, v in params.items() if k != "taskId"},
    }
    error = push.error("tasks/pushNotificationConfig/set", v03, version="0.3")
    assert error["code"] == -32602
    assert f"'params.pushNotificationConfig.{field.removeprefix('params.')}'" in error["message"]
    response = push.post(
        {k: v for k, v in params.items() if k != "taskId"},
        V1,
        path=f"/tasks/{task_id}/pushNotificationConfigs",
    )
    assert response.status_code == 400
    assert field in json.loads(response.content)["error"]["message"]
    # Inline in a send too: refused before anything is stored.
    inline = {
        "message": {"role": "ROLE_USER", "parts": [{"text": "hi"}], "messageId": "inline-1"},
        "configuration": {
            "taskPushNotificationConfig": {k: v for k, v in params.items() if k != "taskId"}
        },
    }
    error = push.error("SendMessage", inline, version="1.0")
    assert error["code"] == -32602 and "taskPushNotificationConfig" in error["message"]
    assert push.result("ListTasks", {}, version="1.0")["tasks"][0]["id"] == task_id


def test_configs_per_owner_are_limited_on_all_its_tasks(make_client: Any) -> None:
    keys = {hashed("ka"): "alice", hashed("kb"): "bob"}
    client = make_client(
        auth="api-key",
        api_keys=keys,
        push_allowed_hosts=("hooks.example.com",),
        max_push_configs_per_owner=2,
    )
    alice, bob = {"X-API-Key": "ka"}, {"X-API-Key": "kb"}
    first, second = new_task(client, "one", **alice), new_task(client, "two", **alice)
    for task_id in (first, second):
        params = {"taskId": task_id, "id": "c", "url": HOOK}
        client.result("CreateTaskPushNotificationConfig", params, version="1.0", headers=alice)
    params = {"taskId": second, "id": "d", "url": HOOK}
    error = client.error("CreateTaskPushNotificationConfig", params, version="1.0", headers=alice)
    assert error["code"] == -32602
    assert "A2A_MAX_PUSH_CONFIGS_PER_OWNER=2" in error["message"]
    response = client.post(
        {"id": "d", "url": HOOK}, {**V1, **alice}, path=f"/tasks/{second}/pushNotificationConfigs"
    )
    assert response.status_code == 400
    assert "A2A_MAX_PUSH_CONFIGS_PER_OWNER" in json.loads(response.content)["error"]["message"]
    # Another owner has its own; replacing one by its id stays allowed.
    bobs = new_task(client, "three", **bob)
    params = {"taskId": bobs, "id": "c", "url": HOOK}
    client.result("CreateTaskPushNotificationConfig", params, version="1.0", headers=bob)
    params = {"taskId": second, "id": "c", "url": HOOK + "/2"}
    client.result("CreateTaskPushNotificationConfig", params, version="1.0", headers=alice)


@pytest.mark.parametrize("config_id", ["c1", None])
def test_a_resend_stores_the_config_its_first_send_died_before_storing(
    push: Client, monkeypatch: pytest.MonkeyPatch, config_id: str | None
) -> None:
    """Seen in `make soak`: an instance killed after storing a task, before its config. The
    client's resend is answered with that task and puts the config it carries, due to the
    sweep for the events the task had meanwhile."""
    from shared.service.push_configs import PushConfigs

    config = {"url": HOOK, **({"id": config_id} if config_id else {})}
    params = {
        "message": {"role": "ROLE_USER", "parts": [{"text": "hi"}], "messageId": "m-died"},
        "configuration": {"taskPushNotificationConfig": config},
    }
    with monkeypatch.context() as patch:

        def died(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("the instance died")  # nothing after this ran

        patch.setattr(PushConfigs, "put", died)
        assert push.rpc("SendMessage", params, version="1.0")["error"]["code"] == -32603
    configs = push.app.service.ports.push_configs
    assert configs is not None
    [task_id] = [
        t.task.id for t in push.app.service.ports.store.list("anonymous", TaskQuery()).tasks
    ]
    assert configs.list("anonymous", task_id) == []
    again = push.result("SendMessage", params, version="1.0")["task"]
    assert again["id"] == task_id
    [stored] = configs.list("anonymous", task_id)
    assert stored.config.url == HOOK and stored.config.id == (config_id or stored.config.id)
    due = configs.lagging(utc_now() + timedelta(seconds=1), 10)
    assert [(c.config.task_id, c.wanted_seq > c.delivered_seq) for c in due] == [(task_id, True)]
    push.result("SendMessage", params, version="1.0")  # once more: no second config
    assert len(configs.list("anonymous", task_id)) == 1
