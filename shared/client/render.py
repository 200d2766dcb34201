"""What the CLI prints on stdout: tasks, messages, status and artifact updates and cards,
in A2A 1.0 shapes, as the A2A CLI specification v0.2 has it (its section 11).

`text` (the default): one `Label: value` field per line, the same labels every time; content
a line cannot carry (a text part, a data part as indented JSON) is a block: its `Label:`
line, the content, a blank line (the content's own blank lines written as one space, so
only the closing line is empty). Every task names its `Task ID`, `Context ID` and `State`.
`json`: the protocol's own objects, each on one line (one document, or JSON Lines when
streamed). Everything here comes from the agent, so nothing it sends can move the terminal
(control characters are shown escaped) or write outside the directory the caller named for
file parts (`--files DIR`: names reduced to a safe base name, never overwriting); without
it a file part is described, never written.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sys
from pathlib import Path
from typing import Any, TextIO

from shared.client.shapes import mapping, objects

# C0 and C1 control characters but newline and tab: escape sequences could rewrite the screen.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 100  # characters of a saved file's name
MAX_SAME_NAME = 1000  # numbered copies of one name before giving up


def printable(text: str) -> str:
    """`text` with control characters (escape sequences) shown as \\xNN instead of obeyed."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def short_state(state: object) -> str:
    """`TASK_STATE_INPUT_REQUIRED` -> `INPUT_REQUIRED`: the specification's short form."""
    return str(state or "TASK_STATE_UNSPECIFIED").removeprefix("TASK_STATE_")


def safe_file_name(name: object, fallback: str) -> str:
    """A base name for a file the agent named: no directories, no leading dot, plain ASCII."""
    text = str(name) if isinstance(name, str) and name else fallback
    base = text.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE_NAME.sub("_", base).lstrip(".")[:MAX_NAME]
    return cleaned if cleaned.strip("_") else _UNSAFE_NAME.sub("_", fallback)[:MAX_NAME]


def state_of(item: Any) -> str | None:
    """A task's or status update's state, when the agent sent it as text: anything else
    (a list, an object) is no state, never a crash at a set lookup."""
    state = mapping(mapping(item).get("status")).get("state")
    return state if isinstance(state, str) else None


