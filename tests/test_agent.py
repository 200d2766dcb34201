"""What handler authors see: the public surface of shared.agent, and handler modules whose
module-level names the library does not know are refused at start-up."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import shared.agent
from shared.agent import (
    CONTEXT_MESSAGES,
    CONTEXT_TASKS,
    Context,
    HandlerModuleError,
    load_handler_module,
)
from shared.model import Message, Part, Role, Task, TaskState, TaskStatus, agent_message
from shared.ports import StoredTask, TaskPage, TaskQuery

WriteModule = Callable[[str], str]
HANDLE = "def handle(ctx):\n    ctx.complete('ok')\n"


@pytest.fixture
def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> WriteModule:
    """Writes a handler module with this source; its importable name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str) -> str:
        name = f"handler_{uuid.uuid4().hex}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source) + "\n" + HANDLE)
        return name

    return write


def test_the_public_surface_is_what_handlers_use() -> None:
    assert sorted(shared.agent.__all__) == [
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
    assert all(hasattr(shared.agent, name) for name in shared.agent.__all__)


@pytest.mark.parametrize(
    ("source", "unknown", "close"),
    [
        ("SKILL = []", "SKILL", "SKILLS"),
        ("LONG_RUNING = True", "LONG_RUNING", "LONG_RUNNING"),
        ("AGENTS: list[int] = []", "AGENTS", "AGENT"),
        ("GREETING = 'hello'", "GREETING", None),
        ("import os\nif os.sep:\n    SKILL = []", "SKILL", "SKILLS"),
        ("try:\n    pass\nexcept ImportError:\n    FALLBACK = 1", "FALLBACK", None),
    ],
)
def test_an_unknown_declaration_is_refused_by_name(
    write_module: WriteModule, source: str, unknown: str, close: str | None
) -> None:
    name = write_module(source)
    with pytest.raises(HandlerModuleError) as refused:
        load_handler_module(name)
    message = str(refused.value)
    assert f"A2A_HANDLER={name!r}" in message
    assert f"unknown declaration {unknown}." in message
    assert ("Did you mean" in message) is (close is not None)
    if close is not None:
        assert f"Did you mean {close}?" in message
    assert "handle, SKILLS, AGENT, LONG_RUNNING" in message  # the known ones
    assert "EXTENSIONS" in message


def test_imported_private_and_lower_case_names_are_the_modules_own(
    write_module: WriteModule,
) -> None:
    name = write_module(
        """
        from os import SEEK_SET
        from typing import TYPE_CHECKING

        from shared.agent import AgentInfo, Skill

        if TYPE_CHECKING:
            from shared.agent import Context
        _JOKE = "a private constant"
        seen: dict[str, str] = {}
        AGENT = AgentInfo(name="Named")
        SKILLS = [Skill(id="s", name="S", description="d")]
        LONG_RUNNING = True


        def helper():
            LOCAL_CONSTANT = 1
            return LOCAL_CONSTANT + SEEK_SET


        class Thing:
            CLASS_CONSTANT = 2
        """
    )
    module = load_handler_module(name)
    assert module.info.name == "Named" and module.long_running
    assert [s.id for s in module.skills] == ["s"]


def test_rerun_safe_is_declared_as_a_bool(write_module: WriteModule) -> None:
    assert load_handler_module(write_module("")).rerun_safe  # safe unless it says otherwise
    assert not load_handler_module(write_module("RERUN_SAFE = False")).rerun_safe
    with pytest.raises(HandlerModuleError, match="RERUN_SAFE must be True or False"):
        load_handler_module(write_module("RERUN_SAFE = 'no'"))


def test_every_shipped_handler_module_loads() -> None:
    modules = [
        f"{folder}.{path.stem}"
        for folder in ("functions.handlers", "tests.handlers")
        for path in sorted(Path(*folder.split(".")).glob("*.py"))
        if path.stem != "__init__"
    ]
    assert len(modules) >= 10
    for name in modules:
        assert load_handler_module(name).name == name


def test_extensions_are_declared_with_their_card_fields(write_module: WriteModule) -> None:
    name = write_module(
        """
        from shared.agent import Extension
        EXTENSIONS = [
            Extension(uri="urn:example:a:v1", required=True),
            Extension(uri="https://example.com/ext/b/v2", description="B", params={"n": [1]}),
        ]
        """
    )
    declared = load_handler_module(name).extensions
    assert [(e.uri, e.required, e.params) for e in declared] == [
        ("urn:example:a:v1", True, None),
        ("https://example.com/ext/b/v2", False, {"n": [1]}),
    ]


@pytest.mark.parametrize(
    ("declaration", "problem"),
    [
        ("EXTENSIONS = ['urn:example:a']", "must be a list of Extension"),
        ("EXTENSIONS = Extension(uri='urn:example:a')", "must be a list of Extension"),
        ("EXTENSIONS = [Extension(uri='')]", "is not an extension URI"),
        ("EXTENSIONS = [Extension(uri='geo')]", "is not an extension URI"),  # not absolute
        ("EXTENSIONS = [Extension(uri='urn:a,urn:b')]", "without spaces or commas"),
        ("EXTENSIONS = [Extension(uri='urn:a b')]", "without spaces or commas"),
        ("EXTENSIONS = [Extension(uri='urn:' + 'x' * 2001)]", "at most 2000 characters"),
        ("EXTENSIONS = [Extension(uri='urn:a'), Extension(uri='urn:a')]", "lists urn:a twice"),
        (
            "EXTENSIONS = [Extension(uri='URN:a2a-functions:ext:push-delivery-status:v1')]",
            "the kit's own extensions",
        ),
        ("EXTENSIONS = [Extension(uri='urn:a', required='yes')]", "required a bool"),
        ("EXTENSIONS = [Extension(uri='urn:a', params=[1])]", "params must be a JSON object"),
        ("EXTENSIONS = [Extension(uri='urn:a', params={'x': float('nan')})]", "JSON object"),
        ("EXTENSIONS = [Extension(uri='urn:a', params={1: 2})]", "JSON object"),
        ("EXTENSIONS = [Extension(uri=f'urn:{i}') for i in range(33)]", "the limit is 32"),
    ],
)
def test_a_bad_extension_declaration_stops_the_start_up(
    write_module: WriteModule, declaration: str, problem: str
) -> None:
    name = write_module(f"from shared.agent import Extension\n{declaration}")
    with pytest.raises(HandlerModuleError) as refused:
        load_handler_module(name)
    assert f"A2A_HANDLER={name!r}: EXTENSIONS" in str(refused.value)
    assert problem in str(refused.value)


# -- Context.context_history: the context's other tasks, bounded -----------------------------


def context_task(number: int, messages: int, task_id: str = "") -> StoredTask:
    """Task `t<number>` (or `task_id`) of context `c`, created at second `number`, with
    `messages` messages in its history (`t<n>-m<i>`) and a status message (`t<n>-status`)."""
    task_id = task_id or f"t{number}"
    history = tuple(
        agent_message(f"t{number}-m{i}", task_id=task_id, context_id="c") for i in range(messages)
    )
    status = TaskStatus(
        state=TaskState.COMPLETED,
        message=agent_message(f"t{number}-status", task_id=task_id, context_id="c"),
    )
    task = Task(id=task_id, context_id="c", status=status, history=history)
    created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=number)
    return StoredTask(task, "alice", 1, 1, "v1.0", created, created)


