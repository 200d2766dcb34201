"""What handler authors see: the public surface of shared.agent, and handler modules whose
module-level names the library does not know are refused at start-up."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

import shared.agent
from shared.agent import HandlerModuleError, load_handler_module

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
