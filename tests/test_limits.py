"""Every limit of shared.limits, on JSON-RPC and REST: the exact error naming the limit and
its setting, and the task exactly as it was before the refused request."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emulator.firestore import FirestoreEmulator
from infra.plan import MALLOC_ARENAS
from shared import json_body as front_door
from shared.app import build
from shared.identity.api_key import hashed
from shared.lifecycle import JOIN_CHARS, apply
from shared.limits import ArtifactMeter, LimitExceeded, Limits, json_bytes, model_bytes
from shared.model import Artifact, ArtifactUpdate, Part, Task, TaskState, TaskStatus
from shared.settings import Settings, SettingsError
from shared.store.memory import MemoryTaskStore
from tests import sse
from tests.conftest import Client, wait_until
from tests.flags import flag
from tests.test_ids import text_id

MakeClient = Callable[..., Client]
V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def message(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {
        "messageId": extra.pop("messageId", text_id(text)),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **extra,
    }


def refused(client: Client, params: dict[str, Any], setting: str, field: str) -> str:
    """The JSON-RPC and REST refusals of one send: -32602 / 400, naming setting and field."""
    error = client.error("SendMessage", params, version="1.0")
    assert error["code"] == -32602, error
    assert setting in error["message"]
    assert error["data"][0]["fieldViolations"][0]["field"] == f"params.{field}"
    response = client.http.post("/message:send", content=json.dumps(params), headers=V1)
    assert response.status_code == 400
    status = response.json()["error"]
    assert status["status"] == "INVALID_ARGUMENT" and setting in status["message"]
    assert status["details"][1]["fieldViolations"][0]["field"] == f"params.{field}"
    return str(error["message"])


@pytest.fixture
def limited(make_client: MakeClient) -> Client:
    return make_client(
        handler="tests.handlers.limits",
        max_parts=3,
        max_metadata_bytes=64,
        max_message_bytes=2048,
        max_artifact_bytes=2048,
        max_history_messages=5,
        max_history_bytes=4096,
    )


def tasks(client: Client) -> Any:
    return client.result(
        "ListTasks", {"historyLength": 100, "includeArtifacts": True}, version="1.0"
    )


def test_parts_per_message(limited: Client) -> None:
    params = {"message": {**message(), "parts": [{"text": "a"}] * 4}}
    text = refused(limited, params, "A2A_MAX_PARTS", "message.parts")
    assert "has 4 parts; the limit is 3 (A2A_MAX_PARTS)" in text
    assert tasks(limited)["totalSize"] == 0
    params["message"]["parts"] = [{"text": "a"}] * 3
    assert "task" in limited.result("SendMessage", params, version="1.0")


@pytest.mark.parametrize(
    ("where", "field"),
    [
        (lambda m: {"message": {**m, "metadata": {"k": "x" * 80}}}, "message.metadata"),
        (
            lambda m: {"message": {**m, "parts": [{"text": "a", "metadata": {"k": "x" * 80}}]}},
            "message.parts[0].metadata",
        ),
        (lambda m: {"message": m, "metadata": {"k": "x" * 80}}, "metadata"),
    ],
)
def test_metadata_bytes(limited: Client, where: Callable[..., Any], field: str) -> None:
    text = refused(limited, where(message()), "A2A_MAX_METADATA_BYTES", field)
    assert "the limit is 64 (A2A_MAX_METADATA_BYTES)" in text
    assert field in text
    assert tasks(limited)["totalSize"] == 0


def test_message_bytes(limited: Client) -> None:
    text = refused(limited, {"message": message("x" * 3000)}, "A2A_MAX_MESSAGE_BYTES", "message")
    assert "the limit is 2048 (A2A_MAX_MESSAGE_BYTES)" in text
    assert tasks(limited)["totalSize"] == 0


def test_history_messages_leave_the_task_as_it_was(limited: Client) -> None:
    task = limited.result("SendMessage", {"message": message("one")}, version="1.0")["task"]
    sent = 1
    while True:
        sent += 1
        params = {"message": message(f"more {sent}", taskId=task["id"])}
        before = tasks(limited)
        answer = limited.rpc("SendMessage", params, version="1.0")
        if "error" in answer:
            break
        assert sent < 10, "the history limit was never reached"
    error = answer["error"]
    assert error["code"] == -32602
    assert "the limit is 5 (A2A_MAX_HISTORY_MESSAGES)" in error["message"]
    assert "without a taskId" in error["message"]
    assert tasks(limited) == before  # nothing stored
    # The same context goes on in a new task.
    follow = message("next", messageId="next", contextId=task["contextId"])
    assert limited.result("SendMessage", {"message": follow}, version="1.0")["task"]["id"]


def test_history_bytes(make_client: MakeClient) -> None:
    client = make_client(
        handler="tests.handlers.limits", max_history_bytes=2048, max_message_bytes=1024
    )
    task = client.result("SendMessage", {"message": message("a" * 700)}, version="1.0")["task"]
    before = tasks(client)
    params = {"message": message("b" * 700, taskId=task["id"])}
    ok = client.rpc("SendMessage", params, version="1.0")
    if "error" not in ok:  # two fit with the agent's question; the third cannot
        before = tasks(client)
        params = {"message": message("c" * 700, taskId=task["id"])}
    error = client.error("SendMessage", params, version="1.0")
    assert error["code"] == -32602
    assert "the limit is 2048 (A2A_MAX_HISTORY_BYTES)" in error["message"]
    assert error["data"][0]["fieldViolations"][0]["field"] == "params.message.taskId"
    assert tasks(client) == before


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("artifact 3000", "an artifact update of 30"),  # one update over the message limit
        ("datachunks 4", "an artifact with 4 parts; the limit is 3 (A2A_MAX_PARTS)"),
    ],
)
def test_a_handler_artifact_over_the_limit_fails_the_task(
    limited: Client, text: str, expected: str
) -> None:
    result = limited.result("SendMessage", {"message": message(text)}, version="1.0")
    status = result["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    reason = status["message"]["parts"][0]["text"]
    assert reason.startswith("The agent made ") and expected in reason
    if text.startswith("artifact"):
        assert "the limit for one update is 2048 (A2A_MAX_MESSAGE_BYTES)" in reason
    # What was stored reads back: no artifact over the limit.
    stored = limited.result("GetTask", {"id": result["task"]["id"]}, version="1.0")
    for artifact in stored.get("artifacts", []):
        assert len(artifact["parts"]) <= 3 and json_bytes(artifact) <= 2048 + 512


def test_a_message_limit_firestore_cannot_store_stops_start_up() -> None:
    firestore = {"A2A_BACKEND": "firestore", "GOOGLE_CLOUD_PROJECT": "demo-project"}
    with pytest.raises(SettingsError, match="A2A_MAX_MESSAGE_BYTES is at most 900000"):
        Settings.from_env({**firestore, "A2A_MAX_MESSAGE_BYTES": "4000000"})
    assert Settings.from_env({**firestore, "A2A_MAX_MESSAGE_BYTES": "900000"})
    assert Settings.from_env({"A2A_MAX_MESSAGE_BYTES": "4000000"})  # the embedded backend


def test_settings_make_the_limits() -> None:
    settings = Settings(max_parts=7, max_history_bytes=4096)
    assert settings.limits == Limits(parts=7, history_bytes=4096)
    assert Settings().limits == Limits()


# -- memory ----------------------------------------------------------------------------------

# The most one request may grow the process by: this many times its body, plus a fixed
# allowance for what any request costs besides (its models, its answer and their copies).
MEMORY_FACTOR = 4.5
MEMORY_ALLOWANCE = 4 * 1024 * 1024
SHAPES = ["message", "parts", "body", "values"]


def largest_allowed(shape: str, settings: Settings) -> bytes:
    """The largest body of each shape the default limits let through."""
    msg: dict[str, Any] = {"messageId": "big", "role": "user", "parts": [{"text": "hi"}]}
    extra: dict[str, Any] = {}
    if shape == "message":
        msg["parts"] = [{"text": "x" * (settings.max_message_bytes - 1000)}]
    elif shape == "parts":
        size = settings.max_message_bytes // settings.max_parts - 200
        msg["parts"] = [{"text": "x" * size} for _ in range(settings.max_parts)]
    elif shape == "body":
        extra["pad"] = "x" * (settings.max_body_bytes - 1000)  # unknown fields are ignored
    else:
        extra["pad"] = [{}] * (front_door.MAX_ITEMS // 2 - 100)
    params = {"message": msg, **extra}
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    ).encode()


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(f"{field}:"))
    return int(line.split()[1])


def _probe(path: str) -> None:
    """In a fresh process: RSS now, then the peak while the body in `path` arrives (read
    from the file, as from a socket) and is served. Nothing large was allocated before, so no
    freed memory the allocator kept can hide the request's."""
    client = Client(build(Settings(handler="tests.handlers.limits"), store=MemoryTaskStore()))
    for n in range(3):  # warm up every code path
        client.result("SendMessage", {"message": message(f"w{n}")}, version="1.0")
    gc.collect()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak (VmHWM) starts over from the resident size now
    resident = _status_kib("VmRSS")
    data = Path(path).read_bytes()
    response = client.post(data, {"A2A-Version": "1.0"})
    peak = _status_kib("VmHWM")
    growth = (peak - resident) * 1024
    error = response.json().get("error")
    print(json.dumps({"body": len(data), "growth": growth, "error": error}))
    client.app.close()