class ListedContext:
    """The store's list for one owner's context `c`: `tasks`, most recently updated first."""

    def __init__(self, tasks: list[StoredTask]) -> None:
        self.tasks = tasks
        self.queries: list[TaskQuery] = []

    def __call__(self, query: TaskQuery) -> TaskPage:
        self.queries.append(query)
        return TaskPage(self.tasks[: query.page_size], "", len(self.tasks))


def context_of(task_id: str, listed: ListedContext | None) -> Context:
    message = Message(role=Role.USER, message_id="now", parts=(Part(text="now"),))
    no_sink: Any = None  # the history needs no sink
    return Context(task_id, "c", message, (message,), (), _sink=no_sink, _list_tasks=listed)


def texts(messages: tuple[Message, ...]) -> list[str]:
    return [p.text or "" for m in messages for p in m.parts]


def test_the_context_history_is_the_other_tasks_oldest_first_read_once() -> None:
    # Listed most recently updated first; "me" is this task.
    listed = ListedContext(
        [context_task(1, 1), context_task(9, 3, "me"), context_task(2, 2), context_task(0, 0)]
    )
    ctx = context_of("me", listed)
    assert texts(ctx.context_history()) == [
        "t0-status",
        "t1-m0",
        "t1-status",
        "t2-m0",
        "t2-m1",
        "t2-status",
    ]
    assert ctx.context_history() is ctx.context_history()
    assert listed.queries == [TaskQuery(context_id="c", page_size=CONTEXT_TASKS + 1)]


def test_the_context_history_keeps_the_newest_tasks_and_messages() -> None:
    # More tasks than are read, and more messages in them than are kept.
    per_task = CONTEXT_MESSAGES // CONTEXT_TASKS + 4
    count = CONTEXT_TASKS + 5
    listed = ListedContext([context_task(n, per_task) for n in reversed(range(count))])
    kept = texts(context_of("me", listed).context_history())
    names = [*(f"m{i}" for i in range(per_task)), "status"]
    read = [f"t{n}-{name}" for n in range(count - CONTEXT_TASKS, count) for name in names]
    assert len(read) > CONTEXT_MESSAGES
    assert kept == read[-CONTEXT_MESSAGES:]


def test_a_context_without_a_store_has_no_history() -> None:
    assert context_of("t", None).context_history() == ()


def test_the_context_history_is_the_handler_s_own_copy() -> None:
    noted = agent_message("noted", task_id="t1", context_id="c")
    noted = replace(noted, metadata={"seen": ["a"]})
    earlier = replace(context_task(1, 0), task=replace(context_task(1, 0).task, history=(noted,)))
    [read, _] = context_of("me", ListedContext([earlier])).context_history()
    assert read == noted
    read.metadata["seen"].append("b")  # type: ignore[index]
    assert earlier.task.history[0].metadata == {"seen": ["a"]}
