"""The one id rule (shared.ids): what passes, what is refused and how, on the wire and in
both stores."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator.firestore import FirestoreEmulator
from shared import ids
from shared.app import build
from shared.model import PushConfig
from shared.ports import MessageKey, TaskQuery, TaskStore
from shared.settings import Settings
from shared.store.firestore import FirestoreTaskStore
from shared.store.firestore_push import FirestorePushConfigStore
from shared.store.memory import MemoryTaskStore
from shared.store.memory_push import MemoryPushConfigStore
from tests.conftest import Client
from tests.store.factory import ALICE, new_task

_TEXT_IDS = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")


def text_id(text: str) -> str:
    """A message id for a test's message text: the same text, the same id, by the rule."""
    return str(uuid.uuid5(_TEXT_IDS, text))


# The ids of issue 12 that broke the Firestore backend or grew the embedded one, and their
# kin: each refused, on the wire and by both stores.
HOSTILE_IDS = [
    "",
    ".",
    "..",
    "/",
    "a/b",
    "__x__/y",
    "../../etc/passwd",
    "task-1/pushConfigs/x",
    "x" * 2000,
    "x" * 129,
    "a b",
    "tab\there",
    "new\nline",
    "nul\x00",
    "\ud800",
    "caf\u00e9",
    "%2F",
    "a\\b",
    "<script>",
]

# UUIDs, the seeds' ids (tests/system/seeds), the SDKs' and the TCK's styles, and names that
# are harmless once no document id is built from them (`__x__` is reserved by Firestore).
GOOD_IDS = [
    "de38c76d-d54c-436c-8b9f-4c2703648d64",
    "task-7f3a",
    "call-001",
    "custom-map",
    "route-planner",
    "1",
    "791",
    "my-task-1",
    "test_task.2024:v1",
    "user@example.com",
    "a+b~c",
    "...",
    "a..b",
    "__x__",
    "__name__",
    "x" * 128,
]


@pytest.mark.parametrize("good", GOOD_IDS)
def test_the_rule_accepts_uuids_and_the_ids_clients_use(good: str) -> None:
    assert ids.is_valid(good)
    assert ids.problem(good) is None
    assert ids.require(good, "task id") == good


@pytest.mark.parametrize("bad", HOSTILE_IDS)
def test_the_rule_refuses_and_says_why_without_echoing(bad: str) -> None:
    problem = ids.problem(bad)
    # One of three sentences, none of which echoes the id.
    assert problem in (
        "must not be empty",
        f"must be {ids.RULE}",
        f"has {len(bad)} characters; {ids.RULE}",
    )
    with pytest.raises(ValueError, match=r"^task id "):
        ids.require(bad, "task id")


def test_a_too_long_id_is_told_its_length() -> None:
    assert ids.problem("x" * 2000) == f"has 2000 characters; {ids.RULE}"


# Any text, and text from the rule's alphabet with its edges (`.`, `..`, 128 vs 129).
ANY_ID = st.one_of(
    st.text(max_size=200),
    st.text(alphabet="aZ09-_.:~@+/ ", min_size=0, max_size=130),
)


@given(ANY_ID)
def test_any_string_passes_and_round_trips_or_is_refused(value: str) -> None:
    """In the embedded stores: as task, context, message and push config id alike."""
    if not ids.is_valid(value):
        assert ids.problem(value) is not None
        return
    tasks, configs = MemoryTaskStore(), MemoryPushConfigStore()
    round_trip(tasks, configs, value)


def round_trip(tasks: TaskStore, configs: Any, value: str) -> None:
    task, events = new_task(context_id=value, task_id=value)
    tasks.create(ALICE, task, events, dialect="1.0", message_key=MessageKey(value, "digest"))
    stored = tasks.get(ALICE, value)
    assert stored is not None and stored.task == task
    assert tasks.find_message(ALICE, MessageKey(value, "digest")) == value
    assert [s.task.id for s in tasks.list(ALICE, TaskQuery(context_id=value)).tasks] == [value]
    config = PushConfig(id=value, task_id=value, url="https://h.example.com/")
    configs.put(ALICE, config, dialect="1.0")
    got = configs.get(ALICE, value, value)
    assert got is not None and got.config == config
    assert configs.delete(ALICE, value, value) is True


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        st.sampled_from(GOOD_IDS),
        st.text(alphabet="abcXYZ019-_.:~@+", min_size=1, max_size=128),
    ).filter(ids.is_valid)
)
def test_ids_by_the_rule_round_trip_through_firestore(
    clean_firestore: FirestoreEmulator, value: str
) -> None:
    tasks = FirestoreTaskStore(clean_firestore.project)
    configs = FirestorePushConfigStore(tasks.client, retention=tasks.retention, cost=tasks.cost)
    if tasks.get(ALICE, value) is None:  # examples share the emulator within one test
        round_trip(tasks, configs, value)


