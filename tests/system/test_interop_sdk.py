"""Interop: the official Python SDK (a2a-sdk 1.3) talks to a running `a2a` function.

It is a real, independent client over real HTTP: once as an A2A 1.0 client (what it picks
from our card), once as a 0.3 client (its compat transport, which a 0.3-only card selects),
once over 1.0's HTTP+JSON binding (its REST transport), once over 0.3's (its compat REST
transport, the card's HTTP+JSON 0.3 interface), blocking and streaming, and push config CRUD.
"""

from __future__ import annotations

import asyncio
import functools
import json
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)

from shared.bindings import rest, rest_v0_3
from shared.identity.api_key import hashed
from tests.conftest import Server
from tests.identity.issuer import serve

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def message(text: str, task_id: str | None = None, context_id: str | None = None) -> Message:
    msg = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
    if task_id:
        msg.task_id = task_id
    if context_id:
        msg.context_id = context_id
    return msg


# What the client may call: JSON-RPC methods, or (REST) the operations its paths route to.
REST = "HTTP+JSON"
REST_0_3 = "HTTP+JSON 0.3"
PUSH = {
    "1.0": (
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ),
    "0.3": (
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
    ),
    REST: ("push_set", "push_get", "push_list", "push_delete"),
}
PUSH[REST_0_3] = PUSH[REST]
METHODS = {
    "1.0": ("SendMessage", "GetTask", "CancelTask", "SendStreamingMessage", "SubscribeToTask"),
    "0.3": ("message/send", "tasks/get", "tasks/cancel", "message/stream", "tasks/resubscribe"),
    REST: ("send", "get", "cancel", "stream", "subscribe"),
}
METHODS[REST_0_3] = METHODS[REST]
VERSIONS = ["1.0", "0.3", REST, REST_0_3]


def only_0_3(card: Any) -> None:
    """The SDK speaks 0.3 only to a card that offers no 1.0 interface."""
    keep = [i for i in card.supported_interfaces if i.protocol_version.startswith("0.")]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(keep)


@asynccontextmanager
async def sdk_client(url: str, version: str, *, streaming: bool = False) -> AsyncIterator[Any]:
    sent: list[str] = []

    async def record(request: httpx.Request) -> None:
        path = request.url.path
        if version in (REST, REST_0_3) and not path.startswith("/.well-known/"):
            found = (rest_v0_3 if version == REST_0_3 else rest).match(request.method, path)
            sent.append(found[0].operation if found else f"{request.method} {path}")
        elif request.method == "POST":
            sent.append(json.loads(request.content)["method"])

    async with httpx.AsyncClient(timeout=30, event_hooks={"request": [record]}) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        if version in ("0.3", REST_0_3):
            only_0_3(card)
        bindings = [REST] if version in (REST, REST_0_3) else ["JSONRPC"]
        config = ClientConfig(
            streaming=streaming, httpx_client=http, supported_protocol_bindings=bindings
        )
        client = ClientFactory(config).create(card)
        try:
            yield client
        finally:
            await client.close()
    # The client really spoke the version under test.
    assert sent and set(sent) <= {*METHODS[version], *PUSH[version]}, sent


async def send(client: Any, msg: Message) -> Any:
    results = [event async for event in client.send_message(SendMessageRequest(message=msg))]
    assert len(results) == 1
    return results[0]


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


def test_card_is_understood(server: Server) -> None:
    async def check() -> Any:
        async with httpx.AsyncClient() as http:
            return await A2ACardResolver(http, server.url).get_agent_card()

    card = run(check())
    assert card.name == "a2a-functions sample agent"
    assert [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        ("JSONRPC", "1.0"),
        ("JSONRPC", "0.3"),
        ("HTTP+JSON", "1.0"),
        ("HTTP+JSON", "0.3"),
    ]
    assert {i.url for i in card.supported_interfaces} == {f"{server.url}/"}
    assert card.supported_interfaces[0].url == f"{server.url}/"
    assert {s.id for s in card.skills} >= {"echo", "phone-order"}


def test_send_get_and_multi_turn(server: Server, version: str) -> None:
    async def scenario() -> None:
        async with sdk_client(server.url, version) as client:
            first = await send(client, message("I would like a new phone"))
            task = first.task
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert task.status.message.parts[0].text == "Select a phone type (iPhone/Android)"
            second = await send(client, message("Android", task.id, task.context_id))
            done = second.task
            assert done.id == task.id
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            assert "Android" in done.artifacts[0].parts[0].text
            got = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
            assert got.status.state == TaskState.TASK_STATE_COMPLETED
            assert len(got.history) == 1
            assert got.history[0].parts[0].text == "Android"

    run(scenario())


