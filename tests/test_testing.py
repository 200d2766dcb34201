"""shared.testing: a handler's turn run without a server, as a team's unit test runs it.

Against the sample handlers (functions/handlers/) and handlers made to fail, cancel, reply
and go on after their end: what `ctx` was asked, and the task's end by the runtime's rule.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from functions.handlers import echo, phone_order, sample, structured
from shared.agent import Context, Part, Role, TurnEnded
from shared.limits import LimitExceeded
from shared.model import ArtifactUpdate, StatusUpdate
from shared.testing import FAILED_TEXT, TaskState, run_turn, user_message
from tests.conftest import ROOT


def test_the_echo_sample_answers_with_an_artifact_and_completes() -> None:
    turn = run_turn(echo.handle, "hello")
    assert turn.state is TaskState.COMPLETED
    (artifact,) = turn.artifacts
    assert artifact.name == "echo" and artifact.parts[0].text == "hello"
    assert [type(e) for e in turn.events] == [ArtifactUpdate], "the end is the turn's own"
    assert turn.error is None and turn.reply is None
    # The task holds the user's message, as its history.
    assert [m.role for m in turn.task.history] == [Role.USER]


@given(st.text(min_size=1).filter(str.strip))
def test_echo_gives_back_any_text(text: str) -> None:
    assert run_turn(echo.handle, text).artifacts[0].parts[0].text == text


def test_the_sample_routes_a_joke_and_a_file() -> None:
    assert run_turn(sample.handle, "tell me a joke").artifacts[0].name == "joke"
    report = run_turn(
        sample.handle, [Part(raw="aGVsbG8=", filename="a.txt", media_type="text/plain")]
    )
    assert [s.status.state for s in report.statuses] == [TaskState.WORKING]
    assert report.statuses[0].status.message is not None
    assert report.artifacts[0].parts[0].text == "Received a.txt (text/plain), 5 bytes"
    assert report.state is TaskState.COMPLETED


def test_the_phone_order_asks_then_goes_on_with_the_same_task() -> None:
    first = run_turn(phone_order.handle, "I need a new phone")
    assert first.state is TaskState.INPUT_REQUIRED
    assert first.text == "Select a phone type (iPhone/Android)"

    second = run_turn(phone_order.handle, "Android please", task=first.task)
    assert second.task.id == first.task.id
    assert second.state is TaskState.COMPLETED
    assert "new Android device" in (second.artifacts[0].parts[0].text or "")
    # The question became history, between the two user messages.
    assert [m.role for m in second.task.history] == [Role.USER, Role.AGENT, Role.USER]


def test_ctx_history_ends_with_the_current_message() -> None:
    seen: list[list[str | None]] = []

    def handle(ctx: Context) -> None:
        seen.append([m.parts[0].text for m in ctx.history])
        assert ctx.history[-1] == ctx.message
        ctx.ask("and then?")

    first = run_turn(handle, "one")
    run_turn(handle, "two", task=first.task)
    assert seen == [["one"], ["one", "and then?", "two"]]


def test_structured_output_completes_with_its_json() -> None:
    schema = {"type": "array", "items": {"type": "object", "properties": {"ticketNumber": {}}}}
    part = Part(text="my tickets", metadata={"mimeType": "application/json", "schema": schema})
    turn = run_turn(structured.handle, [part])
    data = [{"ticketNumber": "REQ12312"}, {"ticketNumber": "REQ23422"}]
    assert turn.artifacts[0].parts[0].data == data
    assert turn.state is TaskState.COMPLETED
    assert json.loads(turn.text) == data


def test_a_handler_that_raises_fails_the_task_and_the_test_sees_why() -> None:
    def handle(ctx: Context) -> None:
        ctx.progress("looking")
        raise KeyError("no such thing")

    turn = run_turn(handle, "go")
    assert turn.state is TaskState.FAILED
    assert turn.text == FAILED_TEXT
    assert isinstance(turn.error, KeyError)
    assert [s.status.state for s in turn.statuses] == [TaskState.WORKING]


def test_output_json_cannot_carry_fails_the_task_naming_the_field() -> None:
    def handle(ctx: Context) -> None:
        ctx.artifact(data={"x": math.nan})

    turn = run_turn(handle, "go")
    assert turn.state is TaskState.FAILED
    assert isinstance(turn.error, LimitExceeded)
    assert "cannot be sent as JSON" in turn.text and turn.artifacts == ()


def test_an_artifact_over_the_default_limit_fails_the_task() -> None:
    def handle(ctx: Context) -> None:
        ctx.artifact(text="x" * (4 * 1024 * 1024 + 1))

    turn = run_turn(handle, "go")
    assert turn.state is TaskState.FAILED and isinstance(turn.error, LimitExceeded)


def test_a_reply_completes_the_task_with_that_message() -> None:
    turn = run_turn(lambda ctx: ctx.reply("right away"), "hi")
    assert turn.state is TaskState.COMPLETED
    assert turn.reply is not None and turn.reply.parts[0].text == "right away"
    assert turn.task.status.message == turn.reply
    assert turn.events == ()


def test_acting_after_the_end_is_an_error_the_test_sees() -> None:
    def handle(ctx: Context) -> None:
        ctx.complete("done")
        ctx.artifact(text="late")

    turn = run_turn(handle, "go")
    assert turn.state is TaskState.COMPLETED and turn.text == "done"
    assert isinstance(turn.error, TurnEnded)
    assert turn.artifacts == ()


def test_an_async_handler_is_awaited() -> None:
    async def handle(ctx: Context) -> None:
        ctx.progress("thinking")
        await asyncio.sleep(0)
        ctx.artifact(text=ctx.text.upper())

    turn = run_turn(handle, "shout")
    assert turn.state is TaskState.COMPLETED
    assert turn.artifacts[0].parts[0].text == "SHOUT"
    assert [type(e) for e in turn.events] == [StatusUpdate, ArtifactUpdate]


def test_a_sync_handler_sees_the_cancel_and_its_next_call_stops_it() -> None:
    def handle(ctx: Context) -> None:
        for step in range(10):
            if ctx.canceled:
                return
            ctx.progress(f"step {step}")

    turn = run_turn(handle, "count", cancel_after=3)
    assert turn.state is TaskState.CANCELED
    assert [s.status.message.parts[0].text for s in turn.statuses if s.status.message] == [
        "step 0",
        "step 1",
        "step 2",
    ]

    def blind(ctx: Context) -> None:
        for step in range(10):
            ctx.progress(f"step {step}")

    stopped = run_turn(blind, "x", cancel_after=2)
    assert stopped.state is TaskState.CANCELED and len(stopped.events) == 2
    assert run_turn(echo.handle, "x", cancel_after=0).events == ()


@pytest.mark.timeout(10)
def test_an_async_handler_is_cancelled_at_its_pending_await() -> None:
    reached: list[str] = []

    async def handle(ctx: Context) -> None:
        ctx.progress("waiting for a reply that never comes")
        reached.append("await")
        await asyncio.Event().wait()  # only a cancel ends it
        reached.append("after")

    turn = run_turn(handle, "go", cancel_after=1)
    assert turn.state is TaskState.CANCELED
    assert reached == ["await"]


def test_an_async_handler_inside_a_running_loop_is_a_clear_error() -> None:
    async def handle(ctx: Context) -> None:
        ctx.complete("never")

    async def inside() -> None:
        run_turn(handle, "go")

    with pytest.raises(RuntimeError, match=r"plain .* test"):
        asyncio.run(inside())


def test_context_history_reads_the_given_earlier_tasks() -> None:
    earlier = run_turn(echo.handle, "first question")
    seen: list[str | None] = []

    def handle(ctx: Context) -> None:
        seen.extend(m.parts[0].text for m in ctx.context_history())

    turn = run_turn(handle, user_message("next"), context=[earlier.task])
    assert turn.task.context_id == earlier.task.context_id
    assert seen == ["first question"]


def block(page: Path, first_line: str) -> str:
    """The fenced code block of `page` whose first line is `first_line`."""
    text = page.read_text()
    start = text.index(f"```python\n{first_line}") + len("```python\n")
    return text[start : text.index("```", start)]


def test_the_documented_unit_tests_pass_against_the_readme_agent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/agents.md's example tests, run against README's weather agent as `my_agent`."""
    agent = types.ModuleType("my_agent")
    exec(block(ROOT / "README.md", "# functions/handlers/weather.py"), agent.__dict__)
    monkeypatch.setitem(sys.modules, "my_agent", agent)
    tests: dict[str, Any] = {}
    exec(block(ROOT / "docs" / "agents.md", "# ~/agents/my_agent/tests/test_agent.py"), tests)
    ran = [name for name in tests if name.startswith("test_")]
    assert ran == ["test_it_forecasts", "test_it_asks_for_the_city_then_goes_on"]
    for name in ran:
        tests[name]()
