"""What a handler module sees: the Context of one turn, and what it declares for the card.

A handler module is plain Python:

    from shared.agent import Context, Skill

    SKILLS = [Skill(id="echo", name="Echo", description="Says it back", tags=("echo",))]

    def handle(ctx: Context) -> None:
        ctx.artifact(text=ctx.text)

`handle` may be `async def`. Returning without ending the turn completes the task; raising
fails it with a message for the client (the traceback goes to the log only). No wire types
appear here: every protocol version reaches the handler as the same Context.

What a handler module may import from here is `__all__`; the rest (HandlerModule,
load_handler_module) is the library's side. The module-level names the library reads are
`DECLARATIONS`:

- `handle(ctx)`, required;
- `SKILLS`, a list of Skill (the card's skills; default none);
- `EXTENDED_SKILLS`, a list of Skill only signed-in callers see (the authenticated extended
  card; needs an A2A_AUTH mode other than none);
- `AGENT`, an AgentInfo (the card's identity; deploy settings may override its fields);
- `EXTENSIONS`, a list of Extension: the A2A extensions the agent implements, listed in the
  card's `capabilities.extensions`. A client activates one for its request with the
  `A2A-Extensions` header (`X-A2A-Extensions` from 0.3 clients); the handler reads the active
  ones in `ctx.extensions`. A `required=True` one refuses every message whose request does not
  activate it (ExtensionSupportRequiredError, -32008);
- `LONG_RUNNING = True`: every turn runs on the worker, never inside the client's request.
- `RERUN_SAFE = False`: a turn must not run twice (it charges a card, sends an e-mail). A turn
  whose run vanished (its instance died, its worker's attempt failed) is then failed with a
  status message saying so, instead of run again from the start (the default, True).

Every other public UPPER_CASE name that the module assigns at its top level is refused when it
is loaded, so that a misspelt declaration (`SKILL =`, `LONG_RUNING =`) stops the start-up
instead of being ignored: the module's own constants are private (`_JOKE = ...`). Names the
module imports (`from typing import TYPE_CHECKING`) and lower-case names are its own business.
"""

from __future__ import annotations

import ast
import base64
import difflib
import importlib
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

from shared import media_types
from shared.frozen import frozen
from shared.model import (
    Artifact,
    ArtifactUpdate,
    Event,
    Message,
    Part,
    Role,
    StatusUpdate,
    TaskState,
    TaskStatus,
    agent_message,
)
from shared.model_json import detached
from shared.ports import TaskPage, TaskQuery

__all__ = [
    "AgentInfo",
    "Artifact",
    "Context",
    "Extension",
    "Message",
    "Part",
    "Role",
    "Skill",
    "TaskCanceled",
    "TurnEnded",
    "text_part",
]

# The module-level names of a handler module that the library reads.
DECLARATIONS = (
    "handle",
    "SKILLS",
    "AGENT",
    "LONG_RUNNING",
    "RERUN_SAFE",
    "EXTENDED_SKILLS",
    "EXTENSIONS",
)

# What an extension's URI may be: one header list element (no commas, no spaces), bounded.
# The kit's own extensions (shared.extensions) are named under this: a handler's may not be.
KIT_EXTENSIONS = "urn:a2a-functions:"
_EXTENSION_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[\x21-\x2b\x2d-\x7e]{1,2000}")
MAX_EXTENSIONS = 32

# What `Context.context_history()` reads and keeps of a context's other tasks: the ones most
# recently updated, and of their messages the newest (a context may be long-lived: its
# conversation is bounded like a task's history, not by the context's age).
CONTEXT_TASKS = 20
CONTEXT_MESSAGES = 200


@frozen
class Skill:
    """One thing the agent can do, as the agent card lists it."""

    id: str
    name: str
    description: str
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    input_modes: tuple[str, ...] = ()
    output_modes: tuple[str, ...] = ()


@frozen
class Extension:
    """An A2A extension the agent implements, as the card's `capabilities.extensions` lists it.

    `uri` names it (an absolute URI, ideally with a version: `https://example.com/ext/geo/v1`);
    `params` is its configuration for clients (a JSON object). A `required` extension refuses
    the messages of clients that do not activate it."""

    uri: str
    description: str = ""
    required: bool = False
    params: dict[str, Any] | None = None


@frozen
class AgentInfo:
    """The agent's identity for the card; deploy settings may override each field."""

    name: str = "A2A agent"
    description: str = "An agent served by a2a-functions"
    version: str = "1.0.0"
    # The media types its messages' parts may have (`image/*` and `*/*` allowed), with its
    # skills' own: a part of another type is refused (ContentTypeNotSupported). Declared by
    # neither, any part is taken and the card says `text/plain`, what clients assume.
    input_modes: tuple[str, ...] = ()
    output_modes: tuple[str, ...] = ("text/plain",)


