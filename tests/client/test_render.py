"""What the CLI prints and saves comes from the agent: it must never move the terminal nor
write outside the files directory, whatever the agent sends."""

from __future__ import annotations

import base64
import io
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from shared.client.render import MAX_NAME, Renderer, printable, safe_file_name, short_state


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
    renderer.part(part, "[artifact]")
    assert outside.read_text() == "keep"
    assert (files / "a-1.txt").read_bytes() == b"new"
    renderer.part({"raw": "not base64!"}, "[artifact]")
    assert "not base64 (not saved)" in out.getvalue()


def test_states_are_shown_short() -> None:
    assert short_state("TASK_STATE_INPUT_REQUIRED") == "input-required"
    assert short_state(None) == "unspecified"
