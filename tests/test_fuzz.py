"""Generated hostile requests against the whole `a2a` app, on both backends.

Every method of every dialect, the HTTP+JSON routes and the seeds' `GET /sse`, with wrong
types, unicode edge cases (lone surrogates, NUL, BOM, bidi controls), huge and deep values,
NaN, repeated keys, batches, foreign (another owner's) and malformed ids. Whatever is sent:

- no 5xx, and no JSON-RPC -32603 (internal error) anywhere in an answer or a stream frame;
- every answer is valid JSON (no NaN, valid UTF-8), and a JSON-RPC answer carries the id of
  the request it answers (null when the request had none that JSON-RPC allows);
- no stream slot stays held once its response is closed;
- afterwards, every task either owner has reads back (JSON-RPC 1.0 and 0.3, and REST).

`make test` runs a bounded, derandomized profile (FUZZ_EXAMPLES examples per backend);
`make fuzz` runs many more and prints what the answers were.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from emulator.firestore import FirestoreEmulator
from shared import json_body as front_door
from shared.app import build
from shared.bindings import rest
from shared.dialects.registry import METHODS
from shared.errors import A2AError
from shared.identity.api_key import hashed
from shared.settings import Settings
from shared.store.memory import MemoryTaskStore
from tests.conftest import Client

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "120"))

KEYS = {"alice": "k-alice", "bob": "k-bob"}
MALFORMED_IDS = [".", "..", "/", "a/b", "__x__", "../../etc/passwd", "x" * 2000, "a:b", " "]
PLAIN_IDS = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=40)

SURROGATES = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1)
EDGE_TEXT = st.sampled_from(
    ["", " ", "\x00", "\u202e", "\ufeff", "😀", "\\", '"', "null", "%2F", "\r\n", "a" * 70_000]
)
TEXT = st.one_of(st.text(max_size=40), EDGE_TEXT, SURROGATES)
NUMBERS = st.one_of(st.integers(), st.integers(min_value=-(10**40), max_value=10**40), st.floats())
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5),
    max_leaves=20,
)


def nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"a": [value]}
    return value


HUGE = st.sampled_from(
    [nested(40), nested(200), [{}] * 20_000, {"k": "v" * 300_000}, list(range(5_000))]
)


class Target:
    """The app under test, its two owners, and the task ids it has handed out."""

    def __init__(self, client: Client, backend: str, *, malformed: bool) -> None:
        self.client = client
        self.backend = backend
        # Whether client-chosen ids (task, context, message, push config) may be anything,
        # or only plain ones (letters, digits, - and _).
        self.malformed = malformed
        self.ids: dict[str, list[str]] = {"alice": [], "bob": []}
        self.counts: Counter[tuple[str, str]] = Counter()  # (binding, answer) -> requests

    def ids_strategy(self, data: st.DataObject, owner: str) -> str:
        """An id: a plain one, one of the owner's tasks, another owner's (not found for this
        one), or (malformed) any text. The draws are the same whatever the app holds, as
        hypothesis needs: a task is picked by index."""
        kind = data.draw(st.sampled_from(["plain", "mine", "theirs", "text", "malformed"]))
        index = data.draw(st.integers(min_value=0, max_value=49))
        if kind in ("mine", "theirs"):
            pool = self.ids[owner if kind == "mine" else ("bob" if owner == "alice" else "alice")]
            return pool[index % len(pool)] if pool else "no-such-task"
        if kind == "text" and self.malformed:
            return data.draw(TEXT)
        if kind == "malformed" and self.malformed:
            return MALFORMED_IDS[index % len(MALFORMED_IDS)]
        return data.draw(PLAIN_IDS)


def message(data: st.DataObject, ids: Callable[[], str]) -> Any:
    part = st.one_of(
        st.fixed_dictionaries({"text": TEXT}),
        st.fixed_dictionaries(
            {"kind": st.sampled_from(["text", "data", "file", "x"]), "text": TEXT}
        ),
        st.fixed_dictionaries({"data": JSON_VALUES}),
        st.fixed_dictionaries({"raw": TEXT, "mediaType": TEXT}),
        st.fixed_dictionaries({"url": TEXT}),
        st.fixed_dictionaries({"file": st.fixed_dictionaries({"bytes": TEXT, "name": TEXT})}),
        st.fixed_dictionaries({"text": TEXT, "metadata": JSON_VALUES}),
        JSON_VALUES,
    )
    shape = {
        "messageId": st.just(ids()),
        "role": st.sampled_from(["ROLE_USER", "user", "agent", "ROLE_AGENT", "x", 1]),
        "parts": st.one_of(
            st.lists(part, min_size=1, max_size=4), JSON_VALUES, st.just([{"text": "hi"}] * 150)
        ),
    }
    optional = {
        "taskId": st.just(ids()),
        "contextId": st.just(ids()),
        "metadata": st.one_of(JSON_VALUES, HUGE),
        "referenceTaskIds": st.one_of(st.lists(TEXT, max_size=3), JSON_VALUES),
        "extensions": JSON_VALUES,
    }
    return data.draw(st.one_of(st.fixed_dictionaries(shape, optional=optional), JSON_VALUES))


def params(data: st.DataObject, ids: Callable[[], str]) -> Any:
    """Params every operation might read, some of them wrong."""
    fields: dict[str, st.SearchStrategy[Any]] = {
        "message": st.just(message(data, ids)),
        "id": st.just(ids()),
        "taskId": st.just(ids()),
        "sessionId": st.just(ids()),
        "historyLength": st.one_of(st.integers(), TEXT),
        "configuration": st.one_of(
            JSON_VALUES,
            st.fixed_dictionaries(
                {},
                optional={
                    "returnImmediately": st.one_of(st.booleans(), JSON_VALUES),
                    "blocking": st.one_of(st.booleans(), JSON_VALUES),
                    "historyLength": st.one_of(st.integers(), TEXT),
                    "taskPushNotificationConfig": st.fixed_dictionaries(
                        {"url": st.one_of(TEXT, st.just("https://hooks.example.com/h"))}
                    ),
                },
            ),
        ),
        "url": st.one_of(TEXT, st.sampled_from(["https://example.com/h", "http://10.0.0.1/"])),
        "pushNotificationConfig": st.one_of(
            JSON_VALUES, st.fixed_dictionaries({"url": TEXT, "id": st.just(ids())})
        ),
        "pushNotificationConfigId": st.just(ids()),
        "pageSize": st.one_of(st.integers(), TEXT),
        "pageToken": TEXT,
        "status": TEXT,
        "statusTimestampAfter": TEXT,
        "lastEventId": st.one_of(st.integers(), TEXT),
        "metadata": st.one_of(JSON_VALUES, HUGE),
    }
    return data.draw(st.one_of(st.fixed_dictionaries({}, optional=fields), JSON_VALUES, HUGE))


RAW_BODIES = st.sampled_from(
    [
        b'{"jsonrpc":"2.0","id":NaN,"method":"GetTask","params":{"id":"x"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"id":2,"method":"GetTask"}',
        b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"user",'
        b'"messageId":"\\ud800","parts":[{"text":"\\udfff"}]}}}',
        b"[" * 5000 + b"]" * 5000,
        b'{"a":' * 100 + b"1" + b"}" * 100,
        b"\xff\xfe\x00",
        b"\xef\xbb\xbf{}",
        b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\xed\xa0\x80"}}',
        b"[" + b"{}," * 60_000 + b"{}]",
        b"",
        b"null",
    ]
)


SEND_METHODS = ["SendMessage", "message/send", "tasks/send", "SendStreamingMessage"]
VALID_TEXT = st.one_of(st.text(max_size=40), EDGE_TEXT)  # no lone surrogates
VALID_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), VALID_TEXT),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(VALID_TEXT, inner, max_size=4),
    max_leaves=12,
)


def valid_send(data: st.DataObject, ids: Callable[[], str]) -> dict[str, Any]:
    """A send any server must take: the hostility is in what it carries, and it is stored."""
    part = st.one_of(
        st.fixed_dictionaries({"text": VALID_TEXT}),
        st.fixed_dictionaries({"data": VALID_JSON}),
        st.fixed_dictionaries(
            {"text": VALID_TEXT, "metadata": st.dictionaries(VALID_TEXT, VALID_JSON, max_size=3)}
        ),
    )
    msg = {
        "messageId": ids(),
        "role": data.draw(st.sampled_from(["user", "ROLE_USER"])),
        "parts": data.draw(st.lists(part, min_size=1, max_size=4)),
        "metadata": data.draw(st.dictionaries(VALID_TEXT, VALID_JSON, max_size=3)),
    }
    if data.draw(st.booleans()):
        msg["taskId"] = ids()  # continue one (or a foreign one: not found)
    return {"message": msg}


def jsonrpc_body(data: st.DataObject, ids: Callable[[], str]) -> Any:
    if data.draw(st.booleans()):
        method = data.draw(st.sampled_from(SEND_METHODS))
        return {
            "jsonrpc": "2.0",
            "id": data.draw(st.integers()),
            "method": method,
            "params": valid_send(data, ids),
        }
    method = data.draw(st.one_of(st.sampled_from(sorted(METHODS)), TEXT, JSON_VALUES))
    request: dict[str, Any] = {"jsonrpc": data.draw(st.sampled_from(["2.0", "1.0", None, 2]))}
    request["method"] = method
    request["id"] = data.draw(st.one_of(st.integers(), TEXT, st.none(), st.floats(), JSON_VALUES))
    request["params"] = params(data, ids)
    for key in data.draw(st.lists(st.sampled_from(["jsonrpc", "id", "params"]), max_size=2)):
        request.pop(key, None)  # a notification, the seeds' informal form, no params
    if data.draw(st.booleans()) and data.draw(st.booleans()):
        return [request] * data.draw(st.integers(min_value=0, max_value=25))
    return request


def strict_json(data: bytes) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in an answer")

    return json.loads(data.decode("utf-8"), parse_constant=refuse)


def no_internal_error(answer: Any) -> None:
    text = json.dumps(answer)
    assert '"code": -32603' not in text and '"INTERNAL"' not in text, text[:2000]


def usable(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


def check_ids(request: Any, answer: Any, status: int) -> None:
    """The answer's id is the request's. An unauthenticated request (401) is refused before its
    body is parsed: its answer echoes the id when a peek at the envelope finds one, else null.
    A body the front door refuses (too deep, too many values, a repeated key) is never parsed
    into a request, as JSON-RPC says: null."""
    if status == 401:
        sent = request.get("id") if isinstance(request, dict) else None
        assert answer.get("id") in (None, sent), (answer, sent)
        return
    try:
        front_door.parse(json.dumps(request).encode())
    except A2AError:
        assert answer.get("id") is None
        return
    if isinstance(request, dict) and isinstance(answer, dict) and "jsonrpc" in answer:
        sent = request.get("id")
        code = answer.get("error", {}).get("code")
        if code in (-32700,) or not usable(sent) or (code == -32600 and "id" not in request):
            assert answer["id"] is None or answer["id"] == sent
        else:
            assert answer["id"] == sent, (request.get("id"), answer)


def first_event(response: httpx.Response) -> list[Any]:
    """The data of the stream's first events (up to the first frame), then the stream closed."""
    buffer, found = "", []
    try:
        for chunk in response.iter_bytes():
            buffer += chunk.decode()
            if "\n\n" in buffer:
                break
    finally:
        response.close()
    for line in buffer.split("\n"):
        if line.startswith("data: "):
            found.append(strict_json(line[6:].encode()))
    return found


