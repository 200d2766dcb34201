"""Serve a Google ADK agent (`google-adk`, the `adk` extra) as a handler module's handler.

    from google.adk.agents import LlmAgent
    from shared.adk import adk_handler

    root_agent = LlmAgent(name="assistant", model="gemini-2.5-flash", instruction="...")
    handle = adk_handler(root_agent)
    LONG_RUNNING = True  # optional: every turn runs on the worker

Each turn runs the agent once, in a Runner over a fresh in-memory ADK session that this module
rebuilds from the conversation of the task's context (`Context.context_history()`: the
caller's other tasks with the same contextId, bounded) followed by the task's own history, so
any instance serves any turn (nothing of ADK's is kept between requests), and a new task in a
context continues its conversation as in ADK's own A2A serving, whose session is the context.
The mapping, both ways, uses ADK's own A2A part conventions (metadata
`adk_type`: `function_call`, `function_response`, ...), so ADK's RemoteA2aAgent is a client:

- the A2A message becomes the user content: text parts as text, data parts as JSON text (or,
  with `adk_type: function_response`, as the function response they carry), raw parts as
  inline data, URL parts as file data;
- partial text (RunConfig's SSE streaming) streams as chunks of an artifact, one per author's
  response, named after the author, as ADK's own A2A executor maps it: its first chunk makes
  the artifact, the others are appended (`append`), and the complete response that follows
  replaces it whole as its last chunk (`append: false`, `lastChunk: true`), which is the
  response an ADK RemoteA2aAgent records; the stored artifact is one text part (appended text
  joins, `lifecycle.joins`);
- each complete (not partial) ADK event is a `working` status message (text, function calls
  and responses as data parts, files): the steps and tool calls a client shows as progress,
  and the task's history that the next turn rebuilds the session from;
- what the agent produced is also an artifact: the text of each final response (the streamed
  artifact, when its text streamed), each function result (a data part), each file;
- a long-running function call left without a response when the run ends (ADK's way to ask
  the user: a LongRunningFunctionTool returning None, `adk_request_input`,
  `adk_request_confirmation`) ends the turn `input-required` (`auth-required` for
  `adk_request_credential`), the calls as data parts. The
  next message answers them: its function response parts, or else its data part (an object)
  or its text become the response of every pending call;
- a cancel of the task cancels the run: the model call it awaits sees CancelledError (the
  engine cancels a turn's pending await).

What the rebuild cannot restore: ADK session state (`state_delta`s), artifacts saved through
ADK's artifact service, and other event actions (a transfer is kept only as the author of the
events that follow it). An agent that needs its state across turns keeps it in the messages.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from google.adk.agents import BaseAgent

# run_config re-exports StreamingMode (defined in a private module) without listing it.
from google.adk.agents.run_config import RunConfig, StreamingMode  # type: ignore[attr-defined]
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from pydantic import ValidationError

from shared.agent import Context, Message, Part
from shared.limits import json_bytes
from shared.model import Role

__all__ = ["adk_handler"]

# Seconds between two looks at the task's cancel while the agent runs (the runtime reads the
# store at most every half second anyway).
# What an event's status message holds of one part, at most (characters of a text, bytes of a
# function call's or response's JSON, bytes of a file): the message must fit
# A2A_MAX_MESSAGE_BYTES. More is replayed cut or described (marked `adk_truncated`); the
# artifacts carry it whole (a text in chunks of ARTIFACT_CHUNK characters).
REPLAY_TEXT = 100_000
ARTIFACT_CHUNK = 200_000

# Part metadata keys: ADK's own (google.adk.a2a.converters.part_converter) and ours.
TYPE = "adk_type"
LONG_RUNNING = "adk_is_long_running"
AUTHOR = "adk_author"
# Partial text in a status message, as histories written before partial text streamed as an
# artifact hold it (repeated whole in the event that followed): not replayed.
PARTIAL = "adk_partial"
TRUNCATED = "adk_truncated"
# The question that ends a turn `input-required`: repeats the calls already replayed.
QUESTION = "adk_question"
FUNCTION_CALL = "function_call"
FUNCTION_RESPONSE = "function_response"
# Any other genai part (code execution, ...), as its JSON form.
GENAI_PART = "genai_part"
# ADK's long-running call asking the user for credentials (an AuthConfig in, one back).
REQUEST_CREDENTIAL = "adk_request_credential"

# The session's user: a session lives for one turn of one task, so it needs no real name.
_USER = "a2a"


class UnusableMessage(ValueError):
    """The message cannot be given to the agent; the text says why and what to send."""


def adk_handler(
    agent: BaseAgent, *, app_name: str | None = None, streaming: bool = True
) -> Callable[[Context], Awaitable[None]]:
    """A handler (`handle = adk_handler(root_agent)`) running `agent` for each turn.

    `streaming` asks the model for partial responses (RunConfig's SSE mode), each streamed as
    a chunk of the answer's artifact; `app_name` names the ADK app (default: the agent's name)."""
    mode = StreamingMode.SSE if streaming else StreamingMode.NONE
    run_config = RunConfig(streaming_mode=mode)
    app = app_name or agent.name

    async def handle(ctx: Context) -> None:
        await _AdkTurn(ctx, agent, app, run_config).run()

    return handle


class _AdkTurn:
    """One turn: rebuild the session, run the agent, report its events."""

    def __init__(self, ctx: Context, agent: BaseAgent, app: str, run_config: RunConfig) -> None:
        self.ctx = ctx
        self.agent = agent
        self.app = app
        self.run_config = run_config
        # Long-running calls waiting for their response, by call id.
        self.pending: dict[str, types.FunctionCall] = {}
        # The artifact each author's partial text streams into, until its complete response.
        self.streaming: dict[str, str] = {}

    async def run(self) -> None:
        ctx = self.ctx
        earlier = [m for m in ctx.history if m.message_id != ctx.message.message_id]
        # The context's other tasks first, as ADK's own serving keeps one session per context;
        # their unanswered calls stay theirs (this task's message answers none of them).
        before = _from_user_turn(await asyncio.to_thread(ctx.context_history))
        events = rebuild(before, self.agent.name, {})
        events += rebuild(earlier, self.agent.name, self.pending)
        try:
            content = user_content(ctx.message, self.pending)
        except UnusableMessage as exc:
            if self.pending:  # the question still stands: ask it again, saying what was wrong
                self._ask(str(exc))
            else:
                ctx.reject(str(exc))
            return
        for call_id in _answered(content):
            self.pending.pop(call_id, None)
        sessions = InMemorySessionService()
        session = await sessions.create_session(
            app_name=self.app, user_id=_USER, session_id=ctx.task_id
        )
        for event in events:
            await sessions.append_event(session, event)
        runner = Runner(app_name=self.app, agent=self.agent, session_service=sessions)
        # A cancel of the task cancels this very await (shared.engine): the model call it
        # waits on sees CancelledError.
        await self._consume(runner, content)
        if self.pending:
            self._ask()

    def _ask(self, problem: str = "") -> None:
        """End the turn waiting for the pending calls' answers: `auth-required` when one is
        ADK's request for credentials, `input-required` otherwise."""
        text = f"{problem} {_question(self.pending)}" if problem else _question(self.pending)
        if any(c.name == REQUEST_CREDENTIAL for c in self.pending.values()):
            self.ctx.require_auth(text, parts=self._question_parts())
        else:
            self.ctx.ask(text, parts=self._question_parts())

    async def _consume(self, runner: Runner, content: types.Content) -> None:
        async for event in runner.run_async(
            user_id=_USER,
            session_id=self.ctx.task_id,
            new_message=content,
            run_config=self.run_config,
        ):
            self._report(event)

    def _report(self, event: Event) -> None:
        """One ADK event: partial text as a chunk of its answer, a complete event as progress
        (and its outputs as artifacts)."""
        ctx = self.ctx
        parts = event.content.parts if event.content and event.content.parts else []
        text = "".join(p.text for p in parts if p.text and not p.thought)
        if event.partial:
            # Its text only: the complete event repeats a partial function call or thought.
            if text:
                streamed = self.streaming.get(event.author)
                self.streaming[event.author] = ctx.artifact(
                    text, name=event.author, artifact_id=streamed, append=streamed is not None
                )
            return
        streamed = self.streaming.pop(event.author, None)
        long_running = event.long_running_tool_ids or set()
        reported = [a2a_part(p, event.author, long_running) for p in parts]
        reported_parts = [p for p in reported if p is not None]
        if reported_parts:
            ctx.progress(parts=reported_parts)
        for part in parts:
            call, response = part.function_call, part.function_response
            if call is not None and call.id in long_running:
                self.pending[call.id] = call
            if response is not None:
                if response.id is not None:
                    self.pending.pop(response.id, None)
                ctx.artifact(data=_json(response.response), name=response.name)
            if part.inline_data is not None and part.inline_data.data is not None:
                blob = part.inline_data
                ctx.artifact(
                    file=blob.data,
                    media_type=blob.mime_type,
                    filename=blob.display_name,
                    name=blob.display_name,
                )
            if part.file_data is not None and part.file_data.file_uri:
                ctx.artifact(
                    url=part.file_data.file_uri,
                    media_type=part.file_data.mime_type,
                    filename=part.file_data.display_name,
                )
        if streamed is not None and not text:  # its text streamed, none came whole: close it
            ctx.artifact("", artifact_id=streamed, append=True, last_chunk=True)
        elif text and (streamed is not None or event.is_final_response()):
            # The complete text replaces what streamed (ADK's clients take the last chunk as
            # the response), in chunks that each fit one update.
            artifact_id = streamed
            for start in range(0, len(text), ARTIFACT_CHUNK):
                artifact_id = ctx.artifact(
                    text=text[start : start + ARTIFACT_CHUNK],
                    name=event.author,
                    artifact_id=artifact_id,
                    append=start > 0,
                    last_chunk=start + ARTIFACT_CHUNK >= len(text),
                )

    def _question_parts(self) -> list[Part]:
        return [
            Part(
                data=_json(call.model_dump(mode="json", exclude_none=True)),
                metadata={TYPE: FUNCTION_CALL, LONG_RUNNING: True, QUESTION: True},
            )
            for call in self.pending.values()
        ]