@pytest.mark.parametrize("shape", SHAPES)
def test_the_largest_allowed_request_grows_the_process_by_at_most_the_factor(
    shape: str, tmp_path: Path
) -> None:
    """RSS in a subprocess (tracemalloc misses the interpreter's and C libraries' memory): the
    peak (VmHWM, reset just before) during the request, less the resident size before it.
    The body read in counts (the test client keeps it too: 1x more than a server would)."""
    body = tmp_path / "body.json"
    body.write_bytes(largest_allowed(shape, Settings()))
    done = subprocess.run(
        [sys.executable, "-m", "tests.test_limits", str(body)],
        env={**os.environ, "MALLOC_ARENA_MAX": MALLOC_ARENAS},  # as the functions run
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent.parent,
        check=True,
    )
    measured = json.loads(done.stdout.splitlines()[-1])
    assert measured["error"] is None  # allowed
    budget = MEMORY_FACTOR * measured["body"] + MEMORY_ALLOWANCE
    factor = measured["growth"] / measured["body"]
    print(f"{shape}: {measured['body']} bytes grew RSS by {measured['growth']} ({factor:.2f}x)")
    assert measured["growth"] <= budget


if __name__ == "__main__":
    _probe(sys.argv[1])


def test_a_chunked_artifact_is_measured_chunk_by_chunk(make_client: MakeClient) -> None:
    """Many small chunks: each counted once (no re-serialization per chunk), their text
    joined, and the limit held to the bytes the artifact holds, not to a sum of envelopes."""
    client = make_client(handler="tests.handlers.limits", max_parts=3, max_artifact_bytes=40_000)
    done = client.result("SendMessage", {"message": message("chunks 2000")}, version="1.0")["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"] == [{"text": "x" * 2000}]
    failed = client.result("SendMessage", {"message": message("chunks 100 500")}, version="1.0")
    reason = failed["task"]["status"]["message"]["parts"][0]["text"]
    assert "the limit is 40000 (A2A_MAX_ARTIFACT_BYTES)" in reason
    stored = client.result("GetTask", {"id": failed["task"]["id"]}, version="1.0")
    [[part]] = [a["parts"] for a in stored["artifacts"]]
    assert 39_000 < len(part["text"]) <= 40_000  # refused at the chunk that passed the limit


