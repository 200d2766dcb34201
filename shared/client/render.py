"""What the CLI prints: tasks, messages, status and artifact updates, in A2A 1.0 shapes.

Text is printed as text, data parts as indented JSON, file parts are saved under one
directory (`a2a --files DIR`) and named in the output. Everything here comes from the agent,
so nothing it sends can move the terminal (control characters are shown escaped) or write
outside that directory (file names are reduced to a safe base name, never overwriting).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sys
from pathlib import Path
from typing import Any, TextIO

# C0 and C1 control characters but newline and tab: escape sequences could rewrite the screen.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 100  # characters of a saved file's name
MAX_SAME_NAME = 1000  # numbered copies of one name before giving up


def printable(text: str) -> str:
    """`text` with control characters (escape sequences) shown as \\xNN instead of obeyed."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def short_state(state: object) -> str:
    """`TASK_STATE_INPUT_REQUIRED` -> `input-required`."""
    name = str(state or "TASK_STATE_UNSPECIFIED").removeprefix("TASK_STATE_")
    return name.lower().replace("_", "-")


def safe_file_name(name: object, fallback: str) -> str:
    """A base name for a file the agent named: no directories, no leading dot, plain ASCII."""
    text = str(name) if isinstance(name, str) and name else fallback
    base = text.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE_NAME.sub("_", base).lstrip(".")[:MAX_NAME]
    return cleaned if cleaned.strip("_") else _UNSAFE_NAME.sub("_", fallback)[:MAX_NAME]


class Renderer:
    """Prints to `out`; saves file parts under `files`; with `as_json`, prints each result as
    one line of JSON instead (for scripts)."""

    def __init__(self, out: TextIO | None = None, *, files: Path, as_json: bool = False) -> None:
        self.out = out or sys.stdout
        self.files = files
        self.as_json = as_json

    def line(self, text: str) -> None:
        """Print one line (or more): every character the terminal would obey is escaped."""
        print(printable(text), file=self.out, flush=True)

    def json(self, value: Any) -> None:
        """One line of JSON; ASCII only, so no character of the agent's reaches the terminal
        raw (JSON escapes them)."""
        self.line(json.dumps(value))

    # -- results ------------------------------------------------------------------------------

    def response(self, response: dict[str, Any]) -> None:
        """A 1.0 StreamResponse (or SendMessage result): the one member it has."""
        if self.as_json:
            self.json(response)
        elif "task" in response:
            self.task(response["task"])
        elif "message" in response:
            self.message(response["message"])
        elif "statusUpdate" in response:
            self.status(response["statusUpdate"].get("status") or {})
        elif "artifactUpdate" in response:
            update = response["artifactUpdate"]
            self.artifact(update.get("artifact") or {}, chunk=bool(update.get("append")))

    def task(self, task: dict[str, Any], *, history: bool = False) -> None:
        if self.as_json:
            self.json(task)
            return
        self.line(f"task {task.get('id')} (context {task.get('contextId')})")
        if history:
            for message in task.get("history") or []:
                self.message(message)
        for artifact in task.get("artifacts") or []:
            self.artifact(artifact)
        self.status(task.get("status") or {})

    def status(self, status: dict[str, Any]) -> None:
        text = _text_of(status.get("message"))
        state = short_state(status.get("state"))
        self.line(f"[{state}] {text}" if text else f"[{state}]")

    def message(self, message: dict[str, Any]) -> None:
        who = "agent" if message.get("role") == "ROLE_AGENT" else "user"
        for part in message.get("parts") or []:
            self.part(part, f"{who}:")

    def artifact(self, artifact: dict[str, Any], *, chunk: bool = False) -> None:
        name = artifact.get("name") or artifact.get("artifactId") or "artifact"
        label = f"[artifact {name}{' +' if chunk else ''}]"
        for part in artifact.get("parts") or []:
            self.part(part, label, fallback=str(artifact.get("artifactId") or "file"))

    def part(self, part: dict[str, Any], label: str, *, fallback: str = "file") -> None:
        if "text" in part:
            self.line(f"{label} {part['text']}")
        elif "data" in part:
            pretty = json.dumps(part["data"], indent=2, ensure_ascii=False)
            self.line(f"{label}\n{pretty}")
        elif "raw" in part:
            self.line(f"{label} {self.save(part, fallback)}")
        elif "url" in part:
            kind = f" ({part['mediaType']})" if part.get("mediaType") else ""
            self.line(f"{label} file at {part['url']}{kind}")

    def save(self, part: dict[str, Any], fallback: str) -> str:
        """Write a file part's bytes under `files`; what to print about it."""
        try:
            data = base64.b64decode(str(part["raw"]), validate=True)
        except (binascii.Error, ValueError):
            return "a file part whose bytes are not base64 (not saved)"
        self.files.mkdir(parents=True, exist_ok=True)
        name = safe_file_name(part.get("filename"), fallback)
        stem, dot, suffix = name.rpartition(".") if "." in name else (name, "", "")
        for copy in range(MAX_SAME_NAME):
            candidate = name if copy == 0 else f"{stem}-{copy}{dot}{suffix}"
            path = self.files / candidate
            try:
                # "x": never overwrite, and never follow a link someone left under that name.
                with path.open("xb") as file:
                    file.write(data)
            except FileExistsError:
                continue
            return f"saved {path} ({len(data)} bytes)"
        return f"not saved: {MAX_SAME_NAME} files named {name} already in {self.files}"


def _text_of(message: Any) -> str:
    if not isinstance(message, dict):
        return ""
    parts = message.get("parts") or []
    return " ".join(str(p["text"]) for p in parts if isinstance(p, dict) and "text" in p)