# -- A2A -> ADK ----------------------------------------------------------------------------


def rebuild(
    history: Iterable[Message], author: str, pending: dict[str, types.FunctionCall]
) -> list[Event]:
    """The session's events from the task's history (oldest first), as the turns that made
    it saw them; `pending` ends with the long-running calls still unanswered. `author` names
    the agent's events whose parts do not say who made them."""
    events: list[Event] = []
    invocation = ""
    for message in history:
        if message.role is Role.USER:
            try:
                content = user_content(message, pending)
            except UnusableMessage:
                continue  # its turn refused it: the agent never saw it
            for call_id in _answered(content):
                pending.pop(call_id, None)
            invocation = message.message_id
            events.append(Event(author="user", invocation_id=invocation, content=content))
            continue
        if any((p.metadata or {}).get(QUESTION) for p in message.parts):
            continue  # the question repeats calls replayed from the event that made them
        replayed = [p for p in message.parts if not (p.metadata or {}).get(PARTIAL)]
        pairs = [(p, g) for p, g in ((p, genai_part(p)) for p in replayed) if g is not None]
        if not pairs:
            continue
        genai_parts = [g for _, g in pairs]
        long_running: set[str] = set()
        for part, converted in pairs:
            call = converted.function_call
            if call is not None and call.id and (part.metadata or {}).get(LONG_RUNNING):
                long_running.add(call.id)
                pending[call.id] = call
            if converted.function_response is not None and converted.function_response.id:
                pending.pop(converted.function_response.id, None)
        responses_only = all(g.function_response is not None for g in genai_parts)
        events.append(
            Event(
                author=str((pairs[0][0].metadata or {}).get(AUTHOR) or author),
                invocation_id=invocation,
                content=types.Content(
                    role="user" if responses_only else "model", parts=genai_parts
                ),
                long_running_tool_ids=long_running or None,
            )
        )
    return events