def _frames(client: Client, method: str, params: dict[str, Any], version: str) -> list[Any]:
    body = {"jsonrpc": "2.0", "id": "s", "method": method, "params": params}
    headers = {"Content-Type": "application/json", "A2A-Version": version}
    response = client.http.post("/", content=json.dumps(body), headers=headers)
    return [event.data["result"] for event in sse.parse(response.text)]


def test_an_answer_of_500_chunks_streams_each_and_reads_back_as_one_part(
    make_client: MakeClient, schema_checked: None
) -> None:
    """A model's answer streamed token by token: a live stream gets every chunk as its own
    append; GetTask and ListTasks, in every version, one text part holding the whole text."""
    client = make_client(handler="tests.handlers.limits")  # A2A_MAX_PARTS at its 100
    frames = _frames(client, "SendStreamingMessage", {"message": message("chunks 500 3")}, "1.0")
    updates = [f["artifactUpdate"] for f in frames if "artifactUpdate" in f]
    assert len(updates) == 500
    assert [u.get("append", False) for u in updates] == [False] + [True] * 499
    assert all(u["artifact"]["parts"] == [{"text": "xxx"}] for u in updates)
    assert frames[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    task_id = frames[0]["task"]["id"]
    whole = "x" * 1500
    got = client.result("GetTask", {"id": task_id}, version="1.0")
    assert [a["parts"] for a in got["artifacts"]] == [[{"text": whole}]]
    [listed] = tasks(client)["tasks"]
    assert [a["parts"] for a in listed["artifacts"]] == [[{"text": whole}]]
    v03 = client.result("tasks/get", {"id": task_id}, version="0.3")
    assert [a["parts"] for a in v03["artifacts"]] == [[{"kind": "text", "text": whole}]]
    v01 = client.result("tasks/get", {"id": task_id}, version="0.1")
    assert [a["parts"] for a in v01["artifacts"]] == [[{"kind": "text", "text": whole}]]


def test_a_follower_of_a_streaming_answer_starts_from_one_part(
    make_client: MakeClient, schema_checked: None
) -> None:
    """SubscribeToTask mid-answer: its first frame, the task as stored, holds the text so far
    as one part; the chunks after it come as appends."""
    client = make_client(handler="tests.handlers.limits")
    key = uuid.uuid4().hex
    params = {"message": message(f"held 150 {key}"), "configuration": {"returnImmediately": True}}
    task_id = client.result("SendMessage", params, version="1.0")["task"]["id"]
    try:
        assert flag(key, "made").wait(20), "the handler made no chunks"

        def stored_text() -> list[Any]:
            task = client.result("GetTask", {"id": task_id}, version="1.0")
            return [a["parts"] for a in task.get("artifacts", [])]

        # Committed in the turn's next window (nothing to wait on in between: look again).
        wait_until(lambda: stored_text() == [[{"text": "x" * 150}]], 10, lambda: "not stored")
        body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
        headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
        with client.http.stream("POST", "/", content=json.dumps(body), headers=headers) as r:
            events = sse.events(r.iter_lines())
            first = next(events).data["result"]["task"]
            assert [a["parts"] for a in first["artifacts"]] == [[{"text": "x" * 150}]]
            flag(key, "go").set()
            rest = [e.data["result"] for e in events]
        [last] = [f["artifactUpdate"] for f in rest if "artifactUpdate" in f]
        assert last["append"] and last["lastChunk"] and last["artifact"]["parts"] == [{"text": "!"}]
        assert stored_text() == [[{"text": "x" * 150 + "!"}]]
    finally:
        flag(key, "go").set()


# Chunks of one artifact: plain text (which joins), data and text with metadata (which do not).
_chunk_parts = st.one_of(
    st.builds(Part, text=st.text(max_size=30)),
    st.builds(Part, data=st.integers()),
    st.builds(Part, text=st.text(max_size=5), metadata=st.just({"k": "v"})),
)


def _updates(chunks: list[tuple[Part, ...]]) -> list[ArtifactUpdate]:
    artifacts = [Artifact(artifact_id="a", parts=parts) for parts in chunks]
    return [
        ArtifactUpdate(task_id="t", context_id="c", artifact=a, append=i > 0)
        for i, a in enumerate(artifacts)
    ]


_WORKING = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))