def exchange(target: Target, data: st.DataObject) -> None:
    owner = data.draw(st.sampled_from(["alice", "alice", "bob", "alice", "bob", "nobody"]))
    headers = {"Content-Type": "application/json"}
    if owner != "nobody":
        headers["X-API-Key"] = KEYS[owner]
    version = data.draw(st.sampled_from([None, "1.0", "0.3", "9.9"]))
    if version is not None:
        headers["A2A-Version"] = version

    def ids() -> str:
        return target.ids_strategy(data, owner if owner != "nobody" else "alice")

    binding = data.draw(st.sampled_from(["jsonrpc", "jsonrpc", "rest", "raw", "sse"]))
    http = target.client.http
    request: Any = None
    if binding == "jsonrpc":
        request = jsonrpc_body(data, ids)
        response = http.opened("POST", "/", content=json.dumps(request), headers=headers)
    elif binding == "raw":
        body = data.draw(RAW_BODIES)
        route = data.draw(st.sampled_from(["/", "/message:send", "/tasks/x:cancel"]))
        response = http.opened("POST", route, content=body, headers=headers)
    elif binding == "sse":
        task = quote(ids(), safe="", errors="surrogatepass")
        method = data.draw(st.sampled_from(["GET", "HEAD", "POST"]))
        response = http.opened(method, f"/sse?taskId={task}", headers=headers)
    else:
        response = rest_request(target, data, ids, headers)
    check_answer(target, owner, binding, request, response)


