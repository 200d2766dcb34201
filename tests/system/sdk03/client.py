"""An a2a-sdk 0.3.x client, as a user of that release writes one, driving a running server.

Runs in its own venv (tests/system/test_interop_sdk03.py makes it): `python client.py <card
url> <JSONRPC|HTTP+JSON> <webhook url>`, or `python client.py extended <card url>
<JSONRPC|HTTP+JSON> <API key>` to read the authenticated extended card. Prints one JSON line
per step; the test reads them.
Not collected by pytest, not checked by mypy (it imports the 0.3 SDK, not the project's).
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.client.middleware import ClientCallContext
from a2a.types import (
    GetTaskPushNotificationConfigParams,
    Message,
    Part,
    PushNotificationConfig,
    Role,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TextPart,
)


def say(step: str, **fields: Any) -> None:
    print(json.dumps({"step": step, **fields}), flush=True)


def message(text: str, task: Any = None) -> Message:
    return Message(
        role=Role.user,
        message_id=str(uuid.uuid4()),
        parts=[Part(root=TextPart(text=text))],
        task_id=task.id if task else None,
        context_id=task.context_id if task else None,
    )


def failure(error: Exception) -> dict[str, Any]:
    """How the client reports a refusal: an HTTP status (REST) or a JSON-RPC code."""
    if isinstance(error, A2AClientHTTPError):
        return {"status": error.status_code}
    if isinstance(error, A2AClientJSONRPCError):
        return {"code": error.error.code}
    raise error


def event(pair: Any) -> dict[str, Any]:
    """A (task, update) pair as a line: the update's kind, and the state it (or the opening
    task) carries."""
    task, update = pair
    if update is None:
        return {"kind": "task", "state": task.status.state.value, "id": task.id}
    state = update.status.state.value if update.kind == "status-update" else None
    return {"kind": update.kind, "state": state, "id": update.task_id}


async def main(url: str, transport: str, hook: str) -> None:
    sent: list[str] = []

    async def record(request: httpx.Request) -> None:
        if request.url.path.endswith("agent-card.json"):
            return
        if request.method == "POST" and "/v1/" not in request.url.path:
            sent.append(json.loads(request.content)["method"])
        else:
            sent.append(f"{request.method} {request.url.path}")

    async with httpx.AsyncClient(timeout=30, event_hooks={"request": [record]}) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        say(
            "card",
            name=card.name,
            preferred=card.preferred_transport,
            interfaces=[[i.transport, i.url] for i in card.additional_interfaces or []],
        )

        def client(streaming: bool) -> Any:
            config = ClientConfig(
                streaming=streaming,
                httpx_client=http,
                supported_transports=[transport],
                use_client_preference=True,
            )
            return ClientFactory(config).create(card)

        blocking, streaming = client(False), client(True)

        (done,) = [e async for e in blocking.send_message(message("héllo"))]
        task = done[0]
        say("send", state=task.status.state.value, text=task.artifacts[0].parts[0].root.text)

        (asked,) = [e async for e in blocking.send_message(message("I would like a new phone"))]
        waiting = asked[0]
        got = await blocking.get_task(TaskQueryParams(id=waiting.id, history_length=1))
        say("get", state=got.status.state.value, history=len(got.history or []))

        canceled = await blocking.cancel_task(TaskIdParams(id=waiting.id))
        say("cancel", state=canceled.status.state.value)
        for step, call in (
            ("cancel-again", blocking.cancel_task(TaskIdParams(id=waiting.id))),
            ("get-unknown", blocking.get_task(TaskQueryParams(id="no-such-task"))),
        ):
            try:
                await call
                say(step, refused=False)
            except Exception as error:  # the line says what the client raised
                say(step, **failure(error))

        # Each event as it arrives (the client updates its one task object in place).
        opening = streaming.send_message(message("I would like a new phone"))
        events = [(e[0], event(e)) async for e in opening]
        say("stream", events=[line for _, line in events])
        phone = events[0][0]

        config = TaskPushNotificationConfig(
            task_id=phone.id,
            push_notification_config=PushNotificationConfig(id="cfg", url=hook, token="tok"),
        )
        created = await blocking.set_task_callback(config)
        read = await blocking.get_task_callback(
            GetTaskPushNotificationConfigParams(id=phone.id, push_notification_config_id="cfg")
        )
        say(
            "push",
            created=[created.task_id, created.push_notification_config.id],
            read=[read.task_id, read.push_notification_config.url],
        )

        updates = streaming.resubscribe(TaskIdParams(id=phone.id))
        first = event(await anext(updates))
        (answered,) = [e async for e in blocking.send_message(message("Android", phone))]
        rest = [event(e) async for e in updates]
        say("resubscribe", events=[first, *rest], answered=answered[0].status.state.value)
    say("sent", requests=sent)


async def extended(url: str, transport: str, key: str) -> None:
    """The public card, then the extended one through the client (REST: GET /v1/card;
    JSON-RPC: agent/getAuthenticatedExtendedCard), with the API key on that call."""
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        config = ClientConfig(
            streaming=False,
            httpx_client=http,
            supported_transports=[transport],
            use_client_preference=True,
        )
        client = ClientFactory(config).create(card)
        signed_in = ClientCallContext(state={"http_kwargs": {"headers": {"X-API-Key": key}}})
        full = await client.get_card(context=signed_in)
        say("extended", public=[s.id for s in card.skills], full=[s.id for s in full.skills])


if __name__ == "__main__":
    if sys.argv[1] == "extended":
        asyncio.run(extended(*sys.argv[2:5]))
    else:
        asyncio.run(main(*sys.argv[1:4]))
