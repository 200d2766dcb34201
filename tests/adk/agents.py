"""ADK agents for the adapter's tests, offline: custom agents (BaseAgent subclasses), an
LlmAgent over a scripted model (a BaseLlm answering from the conversation it is given), and
one over a paced model (a BaseLlm that awaits between the words it streams, as a model called
over the network does, and calls one tool).

Each scene is chosen by the first user text of the session, so a later turn of the same task
(whose session the adapter rebuilt from the task's history) continues the same scene.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from google.adk.agents import BaseAgent, LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types

from tests.flags import flag

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))


def texts(session_events: list[Event]) -> list[str]:
    """Every text the session holds, oldest first, each as 'author: text'."""
    return [
        f"{e.author}: {p.text}"
        for e in session_events
        if e.content and e.content.parts
        for p in e.content.parts
        if p.text
    ]


def answered(ctx: InvocationContext) -> types.FunctionResponse | None:
    """The function response the session's last event holds, if any."""
    last = ctx.session.events[-1]
    parts = last.content.parts if last.content else None
    return parts[0].function_response if parts else None


# The long-running call of the "ask" and "auth" scenes: ADK's requests for input, credentials.
_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "ask": ("adk_request_input", {"message": "Which color?"}),
    "auth": ("adk_request_credential", {"authConfig": {}}),
}


def describe(part: types.Part) -> str:
    if part.inline_data is not None:
        return f"inline {part.inline_data.mime_type} {len(part.inline_data.data or b'')}"
    if part.file_data is not None:
        return f"file {part.file_data.file_uri}"
    return f"text {part.text}"


def first_user_text(ctx: InvocationContext) -> str:
    for event in ctx.session.events:
        if event.author == "user" and event.content and event.content.parts:
            for part in event.content.parts:
                if part.text:
                    return part.text
    return ""


def _content(*parts: types.Part) -> types.Content:
    return types.Content(role="model", parts=list(parts))


class Scenes(BaseAgent):
    """A custom agent playing the scene the conversation's first text names."""

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        scene = first_user_text(ctx).split()[0] if first_user_text(ctx) else ""
        say = self._say(ctx)
        if scene == "stream":
            for chunk in ("Hel", "lo ", "world"):
                yield Event(
                    author=self.name,
                    invocation_id=ctx.invocation_id,
                    content=_content(types.Part(text=chunk)),
                    partial=True,
                )
            yield say("Hello world")
        elif scene in ("duet", "cut"):
            async for event in self._partials(ctx, scene):
                yield event
        elif scene == "file":
            yield Event(
                author=self.name,
                invocation_id=ctx.invocation_id,
                content=_content(
                    types.Part(
                        inline_data=types.Blob(
                            data=PNG, mime_type="image/png", display_name="chart.png"
                        )
                    ),
                    types.Part(
                        file_data=types.FileData(
                            file_uri="https://example.com/r.pdf", mime_type="application/pdf"
                        )
                    ),
                ),
            )
        elif scene in ("ask", "auth"):
            answer = answered(ctx)
            if answer is None:
                yield self._call(ctx, *_CALLS[scene])
            elif scene == "ask":
                yield say(f"color {json.dumps(answer.response)}; seen {texts(ctx.session.events)}")
            else:
                yield say(f"signed in with {json.dumps(answer.response)}")
        elif scene == "block":
            yield say("working on it")
            flag(ctx.session.id, "blocking").set()
            try:
                await asyncio.Event().wait()  # a model call that never answers
            except asyncio.CancelledError:
                flag(ctx.session.id, "cancelled").set()
                raise
        elif scene == "parts":
            first = next(e for e in ctx.session.events if e.author == "user")
            given = first.content.parts or [] if first.content else []
            yield say("; ".join(describe(p) for p in given))
        elif scene == "steps":  # a long run of small steps, for the worker crash
            count = int(first_user_text(ctx).split()[1])
            for step in range(count):
                await asyncio.sleep(0.1)  # the agent's work, not a wait for the test
                yield say(f"step {step}")
            yield say("done")
        elif scene == "nan":
            response = types.FunctionResponse(
                id="f-1", name="measure", response={"value": math.nan, "odd": {1, 2}}
            )
            yield Event(
                author=self.name,
                invocation_id=ctx.invocation_id,
                content=types.Content(role="user", parts=[types.Part(function_response=response)]),
            )
        elif scene == "big":  # a tool's result and a file, each larger than a replay holds
            response = types.FunctionResponse(
                id="b-1", name="dump", response={"rows": "r" * 300_000}
            )
            blob = types.Blob(data=b"\0" * 300_000, mime_type="application/x-big")
            yield Event(
                author=self.name,
                invocation_id=ctx.invocation_id,
                content=_content(
                    types.Part(function_response=response), types.Part(inline_data=blob)
                ),
            )
        elif scene == "huge":
            yield say("x" * 3_000_000)
        elif scene == "boom":
            raise RuntimeError("the agent broke")
        else:
            yield say(f"seen {texts(ctx.session.events)}")

    async def _partials(self, ctx: InvocationContext, scene: str) -> AsyncGenerator[Event, None]:
        """The scenes of partial text: "duet", two authors' interleaved; "cut", partial text
        followed by a complete event without text."""
        if scene == "duet":  # two authors' partial text, interleaved, then each complete
            for author, chunk in (("alto", "la "), ("bass", "do "), ("alto", "la"), ("bass", "do")):
                yield Event(
                    author=author,
                    invocation_id=ctx.invocation_id,
                    content=_content(types.Part(text=chunk)),
                    partial=True,
                )
            for author, text in (("bass", "do do"), ("alto", "la la")):
                yield Event(author=author, invocation_id=ctx.invocation_id, content=_text(text))
        else:  # partial text, then a complete event without text
            yield Event(
                author=self.name,
                invocation_id=ctx.invocation_id,
                content=_content(types.Part(text="half an")),
                partial=True,
            )
            blob = types.Blob(data=PNG, mime_type="image/png")
            yield Event(
                author=self.name,
                invocation_id=ctx.invocation_id,
                content=_content(types.Part(inline_data=blob)),
            )

    def _call(self, ctx: InvocationContext, name: str, args: dict[str, Any]) -> Event:
        """A long-running call: the run ends waiting for its response."""
        call = types.FunctionCall(id=f"{name}-1", name=name, args=args)
        return Event(
            author=self.name,
            invocation_id=ctx.invocation_id,
            content=_content(types.Part(function_call=call)),
            long_running_tool_ids={call.id},
        )

    def _say(self, ctx: InvocationContext) -> Any:
        def say(text: str) -> Event:
            return Event(
                author=self.name,
                invocation_id=ctx.invocation_id,
                content=_content(types.Part(text=text)),
            )

        return say