# -- on the wire ---------------------------------------------------------------------------


def _send(message: dict[str, Any], **params: Any) -> dict[str, Any]:
    body = {"role": "user", "parts": [{"text": "hi"}], "messageId": "m-1", **message}
    return {"message": body, **params}


# (method, A2A-Version, params with the id under test as `{}`, the wire field named)
WIRE_IDS: list[tuple[str, str | None, Any, str]] = [
    ("SendMessage", "1.0", lambda v: _send({"messageId": v}), "params.message.messageId"),
    ("SendMessage", "1.0", lambda v: _send({"taskId": v}), "params.message.taskId"),
    ("SendMessage", "1.0", lambda v: _send({"contextId": v}), "params.message.contextId"),
    (
        "SendMessage",
        "1.0",
        lambda v: _send({"referenceTaskIds": ["ok", v]}),
        "params.message.referenceTaskIds[1]",
    ),
    (
        "SendMessage",
        "1.0",
        lambda v: _send(
            {},
            configuration={
                "taskPushNotificationConfig": {"url": "https://h.example.com/", "id": v}
            },
        ),
        "params.configuration.taskPushNotificationConfig.id",
    ),
    ("message/send", None, lambda v: _send({}, taskId=v), "params.taskId"),
    ("tasks/send", None, lambda v: _send({}, id=v), "params.id"),
    ("tasks/send", None, lambda v: _send({}, id="ok", sessionId=v), "params.sessionId"),
    ("GetTask", "1.0", lambda v: {"id": v}, "params.id"),
    ("tasks/get", None, lambda v: {"taskId": v}, "params.taskId"),
    ("CancelTask", "1.0", lambda v: {"id": v}, "params.id"),
    ("ListTasks", "1.0", lambda v: {"contextId": v}, "params.contextId"),
    ("GetTaskPushNotificationConfig", "1.0", lambda v: {"taskId": v, "id": "c"}, "params.taskId"),
    ("GetTaskPushNotificationConfig", "1.0", lambda v: {"taskId": "t", "id": v}, "params.id"),
    ("DeleteTaskPushNotificationConfig", "1.0", lambda v: {"taskId": "t", "id": v}, "params.id"),
    (
        "CreateTaskPushNotificationConfig",
        "1.0",
        lambda v: {"taskId": "t", "id": v, "url": "https://h.example.com/"},
        "params.id",
    ),
    (
        "tasks/pushNotificationConfig/get",
        None,
        lambda v: {"id": "t", "pushNotificationConfigId": v},
        "params.pushNotificationConfigId",
    ),
]


def assert_refused_id(error: dict[str, Any], field: str, bad: str) -> None:
    """The id rule's answer, naming the field; a lone surrogate never reaches the rule: the
    front door (shared.json_body.py) refuses the whole body as unparsable."""
    if any("\ud800" <= c <= "\udfff" for c in bad):
        assert error["code"] == -32700 and "surrogate" in error["message"], error
        return
    assert error["code"] == -32602, error
    assert error["message"] == f"Invalid parameters: '{field}' {ids.problem(bad)}"


@pytest.mark.parametrize("bad", [b for b in HOSTILE_IDS if b])  # "" reads as "not given"
@pytest.mark.parametrize("case", WIRE_IDS, ids=[f"{m}-{f}" for m, _, _, f in WIRE_IDS])
def test_every_client_id_is_checked_on_the_wire_naming_its_field(
    client: Client, case: tuple[str, str | None, Any, str], bad: str
) -> None:
    method, version, params, field = case
    assert_refused_id(client.error(method, params(bad), version=version), field, bad)


