"""An ADK LlmAgent over a model that takes its time (tests/adk/agents.py's `Paced`: it awaits
between the words it streams and calls one tool), served as a handler module
(tests/adk/llm.py) through the functions' front: a conversation over two turns, a tool call,
a cancel while the model's call is pending, and 200 turns at once on one instance."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from shared.agent import Context
from shared.model import Event, Message, Part, Role, new_id
from tests.adk import agents
from tests.adk.llm import handle
from tests.adk.test_adk import (
    V1,
    artifact_parts,
    cancel_once,
    chunks,
    in_background,
    send,
    state,
    stream,
)
from tests.conftest import Client
from tests.flags import flag

LLM = "tests.adk.llm"


@pytest.fixture
def pace() -> Iterator[agents.Pace]:
    """The model's pace, as each test sets it, and its count of calls in flight."""
    before = agents.Pace(**vars(agents.PACE))
    agents.PACE.peak = 0
    yield agents.PACE
    for name, value in vars(before).items():
        setattr(agents.PACE, name, value)


@pytest.fixture
def llm(make_client: Callable[..., Client], schema_checked: None, pace: agents.Pace) -> Client:
    return make_client(handler=LLM)


def answer(task: dict[str, Any]) -> str:
    """The text of the task's answer (the artifact the model's text streamed into)."""
    [text] = [p["text"] for parts in artifact_parts(task) for p in parts if "text" in p]
    return str(text)


def test_the_second_turn_sees_the_first(llm: Client) -> None:
    first = send(llm, {"text": "remember 42"})
    assert state(first) == "TASK_STATE_COMPLETED"
    assert answer(first) == "turn 1: remember 42"
    second = send(llm, {"text": "what did I say?"}, context_id=first["contextId"])
    assert answer(second) == "turn 2: remember 42 | what did I say?"


def test_the_answer_streams_a_chunk_a_word_and_is_stored_whole(llm: Client) -> None:
    frames = stream(llm, {"text": "one two three"})
    said = "turn 1: one two three"
    streamed = chunks(frames)
    assert [text for _, text, *_ in streamed] == [
        *(w + " " for w in said.split()[:-1]),
        "three",
        said,
    ]
    assert streamed[-1][2:] == (False, True)  # the whole answer, as the last chunk
    assert frames[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    task = llm.result("GetTask", {"id": frames[0]["task"]["id"]}, version=V1)
    assert artifact_parts(task) == [[{"text": said}]]


def test_a_tool_call_runs_the_function_and_its_result_reaches_the_model(llm: Client) -> None:
    term = f"word-{uuid.uuid4().hex[:8]}"
    task = send(llm, {"text": f"look up {term}"})
    assert state(task) == "TASK_STATE_COMPLETED"
    assert agents.LOOKUPS.count(term) == 1  # the function ran, once
    entry = term.upper()[::-1]
    [[result], [text]] = artifact_parts(task)
    assert result == {"data": {"term": term, "entry": entry}}
    # The model answered from the function's result: only the function made that entry.
    assert text == {"text": f"lookup found {entry}"}
    # The call and its result are the turn's steps, replayed by the next turn.
    steps = [p for m in task["history"] if m["role"] == "ROLE_AGENT" for p in m["parts"]]
    kinds = [(p.get("metadata") or {}).get("adk_type") for p in steps]
    assert kinds[:2] == ["function_call", "function_response"]


def test_a_cancel_cancels_the_models_pending_call(llm: Client, pace: agents.Pace) -> None:
    key = uuid.uuid4().hex
    pace.hold = 60.0  # far past the test's bound: only the cancel ends it in time
    task_id = in_background(llm, f"hold {key}")
    # The await inside the model's call sees CancelledError: the call stops, not just its
    # result ignored.
    cancel_once(llm, task_id, flag(key, "holding"), flag(key, "cancelled"))


class _Sink:
    """A turn's sink that keeps what the handler emits, and is never canceled."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def reply(self, message: Message) -> None:
        raise AssertionError("the agent replied without a task")

    def canceled(self) -> bool:
        return False

    def artifact_id(self) -> str:
        return new_id()


def test_a_handler_cancelled_by_its_engine_cancels_the_models_pending_call(
    pace: agents.Pace,
) -> None:
    """An engine that cancels the handler's coroutine (a cancel reaching the turn's await)
    cancels the model's call with it, not only the handler: no model call runs on, orphaned."""
    key = uuid.uuid4().hex
    asked = Message(message_id="m", role=Role.USER, parts=(Part(text=f"hold {key}"),))
    ctx = Context(
        task_id="t", context_id="c", message=asked, history=(asked,), artifacts=(), _sink=_Sink()
    )

    async def turn() -> None:
        running = asyncio.ensure_future(handle(ctx))
        assert await asyncio.to_thread(flag(key, "holding").wait, 20), "the model was not called"
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        # Now, while the loop runs on (asyncio.run cancels what is left only as it ends).
        assert flag(key, "cancelled").is_set(), "the model's call ran on"

    asyncio.run(turn())


def test_200_turns_at_once_on_one_instance(llm: Client, pace: agents.Pace) -> None:
    pace.delay = 0.02  # 4 words: ~0.1 s a turn in the model

    def turn(index: int) -> str:
        return answer(send(llm, {"text": f"hello {index}"}))

    with ThreadPoolExecutor(max_workers=200) as clients:
        answers = list(clients.map(turn, range(200)))
    assert answers == [f"turn 1: hello {index}" for index in range(200)]
    assert pace.running == 0
    # More model calls at once than the front has threads: a turn that awaits holds none.
    threads = llm.app.settings.threads
    assert pace.peak > threads, f"{pace.peak} model calls at once, no more than {threads} threads"
    print(f"model calls in flight at once: {pace.peak}")