def _metered_as_folded(
    updates: list[ArtifactUpdate],
    limits: Limits,
    turns: set[int],
    over: Callable[[Artifact], str | None],
) -> None:
    """Feed `updates` to a meter, a new one at each index in `turns` (a later turn of the
    task, which finds the artifact made by an earlier one), and to the fold: the meter takes
    every update until the one the fold would take over the limit, which it refuses with the
    message `over` expects of the folded artifact (None: not over)."""
    meter, task = ArtifactMeter(limits), _WORKING
    for index, update in enumerate(updates):
        if index in turns:
            meter = ArtifactMeter(limits)
        after = apply(task, update)
        says = over(after.artifacts[0])
        if says is not None:
            with pytest.raises(LimitExceeded, match=says):
                meter.add(update, task)
            return
        meter.add(update, task)
        task = after


_turns = st.sets(st.integers(1, 30), max_size=3)


@given(st.lists(st.lists(_chunk_parts, max_size=3).map(tuple), min_size=1, max_size=30), _turns)
def test_the_meter_counts_the_parts_the_fold_keeps(
    chunks: list[tuple[Part, ...]], turns: set[int]
) -> None:
    def over(artifact: Artifact) -> str | None:
        parts = len(artifact.parts)
        return f"with {parts} parts; the limit is 8 " if parts > 8 else None

    _metered_as_folded(_updates(chunks), Limits(parts=8), turns, over)