@pytest.mark.parametrize("bad", ["..", "x" * 2000, "a%20b", "%00", "caf%C3%A9"])
def test_rest_path_ids_are_checked(client: Client, bad: str) -> None:
    for method, path in (
        ("GET", f"/tasks/{bad}"),
        ("POST", f"/tasks/{bad}:cancel"),
        ("GET", f"/tasks/{bad}/pushNotificationConfigs"),
        ("GET", f"/tasks/t/pushNotificationConfigs/{bad}"),
        ("DELETE", f"/tasks/t/pushNotificationConfigs/{bad}"),
    ):
        response = client.http.request(method, path, headers={"A2A-Version": "1.0"})
        assert response.status_code == 400, (method, path, response.content)
        message = response.json()["error"]["message"]
        assert message.startswith("Invalid parameters: 'params.") and message.endswith(ids.RULE)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=ANY_ID)
def test_any_task_id_is_not_found_or_refused_never_internal(client: Client, value: str) -> None:
    error = client.error("GetTask", {"id": value}, version="1.0")
    if ids.is_valid(value):
        assert error["code"] == -32001
    elif value:
        assert error["code"] == -32602 and "'params.id' " in error["message"]
    else:
        assert error["code"] == -32602 and "required" in error["message"]


@pytest.mark.parametrize("good", ["__x__", "...", "x" * 128, "user@example.com"])
def test_odd_but_valid_ids_work_end_to_end(client: Client, good: str) -> None:
    """A v0.1 client names its task: odd names by the rule are tasks like any other."""
    task = client.result("tasks/send", _send({"messageId": text_id(good)}, id=good))
    assert task["id"] == good
    assert client.result("tasks/get", {"id": good})["id"] == good


@pytest.fixture(params=["memory", "firestore"])
def any_backend(request: pytest.FixtureRequest) -> Iterator[Client]:
    """The sample agent on the embedded backend or on the Firestore emulator."""
    values: dict[str, Any] = {"push_allowed_hosts": ("hooks.example.com",)}
    store: TaskStore = MemoryTaskStore()
    if request.param == "firestore":
        emulator: FirestoreEmulator = request.getfixturevalue("clean_firestore")
        store = FirestoreTaskStore(emulator.project)
        values |= {"backend": "firestore", "project": emulator.project}
    client = Client(build(Settings(**values), store=store))
    yield client
    client.app.close()


@pytest.mark.parametrize("bad", [b for b in HOSTILE_IDS if b])
def test_hostile_ids_get_the_rule_on_both_backends(any_backend: Client, bad: str) -> None:
    """Issue 12's ids (`.`, `..`, `/`, `a/b`, `../../etc/passwd`, 2,000 characters...) as a
    v0.1 client's task id, and as a config id: the rule, never -32603, nothing stored."""
    client = any_backend
    assert_refused_id(client.error("tasks/send", _send({}, id=bad)), "params.id", bad)
    config = {"taskId": "t", "pushNotificationConfig": {"id": bad, "url": "https://h.example.com/"}}
    error = client.error("tasks/pushNotificationConfig/set", config)
    assert_refused_id(error, "params.pushNotificationConfig.id", bad)
    assert client.result("ListTasks", {}, version="1.0")["totalSize"] == 0


def test_a_task_id_naming_another_tasks_configs_reaches_nothing(any_backend: Client) -> None:
    """`<task>/pushConfigs/x` once wrote into that task's push configs on Firestore."""
    client = any_backend
    task = client.result("tasks/send", _send({"messageId": text_id("victim")}, id="victim"))
    hook = {"url": "https://hooks.example.com/a2a", "id": "cfg"}
    client.result(
        "tasks/pushNotificationConfig/set", {"taskId": "victim", "pushNotificationConfig": hook}
    )
    before = client.result("tasks/pushNotificationConfig/list", {"id": "victim"})
    for hostile in ("victim/pushConfigs/cfg", "victim/events/0000000001", "../victim"):
        error = client.error("tasks/send", _send({}, id=hostile))
        assert error["code"] == -32602
    assert client.result("tasks/pushNotificationConfig/list", {"id": "victim"}) == before
    assert client.result("tasks/get", {"id": "victim"})["status"] == task["status"]
