"""The reference peer of `make bench`: the official SDK's server (a2a-sdk 1.3) with an echo agent.

Built as the SDK documents it: its default request handler, its in-memory task store, its
JSON-RPC and agent card routes in a Starlette app, served by uvicorn. The agent does what
`functions.handlers.echo` does: one artifact holding the message's text, then completed.
The cost section gives it its own store and `StepsExecutor` (tests/bench/usage.py); the agents
section (tests/bench/agents.py) `--wait SECONDS`: `WaitingExecutor`, a turn that awaits a model
call as tests.handlers.awaits_model's does.

Run: `python -m tests.bench.reference --port PORT [--wait SECONDS]`.
"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn
from a2a.helpers.proto_helpers import (
    get_message_text,
    new_task_from_user_message,
    new_text_message,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    TaskState,
)
from starlette.applications import Starlette


class EchoExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([Part(text=get_message_text(context.message))], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("the echo agent finishes before a cancel could arrive")


class StepsExecutor(AgentExecutor):
    """What `tests.handlers.slow` does: "steps=N delay=S" working updates, each with a
    message, S seconds apart, then an artifact and completed."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        values = dict(
            w.split("=", 1) for w in get_message_text(context.message).split() if "=" in w
        )
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        for step in range(int(values.get("steps", 20))):
            message = new_text_message(f"step {step}", task_id=task.id, context_id=task.context_id)
            await updater.update_status(TaskState.TASK_STATE_WORKING, message)
            await asyncio.sleep(float(values.get("delay", 0.05)))
        await updater.add_artifact([Part(text="done")], name="done")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("not asked of it")


class WaitingExecutor(AgentExecutor):
    """What `tests.handlers.awaits_model` does: await `seconds` (a model call), then one
    artifact holding the message's text, then completed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        await asyncio.sleep(self.seconds)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = f"answered: {get_message_text(context.message)}"
        await updater.add_artifact([Part(text=text)], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("not asked of it")


def app(
    url: str, store: TaskStore | None = None, executor: AgentExecutor | None = None
) -> Starlette:
    card = AgentCard(
        name="Echo agent",
        description="Answers with what it was sent.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="echo", name="Echo", description="Repeats the message.", tags=["echo"])
        ],
    )
    handler = DefaultRequestHandler(
        agent_executor=executor or EchoExecutor(),
        task_store=store or InMemoryTaskStore(),
        agent_card=card,
    )
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/")
    return Starlette(routes=routes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--wait", type=float, help="the agent awaits this long, then answers")
    args = parser.parse_args()
    executor = None if args.wait is None else WaitingExecutor(args.wait)
    served = app(f"http://localhost:{args.port}/", executor=executor)
    uvicorn.run(served, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