def _from_user_turn(messages: Sequence[Message]) -> Sequence[Message]:
    """`messages` from the first user message on: a bounded conversation may start inside a
    turn, whose first agent events would answer calls the session never saw."""
    first = next((i for i, m in enumerate(messages) if m.role is Role.USER), len(messages))
    return messages[first:]


def user_content(message: Message, pending: dict[str, types.FunctionCall]) -> types.Content:
    """The user content of `message`. While calls are pending, a message without function
    responses answers them all: its one data part (an object) or its text is the response."""
    parts: list[types.Part] = []
    for index, part in enumerate(message.parts):
        where = f"part {index + 1} of the message"
        metadata = part.metadata or {}
        if part.kind == "data" and metadata.get(TYPE) == FUNCTION_RESPONSE:
            response = _function_response(part.data, where)
            if response.id not in pending:
                known = ", ".join(sorted(pending)) or "none"
                raise UnusableMessage(
                    f"{where} answers the call {response.id!r}, which is not waiting for an "
                    f"answer (waiting: {known}): set its data's 'id' to a waiting call's id."
                )
            parts.append(types.Part(function_response=response))
        elif part.kind == "text":
            parts.append(types.Part(text=part.text))
        elif part.kind == "data":
            parts.append(types.Part(text=json.dumps(part.data, ensure_ascii=False)))
        elif part.kind == "raw":
            parts.append(types.Part(inline_data=_blob(part, where)))
        else:
            parts.append(
                types.Part(
                    file_data=types.FileData(
                        file_uri=part.url, mime_type=part.media_type, display_name=part.filename
                    )
                )
            )
    if pending and not any(p.function_response for p in parts):
        answer = _answer(message)
        responses = [
            types.Part(
                function_response=types.FunctionResponse(
                    id=call.id, name=call.name, response=answer
                )
            )
            for call in pending.values()
        ]
        files = [p for p in parts if p.inline_data is not None or p.file_data is not None]
        parts = responses + files
    return types.Content(role="user", parts=parts)