def test_cancel_and_errors(server: Server, version: str) -> None:
    from a2a.client.errors import A2AClientError
    from a2a.utils.errors import MethodNotFoundError, TaskNotCancelableError, TaskNotFoundError

    # The compat 0.3 REST transport types errors by a `type` member v0.3 never defined: it
    # raises by the HTTP status (404: not found) instead.
    refusals = {REST_0_3: (A2AClientError, MethodNotFoundError)}
    not_cancelable, not_found = refusals.get(version, (TaskNotCancelableError, TaskNotFoundError))

    async def scenario() -> None:
        async with sdk_client(server.url, version) as client:
            waiting = (await send(client, message("new phone"))).task
            canceled = await client.cancel_task(CancelTaskRequest(id=waiting.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            with pytest.raises(not_cancelable, match=r"400|cancel"):
                await client.cancel_task(CancelTaskRequest(id=waiting.id))
            with pytest.raises(not_found):
                await client.get_task(GetTaskRequest(id="no-such-task"))

    run(scenario())


def test_echo_round_trip(server: Server, version: str) -> None:
    async def scenario() -> None:
        async with sdk_client(server.url, version) as client:
            result = await send(client, message("héllo, wörld"))
            task = result.task
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert task.artifacts[0].parts[0].text == "héllo, wörld"
            assert task.history[0].role == Role.ROLE_USER

    run(scenario())


def test_streaming_send_and_subscribe(server: Server, version: str) -> None:
    async def scenario() -> None:
        async with sdk_client(server.url, version, streaming=True) as client:
            request = SendMessageRequest(message=message("I would like a new phone"))
            events = [e async for e in client.send_message(request)]
            kinds = [e.WhichOneof("payload") for e in events]
            assert kinds == ["task", "status_update"]
            task = events[0].task
            assert events[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

            # A subscriber opens with the task, then sees the next turn to its end.
            updates = client.subscribe(SubscribeToTaskRequest(id=task.id))
            opening = await anext(updates)
            assert opening.task.id == task.id
            answer = message("Android", task.id, task.context_id)
            async with sdk_client(server.url, version) as other:
                await send(other, answer)
            rest = [e async for e in updates]
            assert [e.WhichOneof("payload") for e in rest] == [
                "status_update",
                "artifact_update",
                "status_update",
            ]
            assert "Android" in rest[1].artifact_update.artifact.parts[0].text
            assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED

    run(scenario())


@pytest.fixture(scope="module")
def push_server() -> Iterator[Server]:
    """A server whose webhooks may be at hooks.example.com (never called: tasks wait)."""
    started = Server(
        {"A2A_HANDLER": "functions.handlers.sample", "A2A_PUSH_ALLOWED_HOSTS": "hooks.example.com"}
    )
    yield started
    started.stop()


def test_push_config_crud(push_server: Server, version: str) -> None:
    from a2a.types import (
        DeleteTaskPushNotificationConfigRequest,
        GetTaskPushNotificationConfigRequest,
        ListTaskPushNotificationConfigsRequest,
        TaskPushNotificationConfig,
    )

    hook = "https://hooks.example.com/a2a"

    async def scenario() -> None:
        async with sdk_client(push_server.url, version) as client:
            task = (await send(client, message("new phone"))).task
            for config_id in ("one", "two"):
                config = TaskPushNotificationConfig(task_id=task.id, id=config_id, url=hook)
                created = await client.create_task_push_notification_config(config)
                assert (created.task_id, created.id, created.url) == (task.id, config_id, hook)
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="one")
            )
            assert (got.id, got.url) == ("one", hook)
            if version == REST_0_3:
                return  # its compat REST transport has no list or delete (NotImplementedError)
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            assert sorted(c.id for c in listed.configs) == ["one", "two"]
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="two")
            )
            left = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            assert [c.id for c in left.configs] == ["one"]

    run(scenario())


# Each identity mode with the SDK's own credential handling: its AuthInterceptor reads the
# card's security requirement and scheme and puts the credential where the scheme says.
@pytest.fixture(params=["api-key", "oidc"])
def guarded(request: pytest.FixtureRequest, start_server: Any) -> Iterator[tuple[Server, Any]]:
    if request.param == "api-key":
        keys = {owner: f"{owner}-key-" + "k" * 32 for owner in ("alice", "bob")}
        entries = ",".join(f"{owner}:{hashed(key)}" for owner, key in keys.items())
        yield start_server(A2A_AUTH="api-key", A2A_API_KEYS=entries), lambda sub: keys[sub]
        return
    for issuer in serve():
        server = start_server(
            A2A_AUTH="oidc", A2A_OIDC_ISSUER=issuer.url, A2A_OIDC_AUDIENCE="agent"
        )
        yield server, functools.partial(issuer.token, aud="agent")


def test_each_caller_authenticates_with_the_cards_scheme(
    guarded: tuple[Server, Any], version: str
) -> None:
    from a2a.client.auth import AuthInterceptor, InMemoryContextCredentialStore
    from a2a.client.client import ClientCallContext
    from a2a.utils.errors import MethodNotFoundError, TaskNotFoundError

    server, credential = guarded

    async def scenario() -> None:
        store = InMemoryContextCredentialStore()
        async with httpx.AsyncClient(timeout=30) as http:
            card = await A2ACardResolver(http, server.url).get_agent_card()
            (requirement,) = card.security_requirements
            (scheme,) = requirement.schemes
            for owner in ("alice", "bob"):
                await store.set_credentials(owner, scheme, credential(sub=owner))
            bindings = [REST] if version in (REST, REST_0_3) else ["JSONRPC"]
            if version in ("0.3", REST_0_3):
                only_0_3(card)
            config = ClientConfig(
                streaming=False, httpx_client=http, supported_protocol_bindings=bindings
            )
            client = ClientFactory(config).create(card, [AuthInterceptor(store)])
            alice = ClientCallContext(state={"sessionId": "alice"})
            bob = ClientCallContext(state={"sessionId": "bob"})
            request = SendMessageRequest(message=message("héllo"))
            (sent,) = [e async for e in client.send_message(request, context=alice)]
            task = await client.get_task(GetTaskRequest(id=sent.task.id), context=alice)
            assert task.artifacts[0].parts[0].text == "héllo"
            # Another owner's task does not exist (the compat 0.3 REST client types a 404 so).
            not_found = MethodNotFoundError if version == REST_0_3 else TaskNotFoundError
            with pytest.raises(not_found):
                await client.get_task(GetTaskRequest(id=sent.task.id), context=bob)
            with pytest.raises(Exception, match=r"401|[Aa]uthentication"):  # no credentials
                await client.get_task(GetTaskRequest(id=sent.task.id))
            await client.close()

    run(scenario())