class TurnEnded(RuntimeError):
    """The handler tried to act after it ended its turn (completed, asked, failed, ...)."""


class TaskCanceled(Exception):
    """Raised inside the handler at its next action once the task was canceled."""


class _Sink(Protocol):
    """The runtime side of a Context: where its events go."""

    def emit(self, event: Event) -> None: ...

    def reply(self, message: Message) -> None: ...

    def canceled(self) -> bool: ...

    def artifact_id(self) -> str: ...


def text_part(text: str) -> Part:
    """A text part, for `ctx.reply(parts=...)`."""
    return Part(text=text)


@dataclass(eq=False)  # a turn's live context (its sink): equal only to itself
class Context:
    """One turn of a task: the incoming message, the task so far, and ways to answer."""

    task_id: str
    context_id: str
    message: Message
    history: tuple[Message, ...]
    artifacts: tuple[Artifact, ...]
    _sink: _Sink = field(repr=False)
    _ended: TaskState | None = field(default=None, repr=False)
    # The URIs of the agent's EXTENSIONS active for this turn: activated by the request that
    # carried its message (the A2A-Extensions header), or listed in the message's extensions.
    extensions: frozenset[str] = frozenset()
    # The store's list of the turn's owner: called by context_history() only, so a handler
    # that never asks reads nothing.
    _list_tasks: Callable[[TaskQuery], TaskPage] | None = field(default=None, repr=False)
    _context_history: tuple[Message, ...] | None = field(default=None, repr=False)

    @property
    def parts(self) -> tuple[Part, ...]:
        return self.message.parts

    @property
    def text(self) -> str:
        """The incoming message's text parts, joined by newlines."""
        return "\n".join(p.text for p in self.message.parts if p.text is not None)

    @property
    def data(self) -> list[Any]:
        """The incoming message's data parts."""
        return [p.data for p in self.message.parts if p.kind == "data"]

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self.message.metadata or {})

    @property
    def canceled(self) -> bool:
        """True once someone canceled the task; the handler should stop soon."""
        return self._sink.canceled()

    def context_history(self) -> tuple[Message, ...]:
        """The rest of this context's conversation: the messages of the caller's other tasks
        with this `context_id` (a client that sends its next message with the contextId of a
        finished task starts a new one), oldest task first, each task's history followed by
        its status message (its last answer or question). Another owner's tasks are never
        there, whatever context id they share.

        Read once, at the first call (one query of the store); bounded: the CONTEXT_TASKS
        tasks most recently updated, and of their messages the newest CONTEXT_MESSAGES. A
        direct answer (`reply`) that made no task was never stored, and is not there."""
        if self._context_history is None:
            # One more: this task may be among the most recently updated.
            query = TaskQuery(context_id=self.context_id, page_size=CONTEXT_TASKS + 1)
            found = self._list_tasks(query).tasks if self._list_tasks else []
            others = [s for s in found if s.task.id != self.task_id][:CONTEXT_TASKS]
            others.sort(key=lambda s: s.created_at)
            messages = [
                message
                for stored in others
                for message in (*stored.task.history, stored.task.status.message)
                if message is not None
            ]
            # The handler's own copies: the store keeps these very objects.
            self._context_history = tuple(detached(m) for m in messages[-CONTEXT_MESSAGES:])
        return self._context_history

    # -- answers that keep the turn open ---------------------------------------------------

    def progress(self, text: str | None = None, *, parts: Sequence[Part] = ()) -> None:
        """Report progress: the task is `working`, with this status message (`text` first,
        then `parts`)."""
        self._status(TaskState.WORKING, text, parts)

    def artifact(
        self,
        text: str | None = None,
        *,
        data: Any = None,
        file: bytes | None = None,
        url: str | None = None,
        filename: str | None = None,
        media_type: str | None = None,
        name: str | None = None,
        description: str | None = None,
        artifact_id: str | None = None,
        append: bool = False,
        last_chunk: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Add an artifact (or, with `append`, a chunk of one); returns its id.

        Give exactly one of text, data, file (bytes) or url. Chunks of one artifact share
        the id returned by the first call; mark the last with `last_chunk=True`.
        """
        given = [v is not None for v in (text, data, file, url)]
        if sum(given) != 1:
            raise ValueError("artifact() takes exactly one of text, data, file or url")
        raw = base64.b64encode(file).decode() if file is not None else None
        part = Part(
            text=text, raw=raw, url=url, data=data, filename=filename, media_type=media_type
        )
        artifact_id = artifact_id or self._sink.artifact_id()
        self._emit(
            ArtifactUpdate(
                task_id=self.task_id,
                context_id=self.context_id,
                artifact=Artifact(
                    artifact_id=artifact_id,
                    parts=(part,),
                    name=name,
                    description=description,
                    metadata=metadata,
                ),
                append=append,
                last_chunk=last_chunk,
            )
        )
        return artifact_id

    # -- answers that end the turn ---------------------------------------------------------

    def reply(self, text: str | None = None, *, parts: Sequence[Part] = ()) -> None:
        """Answer with a message and no task (when the task has no other events yet)."""
        message = self._agent_message(text, parts)
        self._end(TaskState.COMPLETED)
        self._sink.reply(message)

    def complete(self, text: str | None = None) -> None:
        self._status(TaskState.COMPLETED, text, end=True)

    def ask(self, text: str, *, parts: Sequence[Part] = ()) -> None:
        """Ask the client for more input: the task waits in `input-required`."""
        self._status(TaskState.INPUT_REQUIRED, text, parts, end=True)

    def require_auth(self, text: str, *, parts: Sequence[Part] = ()) -> None:
        """The task waits in `auth-required` until credentials arrive out of band."""
        self._status(TaskState.AUTH_REQUIRED, text, parts, end=True)

    def fail(self, text: str) -> None:
        self._status(TaskState.FAILED, text, end=True)

    def reject(self, text: str) -> None:
        """Refuse the task: the agent will not do it."""
        self._status(TaskState.REJECTED, text, end=True)

    @property
    def ended(self) -> TaskState | None:
        """The state the handler ended its turn with, if it did."""
        return self._ended

    # -- internals -------------------------------------------------------------------------

    def _agent_message(self, text: str | None, parts: Sequence[Part]) -> Message:
        return agent_message(text, task_id=self.task_id, context_id=self.context_id, parts=parts)

    def _status(
        self, state: TaskState, text: str | None, parts: Sequence[Part] = (), *, end: bool = False
    ) -> None:
        message = self._agent_message(text, parts) if text is not None or parts else None
        if end:
            self._end(state)
        else:
            self._check_open()
        self._sink.emit(
            StatusUpdate(
                task_id=self.task_id,
                context_id=self.context_id,
                status=TaskStatus(state=state, message=message),
            )
        )

    def _emit(self, event: Event) -> None:
        self._check_open()
        self._sink.emit(event)

    def _check_open(self) -> None:
        if self._ended is not None:
            raise TurnEnded(f"the turn already ended ({self._ended.value}); return from handle()")

    def _end(self, state: TaskState) -> None:
        self._check_open()
        self._ended = state


Handler = Callable[[Context], Awaitable[None] | None]


@frozen
class HandlerModule:
    """A loaded handler module: its handle function and its declarations."""

    name: str
    handle: Handler
    info: AgentInfo
    skills: tuple[Skill, ...]
    # `LONG_RUNNING = True` in the module: every turn runs on the worker, never in the request.
    long_running: bool = False
    # `RERUN_SAFE = False` in the module: a turn whose run vanished is failed, not run again.
    rerun_safe: bool = True
    # Skills only authenticated callers see, in the extended card.
    extended_skills: tuple[Skill, ...] = ()
    extensions: tuple[Extension, ...] = ()
    # The media ranges its messages' parts may have (its AGENT's and skills' input modes);
    # None: any, as none are declared (shared.media_types).
    input_modes: frozenset[str] | None = None

    def active_extensions(self, message: Message) -> frozenset[str]:
        """The module's extensions in force for a message: those it was sent with (the ones
        its request activated are recorded in its `extensions`)."""
        return frozenset(message.extensions) & {e.uri for e in self.extensions}


class HandlerModuleError(ValueError):
    """The configured handler module cannot be used; the message says how to fix it."""


def load_handler_module(name: str) -> HandlerModule:
    try:
        module: ModuleType = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise HandlerModuleError(
            f"A2A_HANDLER={name!r}: module not found ({exc.name}). Set A2A_HANDLER to a module "
            "path such as functions.handlers.echo."
        ) from exc
    handle = getattr(module, "handle", None)
    if not callable(handle):
        raise HandlerModuleError(
            f"A2A_HANDLER={name!r}: the module has no handle(ctx) function. Define "
            "`def handle(ctx: Context) -> None` in it."
        )
    _refuse_unknown_declarations(name, module)
    info = getattr(module, "AGENT", AgentInfo())
    skills = tuple(getattr(module, "SKILLS", ()))
    if not isinstance(info, AgentInfo) or not all(isinstance(s, Skill) for s in skills):
        raise HandlerModuleError(
            f"A2A_HANDLER={name!r}: AGENT must be an AgentInfo and SKILLS a list of Skill."
        )
    long_running = getattr(module, "LONG_RUNNING", False)
    if not isinstance(long_running, bool):
        raise HandlerModuleError(f"A2A_HANDLER={name!r}: LONG_RUNNING must be True or False.")
    rerun_safe = getattr(module, "RERUN_SAFE", True)
    if not isinstance(rerun_safe, bool):
        raise HandlerModuleError(f"A2A_HANDLER={name!r}: RERUN_SAFE must be True or False.")
    extended = tuple(getattr(module, "EXTENDED_SKILLS", ()))
    if not all(isinstance(s, Skill) for s in extended):
        raise HandlerModuleError(f"A2A_HANDLER={name!r}: EXTENDED_SKILLS must be a list of Skill.")
    return HandlerModule(
        name=name,
        handle=handle,
        info=info,
        skills=skills,
        long_running=long_running,
        rerun_safe=rerun_safe,
        extended_skills=extended,
        extensions=_extensions(name, getattr(module, "EXTENSIONS", ())),
        input_modes=media_types.declared(
            info.input_modes, tuple(s.input_modes for s in (*skills, *extended))
        ),
    )


def _extensions(name: str, declared: object) -> tuple[Extension, ...]:
    """The module's EXTENSIONS, checked: each an Extension with a URI a client can name in
    the A2A-Extensions header, no URI twice, params a JSON object; at most MAX_EXTENSIONS."""
    where = f"A2A_HANDLER={name!r}: EXTENSIONS"
    if not isinstance(declared, list | tuple) or not all(
        isinstance(e, Extension) for e in declared
    ):
        raise HandlerModuleError(f"{where} must be a list of Extension.")
    if len(declared) > MAX_EXTENSIONS:
        raise HandlerModuleError(f"{where} has {len(declared)}; the limit is {MAX_EXTENSIONS}.")
    seen: set[str] = set()
    for extension in declared:
        if not isinstance(extension.uri, str) or not _EXTENSION_URI.fullmatch(extension.uri):
            raise HandlerModuleError(
                f"{where}: {extension.uri!r} is not an extension URI: an absolute URI "
                "(https://example.com/ext/name/v1, urn:...) of at most 2000 characters, "
                "without spaces or commas (clients list URIs in a comma-separated header)."
            )
        if extension.uri.lower().startswith(KIT_EXTENSIONS):
            raise HandlerModuleError(
                f"{where}: {extension.uri} is named under {KIT_EXTENSIONS}, the kit's own "
                "extensions (which the card lists by itself): name yours under your own URI."
            )
        if extension.uri in seen:
            raise HandlerModuleError(f"{where} lists {extension.uri} twice.")
        seen.add(extension.uri)
        if not isinstance(extension.required, bool) or not isinstance(extension.description, str):
            raise HandlerModuleError(
                f"{where}: {extension.uri}: description must be a str and required a bool."
            )
        if extension.params is not None and not _json_object(extension.params):
            raise HandlerModuleError(
                f"{where}: {extension.uri}: params must be a JSON object (a dict of JSON "
                "values with str keys), or None."
            )
    return tuple(declared)


def _json_object(value: object) -> bool:
    """Whether the card can carry `value` as a JSON object, in every version's form."""
    if not isinstance(value, dict):
        return False
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return all(isinstance(k, str) for k in value)