def _answer(message: Message) -> dict[str, Any]:
    """A plain message's answer to a pending call, as a function response's object."""
    data = [p.data for p in message.parts if p.kind == "data"]
    if len(data) == 1 and isinstance(data[0], dict):
        return data[0]
    text = "\n".join(p.text for p in message.parts if p.text is not None)
    if data:
        return {"result": text, "data": data} if text else {"result": data}
    return {"result": text}


def _function_response(data: Any, where: str) -> types.FunctionResponse:
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise UnusableMessage(
            f"{where} is a function response (metadata adk_type) without an 'id': send "
            "{'id': <the call's id>, 'name': <the function's name>, 'response': {...}}."
        )
    try:
        return types.FunctionResponse.model_validate(data)
    except ValidationError:
        raise UnusableMessage(
            f"{where} is not a function response: send {{'id': <the call's id>, 'name': "
            "<the function's name>, 'response': <a JSON object>}."
        ) from None


def _bytes(raw: str) -> bytes | None:
    """A raw part's bytes, read as ProtoJSON reads them (base64, standard or URL-safe, padded
    or not); None when `raw` is not base64."""
    standard = raw.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def _blob(part: Part, where: str) -> types.Blob:
    data = _bytes(part.raw or "")
    if data is None:
        raise UnusableMessage(
            f"{where} holds bytes that are not base64 (RFC 4648, standard or URL-safe): "
            "encode the file's bytes in base64."
        )
    return types.Blob(
        data=data,
        mime_type=part.media_type or "application/octet-stream",
        display_name=part.filename,
    )


def _answered(content: types.Content) -> list[str]:
    return [
        p.function_response.id
        for p in content.parts or []
        if p.function_response is not None and p.function_response.id
    ]