@given(st.lists(st.text(max_size=40), min_size=1, max_size=30), st.integers(100, 600), _turns)
def test_the_meter_holds_joined_text_to_the_bytes_the_artifact_has(
    texts: list[str], limit: int, turns: set[int]
) -> None:
    def over(artifact: Artifact) -> str | None:
        return f"the limit is {limit} " if model_bytes(artifact) > limit else None

    updates = _updates([(Part(text=t),) for t in texts])
    _metered_as_folded(updates, Limits(artifact_bytes=limit), turns, over)


@pytest.mark.parametrize(
    "variable",
    [
        "A2A_MAX_BATCH",
        "A2A_MAX_PARTS",
        "A2A_MAX_METADATA_BYTES",
        "A2A_MAX_MESSAGE_BYTES",
        "A2A_MAX_ARTIFACT_BYTES",
        "A2A_MAX_HISTORY_MESSAGES",
        "A2A_MAX_HISTORY_BYTES",
        "A2A_MAX_STREAMS_PER_OWNER",
    ],
)
def test_a_bad_limit_stops_start_up_naming_it(variable: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env({variable: "0"})
    assert Settings.from_env({variable: "4096"}) != Settings()


@pytest.mark.emulator
@pytest.mark.parametrize("shape", ["message", "parts"])
def test_the_largest_allowed_message_is_stored_and_served_on_firestore(
    clean_firestore: FirestoreEmulator, shape: str
) -> None:
    """Firestore refuses documents over 1 MiB: what the limits let through still fits."""
    settings = Settings(
        handler="tests.handlers.limits", backend="firestore", project=clean_firestore.project
    )
    client = Client(build(settings))
    try:
        sent = json.loads(largest_allowed(shape, settings))["params"]
        task = client.result("SendMessage", sent, version="1.0")["task"]
        again = client.result("GetTask", {"id": task["id"], "historyLength": 10}, version="1.0")
        texts = [p["text"] for p in again["history"][0]["parts"]]
        assert texts == [p["text"] for p in sent["message"]["parts"]]
        answer = {"message": message("more", messageId="m2", taskId=task["id"])}
        assert client.result("SendMessage", answer, version="1.0")["task"]["id"] == task["id"]
    finally:
        client.app.close()


@pytest.mark.emulator
def test_an_answer_of_500_chunks_is_joined_on_firestore_even_folded_from_its_log(
    clean_firestore: FirestoreEmulator,
) -> None:
    """500 chunks of 2,000 characters: the task outgrows its document (the store's task
    budget, 800,000 bytes), so the store folds it from the event log, which holds each chunk;
    the fold joins them as the turn did (in parts of at most JOIN_CHARS and a chunk)."""
    settings = Settings(
        handler="tests.handlers.limits", backend="firestore", project=clean_firestore.project
    )
    client = Client(build(settings))
    try:
        frames = _frames(
            client, "SendStreamingMessage", {"message": message("chunks 500 2000")}, "1.0"
        )
        assert sum("artifactUpdate" in f for f in frames) == 500
        assert frames[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        got = client.result("GetTask", {"id": frames[0]["task"]["id"]}, version="1.0")
        [parts] = [a["parts"] for a in got["artifacts"]]
        assert "".join(p["text"] for p in parts) == "x" * 1_000_000
        assert all(JOIN_CHARS <= len(p["text"]) < JOIN_CHARS + 2000 for p in parts[:-1])
        assert len(parts) == 4
    finally:
        client.app.close()


@pytest.mark.parametrize(
    ("how", "named"),
    [
        ("progress", "StatusUpdate.status.message.parts[0].text holds a lone UTF-16 surrogate"),
        ("reply", "Message.parts[0].text holds a lone UTF-16 surrogate"),
        ("deep", "nests deeper than 64 levels"),
        ("deeper", "Artifact holds data nested deeper than 64 levels"),
        ("nan", "Artifact.parts[0].data.x[0] is nan"),
        ("infinity", "data.x[0] is inf, which JSON has no form for: send a finite number"),
        ("set", "StatusUpdate.status.message.parts[0].data.s is a set"),
        ("type", "Message.parts[0].text is int, not a string"),
        ("append", "ArtifactUpdate.append is 'yes', not true or false"),
    ],
)
def test_a_handler_output_no_answer_could_carry_fails_the_task(
    limited: Client, how: str, named: str
) -> None:
    result = limited.rpc("SendMessage", {"message": message(f"unservable {how}")}, version="1.0")
    status = result["result"]["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    said = status["message"]["parts"][0]["text"]
    assert said.startswith("The agent made output that cannot be sent as JSON: ")
    assert named in said
    task_id = result["result"]["task"]["id"]
    for method in ("GetTask", "ListTasks"):  # the task, and every answer about it, still served
        assert "result" in limited.rpc(method, {"id": task_id}, version="1.0")


KEYS = {hashed("ka"): "alice", hashed("kb"): "bob"}
ALICE, BOB = {"X-API-Key": "ka"}, {"X-API-Key": "kb"}
HOOK = {"url": "https://hooks.example.com/hook"}


@pytest.fixture(params=["memory", pytest.param("firestore", marks=pytest.mark.emulator)])
def quota_client(request: pytest.FixtureRequest) -> Iterator[MakeClient]:
    """Clients of apps of two owners (API keys) on each backend, Firestore on the emulator."""
    made: list[Client] = []

    def make(**settings: Any) -> Client:
        values: dict[str, Any] = {
            "handler": "functions.handlers.echo",
            "auth": "api-key",
            "api_keys": KEYS,
            "push_allowed_hosts": ("hooks.example.com",),
            **settings,
        }
        if request.param == "firestore":
            emulator: FirestoreEmulator = request.getfixturevalue("clean_firestore")
            client = Client(
                build(Settings(**values, backend="firestore", project=emulator.project))
            )
        else:
            client = Client(build(Settings(**values), store=MemoryTaskStore()))
        made.append(client)
        return client

    yield make
    for client in made:
        client.http.close()
        client.app.close()


def listed(client: Client, headers: dict[str, str]) -> set[str]:
    tasks = client.result("ListTasks", {}, version="1.0", headers=headers)["tasks"]
    return {task["id"] for task in tasks}


def test_live_tasks_per_owner_are_limited_for_sends_that_outlive_the_request(
    quota_client: MakeClient,
) -> None:
    client = quota_client(handler="tests.handlers.two_turns", max_live_tasks_per_owner=2)
    asked = [
        client.result("SendMessage", {"message": message(f"q{n}")}, version="1.0", headers=ALICE)
        for n in range(2)
    ]
    assert all(a["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" for a in asked)
    background = {"message": message("bg"), "configuration": {"returnImmediately": True}}
    error = client.error("SendMessage", background, version="1.0", headers=ALICE)
    assert error["code"] == -32000
    assert "A2A_MAX_LIVE_TASKS_PER_OWNER=2" in error["message"]
    response = client.post(background, {**V1, **ALICE}, path="/message:send")
    assert response.status_code == 429
    assert "A2A_MAX_LIVE_TASKS_PER_OWNER" in json.loads(response.content)["error"]["message"]
    assert listed(client, ALICE) == {a["task"]["id"] for a in asked}  # nothing stored
    # A blocking send is not checked (it pays no read); another owner has a quota of its own.
    client.result("SendMessage", {"message": message("q2")}, version="1.0", headers=ALICE)
    bobs = {"message": message("bob"), "configuration": {"returnImmediately": True}}
    client.result("SendMessage", bobs, version="1.0", headers=BOB)
    # Tasks that end free their places.
    for a in asked:
        client.result("CancelTask", {"id": a["task"]["id"]}, version="1.0", headers=ALICE)
    started = client.result("SendMessage", background, version="1.0", headers=ALICE)["task"]
    assert started["id"] in listed(client, ALICE)


def test_a_blocking_send_pays_no_read_for_the_live_quota() -> None:
    store = MemoryTaskStore()
    client = Client(build(Settings(handler="functions.handlers.echo"), store=store))
    try:
        client.result("SendMessage", {"message": message("warm")}, version="1.0")
        reads = store.cost.reads
        client.result("SendMessage", {"message": message("short")}, version="1.0")
        assert store.cost.reads == reads
    finally:
        client.app.close()


def test_a_send_whose_push_config_is_over_the_owner_s_quota_stores_no_task(
    quota_client: MakeClient,
) -> None:
    client = quota_client(max_push_configs_per_owner=1)
    first = {"message": message("one"), "configuration": {"taskPushNotificationConfig": HOOK}}
    kept = client.result("SendMessage", first, version="1.0", headers=ALICE)["task"]["id"]
    for immediately in (False, True):
        configuration = {"taskPushNotificationConfig": HOOK, "returnImmediately": immediately}
        over = {"message": message(f"two-{immediately}"), "configuration": configuration}
        error = client.error("SendMessage", over, version="1.0", headers=ALICE)
        assert error["code"] == -32602
        assert "A2A_MAX_PUSH_CONFIGS_PER_OWNER=1" in error["message"]
    assert listed(client, ALICE) == {kept}
    client.result("SendMessage", first, version="1.0", headers=BOB)  # a quota of its own


def test_a_resent_background_send_at_the_live_quota_gets_its_first_answer(
    quota_client: MakeClient,
) -> None:
    client = quota_client(handler="tests.handlers.two_turns", max_live_tasks_per_owner=1)
    background = {"message": message("bg"), "configuration": {"returnImmediately": True}}
    first = client.result("SendMessage", background, version="1.0", headers=ALICE)["task"]
    again = client.result("SendMessage", background, version="1.0", headers=ALICE)["task"]
    assert again["id"] == first["id"]
    other = {"message": message("other"), "configuration": {"returnImmediately": True}}
    error = client.error("SendMessage", other, version="1.0", headers=ALICE)
    assert "A2A_MAX_LIVE_TASKS_PER_OWNER=1" in error["message"]