def rest_request(
    target: Target, data: st.DataObject, ids: Callable[[], str], headers: dict[str, str]
) -> httpx.Response:
    route = data.draw(st.sampled_from(rest.ROUTES))
    path = route.template
    for name in ("taskId", "id"):
        # functions-framework routes `/{path:path}`, which matches no newline: such a path gets
        # the framework's own 404 before the function runs (its front never sees one).
        segment = ids().replace("\n", " ")
        path = path.replace("{" + name + "}", quote(segment, safe="", errors="surrogatepass"))
    method = data.draw(st.sampled_from([route.method, route.method, "HEAD", "PUT"]))
    query = data.draw(st.sampled_from(["", "?historyLength=-1", "?pageSize=x&pageToken=%00"]))
    if method != "POST":
        body = None
    elif route.operation in ("send", "stream") and data.draw(st.booleans()):
        body = json.dumps(valid_send(data, ids))
    else:
        body = json.dumps(params(data, ids))
    return target.client.http.opened(method, path + query, content=body, headers=headers)


def check_answer(
    target: Target, owner: str, binding: str, request: Any, response: httpx.Response
) -> None:
    status = response.status_code
    assert status < 500, response.read()[:2000]
    if response.headers.get("Content-Type", "").startswith("text/event-stream"):
        answers: list[Any] = first_event(response)
        outcome = "stream"
    else:
        raw = response.read()
        response.close()
        answers = [strict_json(raw)] if raw else []
        outcome = str(status)
        if answers and isinstance(answers[0], dict) and "error" in answers[0]:
            outcome += f" {answers[0]['error'].get('code')}"
    for answer in answers:
        no_internal_error(answer)
        check_ids(request, answer, status)
        remember(target, owner, answer)
    assert target.client.app.streams.slots.held == 0
    target.counts[(binding, outcome)] += 1