def genai_part(part: Part) -> types.Part | None:
    """An agent's A2A part (as `a2a_part` made it) back as the genai part; None for what
    cannot be read back (a part some other writer changed)."""
    kind = (part.metadata or {}).get(TYPE)
    try:
        if kind == FUNCTION_CALL:
            return types.Part(function_call=types.FunctionCall.model_validate(part.data))
        if kind == FUNCTION_RESPONSE:
            return types.Part(function_response=types.FunctionResponse.model_validate(part.data))
        if kind == GENAI_PART:
            return types.Part.model_validate(part.data)
    except ValidationError:
        return None
    if part.text is not None:
        return types.Part(text=part.text)
    if part.raw is not None:
        data = _bytes(part.raw)
        if data is None:
            return None
        mime = part.media_type or "application/octet-stream"
        return types.Part(inline_data=types.Blob(data=data, mime_type=mime))
    if part.url is not None:
        return types.Part(file_data=types.FileData(file_uri=part.url, mime_type=part.media_type))
    return types.Part(text=json.dumps(part.data, ensure_ascii=False))


# -- ADK -> A2A ----------------------------------------------------------------------------


def a2a_part(part: types.Part, author: str, long_running: set[str]) -> Part | None:
    """A genai part of an agent's event as an A2A part (None for thoughts, which are not the
    answer, and for empty parts)."""
    metadata: dict[str, Any] = {AUTHOR: author}
    if part.thought:
        return None
    if part.text is not None:
        if len(part.text) > REPLAY_TEXT:
            return Part(text=part.text[:REPLAY_TEXT], metadata={**metadata, TRUNCATED: True})
        return Part(text=part.text, metadata=metadata)
    if part.function_call is not None:
        metadata[TYPE] = FUNCTION_CALL
        if part.function_call.id in long_running:
            metadata[LONG_RUNNING] = True
        return _bounded(_json(part.function_call), "args", metadata)
    if part.function_response is not None:
        metadata[TYPE] = FUNCTION_RESPONSE
        return _bounded(_json(part.function_response), "response", metadata)
    if part.inline_data is not None and part.inline_data.data is not None:
        blob = part.inline_data
        if len(blob.data or b"") > REPLAY_TEXT:
            name = blob.display_name or "a file"
            described = f"[{name} ({blob.mime_type}, {len(blob.data or b'')} bytes): an artifact]"
            return Part(text=described, metadata={**metadata, TRUNCATED: True})
        return Part(
            raw=base64.b64encode(part.inline_data.data).decode(),
            media_type=blob.mime_type,
            filename=blob.display_name,
            metadata=metadata,
        )
    if part.file_data is not None and part.file_data.file_uri:
        return Part(
            url=part.file_data.file_uri,
            media_type=part.file_data.mime_type,
            filename=part.file_data.display_name,
            metadata=metadata,
        )
    data = _json(part)
    if not data:
        return None  # an empty part: nothing to say or replay
    metadata[TYPE] = GENAI_PART
    return Part(data=data, metadata=metadata)


def _bounded(data: Any, field: str, metadata: dict[str, Any]) -> Part:
    """A function call's or response's data part, its `field` (args, response) cut to a text
    of REPLAY_TEXT characters when the whole is larger: the call and its response still pair
    up (id, name) in the rebuilt session."""
    if json_bytes(data) <= REPLAY_TEXT or not isinstance(data, dict):
        return Part(data=data, metadata=metadata)
    cut = json.dumps(data.get(field), ensure_ascii=False)[:REPLAY_TEXT]
    return Part(data={**data, field: {"result": cut}}, metadata={**metadata, TRUNCATED: True})


def _json(value: Any) -> Any:
    """`value` (a genai model or what a tool returned) as JSON data: what JSON cannot carry
    (NaN, objects pydantic cannot serialize) becomes text instead of an unservable value."""
    try:
        if isinstance(value, types.Part | types.FunctionCall | types.FunctionResponse):
            value = value.model_dump(mode="json", exclude_none=True)
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return {"result": repr(value)}


def _question(pending: dict[str, types.FunctionCall]) -> str:
    """The question of an `input-required` turn: what the calls' arguments say, or a default."""
    asks: list[str] = []
    for call in pending.values():
        args = call.args or {}
        confirmation = args.get("toolConfirmation")
        hint = confirmation.get("hint") if isinstance(confirmation, dict) else None
        said = args.get("message") or args.get("question") or hint
        asks.append(said if isinstance(said, str) and said else f"The agent waits for {call.name}.")
    return " ".join(asks) + (
        " Answer with a message: its text (or its one data part, an object) becomes the result."
    )
