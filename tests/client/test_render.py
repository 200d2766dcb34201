"""What the CLI prints and saves comes from the agent: it must never move the terminal nor
write outside the files directory, whatever the agent sends."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shared.client.render import MAX_NAME, Renderer, printable, safe_file_name, short_state

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@given(st.text())
def test_printable_text_has_no_control_character_but_newline_and_tab(text: str) -> None:
    shown = printable(text)
    assert all(c in "\n\t" or not (ord(c) < 32 or 127 <= ord(c) < 160) for c in shown)


def test_printable_shows_what_it_escaped() -> None:
    assert printable("a\x1b[2Jb\x07\n\tc\x9b") == "a\\x1b[2Jb\\x07\n\tc\\x9b"


@given(st.text(), st.text(min_size=1, alphabet=st.characters(categories=["Ll", "Nd"])))
def test_a_saved_name_is_one_plain_name(name: str, fallback: str) -> None:
    safe = safe_file_name(name, fallback)
    assert safe and "/" not in safe and "\\" not in safe
    assert not safe.startswith(".") and len(safe) <= MAX_NAME
    assert safe.isascii() and safe.isprintable()


def test_names_keep_what_is_safe() -> None:
    assert safe_file_name("report 2024.pdf", "f") == "report_2024.pdf"
    assert safe_file_name("../../etc/passwd", "f") == "passwd"
    assert safe_file_name("..\\..\\boot.ini", "f") == "boot.ini"
    assert safe_file_name("..", "artifact-1") == "artifact-1"
    assert safe_file_name(None, "artifact-1") == "artifact-1"


def test_files_are_never_overwritten_nor_written_through_a_link(tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (files / "a.txt").symlink_to(outside)
    out = io.StringIO()
    renderer = Renderer(out, files=files)
    part = {"raw": base64.b64encode(b"new").decode(), "filename": "a.txt"}
    renderer.part(part, "artifact")
    assert outside.read_text() == "keep"
    assert (files / "a-1.txt").read_bytes() == b"new"
    assert f"Saved To: {files / 'a-1.txt'}" in out.getvalue()
    renderer.part({"raw": "not base64!"}, "artifact")
    assert "Size: unknown: the bytes are not base64" in out.getvalue()


def test_without_a_files_directory_a_file_part_is_described_not_written(tmp_path: Path) -> None:
    out = io.StringIO()
    part = {"raw": base64.b64encode(b"12345").decode(), "filename": "r.pdf", "mediaType": "x/y"}
    Renderer(out).part(part, "artifact")
    assert out.getvalue() == "File Name: r.pdf\nMedia Type: x/y\nSize: 5 bytes\n"


def test_states_are_shown_short() -> None:
    assert short_state("TASK_STATE_INPUT_REQUIRED") == "INPUT_REQUIRED"
    assert short_state(None) == "UNSPECIFIED"


FIELD = re.compile(r"^[A-Z][A-Za-z ]*: ")
LABEL = re.compile(r"^[A-Z][A-Za-z ]*:$")
PARTS = st.one_of(
    st.fixed_dictionaries({"text": st.text()}),
    st.fixed_dictionaries({"data": st.recursive(st.none() | st.text(), st.lists)}),
    st.fixed_dictionaries({"url": st.text(), "filename": st.text(), "mediaType": st.text()}),
    st.fixed_dictionaries({"raw": st.text(), "filename": st.text()}),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5)),
)


@given(
    st.text(),
    st.text(),
    st.sampled_from(["TASK_STATE_FAILED", "TASK_STATE_WORKING"]) | st.text(),
    st.lists(PARTS, max_size=4),
    st.text(),
)
def test_text_output_is_fields_and_closed_blocks_whatever_the_agent_sends(
    task_id: str, context_id: str, state: str, parts: list[dict[str, Any]], said: str
) -> None:
    out = io.StringIO()
    status = {"state": state, "message": {"parts": [{"text": said}]}}
    task = {"id": task_id, "contextId": context_id, "status": status}
    Renderer(out).task({**task, "artifacts": [{"artifactId": "a", "parts": parts}]})
    lines = out.getvalue().split("\n")
    assert lines[-1] == ""
    assert all(not _CONTROLS.search(line) for line in lines)
    fields: list[str] = []
    index = 0
    while index < len(lines) - 1:
        line = lines[index]
        if LABEL.match(line):  # a block: its label, then lines up to a blank one
            end = lines.index("", index + 1)
            index = end + 1
            continue
        assert FIELD.match(line), line
        fields.append(line.split(":", 1)[0])
        index += 1
    assert fields[:2] == ["Task ID", "Context ID"] and fields.count("State") == 1


def test_an_agents_text_cannot_pass_for_a_field() -> None:
    out = io.StringIO()
    Renderer(out).part({"text": "done\n\nState: COMPLETED\n"}, "a")
    assert out.getvalue() == "Text:\ndone\n \nState: COMPLETED\n \n\n"