def remember(target: Target, owner: str, answer: Any) -> None:
    """Collect the task ids an answer hands out, to address them (or another's) later."""
    if owner == "nobody":
        return
    for value in id_values(answer):
        if len(target.ids[owner]) < 50 and value not in target.ids[owner]:
            target.ids[owner].append(value)


def id_values(value: Any) -> Iterator[str]:
    """Every non-empty string under a "taskId" or "id" key, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("taskId", "id") and isinstance(item, str) and item:
                yield item
            yield from id_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from id_values(item)


def read_back(target: Target) -> int:
    """Every task of both owners reads back in each binding; the number read."""
    count = 0
    for owner, key in KEYS.items():
        client, token = target.client, ""
        headers = {"X-API-Key": key}
        while True:
            listed = client.result(
                "ListTasks", {"pageSize": 100, "pageToken": token}, version="1.0", headers=headers
            )
            for task in listed["tasks"]:
                task_id = task["id"]
                got = client.rpc("GetTask", {"id": task_id}, version="1.0", headers=headers)
                assert got.get("result", {}).get("id") == task_id, got
                old = client.rpc("tasks/get", {"id": task_id}, headers=headers)
                assert old.get("result", {}).get("id") == task_id, old
                if "/" not in task_id and ":" not in task_id:
                    response = client.http.get(
                        f"/tasks/{quote(task_id, safe='')}",
                        headers={**headers, "A2A-Version": "1.0"},
                    )
                    assert response.status_code == 200, response.content[:500]
                    strict_json(response.content)
                count += 1
            token = listed.get("nextPageToken", "")
            if not token:
                break
        assert owner
    return count


def settings_for(backend: str, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "backend": backend,
        "handler": "functions.handlers.sample",
        "auth": "api-key",
        "api_keys": {hashed(key): owner for owner, key in KEYS.items()},
        "push_max_attempts": 1,
        "max_streams": 6,
        "stream_seconds": 2,
        # A stream whose client left ends at its next chunk (shared/bindings/asgi.py): soon.
        "stream_keepalive": 0.02,
        **extra,
    }
    return Settings(**values)


@pytest.fixture
def embedded() -> Iterator[Target]:
    client = Client(build(settings_for("memory"), store=MemoryTaskStore()))
    yield Target(client, "memory", malformed=True)
    client.app.close()


@pytest.fixture
def firestore(clean_firestore: FirestoreEmulator) -> Iterator[Target]:
    client = Client(build(settings_for("firestore", project=clean_firestore.project)))
    yield Target(client, "firestore", malformed=False)
    client.app.close()


PROFILE = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    # The app keeps what each example did: replaying one to shrink it meets another state.
    phases=[Phase.generate],
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)


def fuzz_then_read_back(target: Target) -> None:
    """The examples share one app, as a deployment's users do: state builds up between them."""

    @PROFILE
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        exchange(target, data)

    one()
    read = read_back(target)
    examples = sum(target.counts.values())
    print(f"\n{target.backend}: {examples} requests, then {read} tasks read back")
    for (binding, outcome), count in sorted(target.counts.items()):
        print(f"  {binding:8} {outcome:12} {count}")
    assert read > 0 and examples >= EXAMPLES