class Scripted(BaseLlm):
    """A model answering from the conversation: asks for the weather tool on 'weather', for
    the approval tool on 'order', and streams its answer to a tool's result."""

    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = llm_request.contents
        last = contents[-1].parts[-1] if contents and contents[-1].parts else types.Part(text="")
        if last.function_response is not None:
            result = json.dumps(last.function_response.response, sort_keys=True)
            asked = [p.text for c in contents if c.role == "user" for p in c.parts or [] if p.text]
            answer = f"{last.function_response.name} gave {result} for {asked[0]!r}"
            if stream:
                for word in answer.split(" "):
                    yield LlmResponse(content=_content(types.Part(text=word + " ")), partial=True)
            yield LlmResponse(content=_content(types.Part(text=answer)))
            return
        text = last.text or ""
        if "weather" in text:
            call = types.FunctionCall(name="get_weather", args={"city": "Paris"})
        elif "order" in text:
            call = types.FunctionCall(name="ask_approval", args={"item": "phone"})
        else:
            yield LlmResponse(content=_content(types.Part(text=f"you said {text}")))
            return
        yield LlmResponse(content=_content(types.Part(function_call=call)))


def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    return {"city": city, "sky": "sunny"}


def ask_approval(item: str) -> None:
    """Asks a human to approve ordering `item`: the answer comes later, from the user."""


scenes = Scenes(name="scenes")
assistant = LlmAgent(
    name="assistant",
    model=Scripted(),
    instruction="Help.",
    tools=[get_weather, LongRunningFunctionTool(ask_approval)],
)


# -- the paced model ---------------------------------------------------------------------------


@dataclass
class Pace:
    """How the paced model waits (seconds), set by the tests: `delay` before each word it
    streams, `hold` in the call of a "hold" message, after its first word; and how many of its
    calls are in flight now, and at most (`peak`)."""

    delay: float = 0.01
    hold: float = 60.0
    running: int = 0
    peak: int = 0


PACE = Pace()
_pace_lock = threading.Lock()
LOOKUPS: list[str] = []  # the terms `lookup` was called with, in order


def lookup(term: str) -> dict[str, str]:
    """Looks a term up in the glossary."""
    LOOKUPS.append(term)
    return {"term": term, "entry": term.upper()[::-1]}


def _text(text: str) -> types.Content:
    return _content(types.Part(text=text))


class Paced(BaseLlm):
    """A model answering over time: "look up <term>" calls `lookup`, and its result is the
    answer; "hold <key>" says its first word then awaits PACE.hold (flag(key, "holding") set
    before it, flag(key, "cancelled") when that await is cancelled); anything else answers
    "turn <n>: " and every user text of the conversation, joined by " | ". Each answer is
    streamed a word at a time, PACE.delay apart."""

    model: str = "paced"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        with _pace_lock:
            PACE.running += 1
            PACE.peak = max(PACE.peak, PACE.running)
        try:
            async for response in self._answer(llm_request.contents, stream):
                yield response
        finally:
            with _pace_lock:
                PACE.running -= 1

    async def _answer(
        self, contents: list[types.Content], stream: bool
    ) -> AsyncGenerator[LlmResponse, None]:
        last = contents[-1].parts[-1] if contents and contents[-1].parts else types.Part(text="")
        said = [p.text for c in contents if c.role == "user" for p in c.parts or [] if p.text]
        text = last.text or ""
        if last.function_response is not None:
            result = last.function_response.response or {}
            answer = f"{last.function_response.name} found {result.get('entry')}"
        elif text.startswith("look up "):
            call = types.FunctionCall(name="lookup", args={"term": text.removeprefix("look up ")})
            yield LlmResponse(content=_content(types.Part(function_call=call)))
            return
        elif text.startswith("hold "):
            key = text.removeprefix("hold ")
            yield LlmResponse(content=_text("thinking "), partial=True)
            flag(key, "holding").set()
            try:
                await asyncio.sleep(PACE.hold)  # a model call that takes long
            except asyncio.CancelledError:
                flag(key, "cancelled").set()
                raise
            answer = "thinking done"
        else:
            answer = f"turn {len(said)}: " + " | ".join(said)
        words = answer.split(" ")
        for index, word in enumerate(words):
            await asyncio.sleep(PACE.delay)
            if stream:
                chunk = word if index == len(words) - 1 else word + " "
                yield LlmResponse(content=_text(chunk), partial=True)
        yield LlmResponse(content=_text(answer))


paced = LlmAgent(name="paced", model=Paced(), instruction="Answer.", tools=[lookup])