class Renderer:
    """Prints to `out`: `text` fields and blocks, or (`as_json`) each object as one line of
    JSON; saves file parts under `files` when the caller named a directory."""

    def __init__(
        self,
        out: TextIO | None = None,
        *,
        files: Path | None = None,
        as_json: bool = False,
        verbose: bool = False,
    ) -> None:
        self.out = out or sys.stdout
        self.files = files
        self.as_json = as_json
        self.verbose = verbose

    def json(self, value: Any) -> None:
        """One line of JSON; ASCII only, so no character of the agent's reaches the terminal
        raw (JSON escapes them)."""
        print(json.dumps(value, separators=(",", ":")), file=self.out, flush=True)

    def field(self, label: str, value: object) -> None:
        """`Label: value` on one line: a newline in the value is shown as `\\n`."""
        text = printable(str(value)).replace("\n", "\\n")
        print(f"{label}: {text}", file=self.out, flush=True)

    def block(self, label: str, content: str) -> None:
        """`Label:`, the content, a blank line closing it. A blank line of the content is
        written as one space: only the closing line is empty, so a reader finds the block's
        end, and an agent's text cannot pass lines of its own for fields after it."""
        lines = [line or " " for line in printable(content).split("\n")]
        print(label + ":", *lines, "", sep="\n", file=self.out, flush=True)

    def gap(self) -> None:
        """A blank line between two objects (a stream's events)."""
        print(file=self.out, flush=True)

    # -- results ------------------------------------------------------------------------------

    def response(self, response: dict[str, Any]) -> None:
        """A 1.0 StreamResponse (or SendMessage result): the one member it has."""
        if self.as_json:
            self.json(response)
        elif "task" in response:
            self.task(mapping(response["task"]))
        elif "message" in response:
            self.message(mapping(response["message"]))
        elif "statusUpdate" in response:
            self.status_update(mapping(response["statusUpdate"]))
        elif "artifactUpdate" in response:
            self.artifact_update(mapping(response["artifactUpdate"]))
        else:  # nothing A2A names: shown as it came, never dropped
            self.block("Result", json.dumps(response, ensure_ascii=False))

    def task(self, task: dict[str, Any], *, history: bool = False) -> None:
        if self.as_json:
            self.json(task)
            return
        self._ids(task.get("id"), task.get("contextId"))
        if history or self.verbose:
            for message in objects(task.get("history")):
                self.message(message, ids=False)
        for artifact in objects(task.get("artifacts")):
            self.artifact(artifact)
        self._status(task.get("status"))

    def status_update(self, update: dict[str, Any]) -> None:
        self._ids(update.get("taskId"), update.get("contextId"))
        self._status(update.get("status"))

    def artifact_update(self, update: dict[str, Any]) -> None:
        self._ids(update.get("taskId"), update.get("contextId"))
        self.artifact(mapping(update.get("artifact")))
        if update.get("append"):
            self.field("Append", "true")
        if update.get("lastChunk"):
            self.field("Last Chunk", "true")

    def message(self, message: dict[str, Any], *, ids: bool = True) -> None:
        self.field("Message ID", message.get("messageId"))
        if ids:
            if message.get("taskId"):
                self.field("Task ID", message.get("taskId"))
            self.field("Context ID", message.get("contextId"))
        self.field("Role", "agent" if message.get("role") == "ROLE_AGENT" else "user")
        self._parts(message.get("parts"), "file")

    def artifact(self, artifact: dict[str, Any]) -> None:
        self.field("Artifact ID", artifact.get("artifactId"))
        if artifact.get("name"):
            self.field("Artifact Name", artifact["name"])
        self._parts(artifact.get("parts"), str(artifact.get("artifactId") or "file"))

    def _ids(self, task_id: object, context_id: object) -> None:
        self.field("Task ID", task_id)
        self.field("Context ID", context_id)

    def _status(self, status: object) -> None:
        status = mapping(status)
        self.field("State", short_state(state_of({"status": status})))
        text = text_of(status.get("message"))
        if text:
            self.field("Status Message", text)

    def _parts(self, parts: object, fallback: str) -> None:
        for part in objects(parts):
            self.part(part, fallback)

    def part(self, part: dict[str, Any], fallback: str) -> None:
        """A text part as text, a data part as indented JSON (blocks); a file part by name,
        media type and size, its bytes written only under `files`. Nothing is dropped: an
        unknown part is shown as its JSON."""
        if "text" in part:
            self.block("Text", str(part["text"]))
        elif "data" in part:
            self.block("Data", json.dumps(part["data"], indent=2, ensure_ascii=False))
        elif "raw" in part or "url" in part:
            if part.get("filename"):
                self.field("File Name", part["filename"])
            if part.get("mediaType"):
                self.field("Media Type", part["mediaType"])
            if "url" in part:
                self.field("File URL", part["url"])
            else:
                self._file_bytes(part, fallback)
        else:
            self.block("Part", json.dumps(part, ensure_ascii=False))
        if self.verbose and part.get("metadata"):
            self.block("Part Metadata", json.dumps(part["metadata"], indent=2))

    def _file_bytes(self, part: dict[str, Any], fallback: str) -> None:
        try:
            data = base64.b64decode(str(part["raw"]), validate=True)
        except (binascii.Error, ValueError):
            self.field("Size", "unknown: the bytes are not base64")
            return
        self.field("Size", f"{len(data)} bytes")
        if self.files is not None:
            self.field("Saved To", self.save(data, part.get("filename"), fallback))

    def save(self, data: bytes, filename: object, fallback: str) -> str:
        """Write a file part's bytes under `files`; where, or why not."""
        assert self.files is not None
        self.files.mkdir(parents=True, exist_ok=True)
        name = safe_file_name(filename, fallback)
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
            return str(path)
        return f"not saved: {MAX_SAME_NAME} files named {name} already in {self.files}"


def text_of(message: object) -> str:
    """The text parts of a message, joined."""
    parts = objects(mapping(message).get("parts"))
    return " ".join(str(p["text"]) for p in parts if "text" in p)