def test_hostile_requests_embedded(embedded: Target) -> None:
    fuzz_then_read_back(embedded)


@pytest.mark.emulator
def test_hostile_requests_firestore(firestore: Target) -> None:
    fuzz_then_read_back(firestore)


def malformed_ids(target: Target) -> None:
    """The ids of issue 12's report, each in every place a client chooses one, then every
    task and the first task's push configs read back."""
    alice = {"Content-Type": "application/json", "X-API-Key": KEYS["alice"], "A2A-Version": "1.0"}

    def send(method: str, params: dict[str, Any]) -> Any:
        request = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
        response = target.client.http.post("/", content=json.dumps(request), headers=alice)
        check_answer(target, "alice", "jsonrpc", request, response)
        return response.json()

    def msg(message_id: str, **extra: str) -> dict[str, Any]:
        return {"messageId": message_id, "role": "user", "parts": [{"text": "hi"}], **extra}

    first = send("SendMessage", {"message": msg("first")})["result"]["task"]["id"]
    hook = {"url": "https://example.com/h"}
    for n, bad in enumerate([*MALFORMED_IDS, f"{first}/pushConfigs/x"]):
        send("GetTask", {"id": bad})
        send("tasks/send", {"id": bad, "message": msg(f"m{n}")})
        send("SendMessage", {"message": msg(bad)})
        send("SendMessage", {"message": msg(f"c{n}", contextId=bad)})
        send("SendMessage", {"message": msg(f"t{n}", taskId=bad)})
        send("CreateTaskPushNotificationConfig", {"taskId": first, "id": bad, **hook})
        send("CreateTaskPushNotificationConfig", {"taskId": bad, **hook})
        send("GetTaskPushNotificationConfig", {"taskId": first, "id": bad})
    listed = send("ListTaskPushNotificationConfigs", {"taskId": first})
    assert "result" in listed, listed
    assert read_back(target) > 0


def test_malformed_ids_embedded(embedded: Target) -> None:
    malformed_ids(embedded)


@pytest.mark.emulator
def test_malformed_ids_firestore(firestore: Target) -> None:
    malformed_ids(firestore)