_DECLARATION = re.compile(r"[A-Z][A-Z0-9_]*")


def _refuse_unknown_declarations(name: str, module: ModuleType) -> None:
    """Raise HandlerModuleError for a public UPPER_CASE name the module assigns at its top
    level that is not one of DECLARATIONS (see the module docstring)."""
    known = [d for d in DECLARATIONS if d.isupper()]
    for unknown in sorted(_assigned_names(module) - set(known)):
        if not _DECLARATION.fullmatch(unknown):
            continue
        close = difflib.get_close_matches(unknown, known, n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        raise HandlerModuleError(
            f"A2A_HANDLER={name!r}: unknown declaration {unknown}.{hint} A handler module "
            f"declares {', '.join(DECLARATIONS)}; name its own constants with a leading "
            f"underscore (_{unknown})."
        )


def _assigned_names(module: ModuleType) -> set[str]:
    """The names the module's top-level statements assign (not import), also inside
    module-level if/try/with blocks; nothing when its source cannot be read."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return set()
    names: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        statement = pending.pop()
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign | ast.AugAssign):
            targets = [statement.target]
        else:
            # Blocks run at import time bind module names too; def and class bodies do not.
            if not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                for child in ast.iter_child_nodes(statement):
                    if isinstance(child, ast.stmt):
                        pending.append(child)
                    elif isinstance(child, ast.ExceptHandler):
                        pending.extend(child.body)
            continue
        for target in targets:
            names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names
