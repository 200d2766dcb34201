"""How much one message, artifact and task history may hold, and the errors that say so.

Every limit is a setting (docs/settings.md, Limits): parts per message or artifact, bytes of
a metadata object's JSON, bytes of a message's and an artifact's JSON, and a task's history in
messages and in bytes. A client's request over a limit is refused with InvalidParamsError naming the
limit and its setting, before anything is stored: the task stays exactly as it was. A
handler's artifact over the limit (ArtifactMeter, chunk by chunk, its appended plain text
joined as the fold joins it) raises LimitExceeded in the handler, and the turn fails the
task with that message; so does any handler output no answer could carry (servable: a value
of the wrong type, NaN, a lone surrogate, data nested too deep: `model_json.owned` refuses
it). Sizes are of the canonical model's UTF-8 JSON
without unset fields (`model_json.encode`: what a store keeps and an answer carries, give or
take the dialect's names).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from shared import json_text, model_json
from shared.errors import InvalidParamsError
from shared.frozen import frozen
from shared.lifecycle import joins
from shared.model import ArtifactUpdate, Message, Task
from shared.model_json import M, Model, Unservable
from shared.ports import StoredTask


@frozen
class Limits:
    """What one message, artifact and task history may hold (the A2A_MAX_* settings)."""

    parts: int = 100  # A2A_MAX_PARTS
    metadata_bytes: int = 64 * 1024  # A2A_MAX_METADATA_BYTES
    # A2A_MAX_MESSAGE_BYTES: a message, or one artifact update; every event then fits one
    # Firestore event document (1 MiB with its envelope), so both backends take what it allows.
    message_bytes: int = 900_000
    artifact_bytes: int = 4 * 1024 * 1024  # A2A_MAX_ARTIFACT_BYTES
    history_messages: int = 500  # A2A_MAX_HISTORY_MESSAGES
    history_bytes: int = 16 * 1024 * 1024  # A2A_MAX_HISTORY_BYTES


DEFAULT_LIMITS = Limits()


class LimitExceeded(Exception):
    """A handler made something larger than a limit allows; the message says which."""


# Compact UTF-8 JSON, as the model's JSON writes a data or metadata value.
_json_text = json_text.encoder(ensure_ascii=False)


def json_bytes(value: Any) -> int:
    """The size of `value` as compact UTF-8 JSON."""
    return len(_json_text(value).encode())


def model_bytes(model: Model) -> int:
    """The size of a model's UTF-8 JSON without its unset (None) fields, as the wire has it."""
    return len(model_json.encode(model))


def servable(model: M) -> tuple[M, int]:
    """A handler's output as the turn keeps it (`model_json.owned`: a copy when it holds
    objects its maker may still change), and its model_bytes. Raises LimitExceeded for what
    no answer could carry (model_json.owned's checks: a value of the wrong type, NaN or
    Infinity, a lone UTF-16 surrogate, data nested too deep): stored, it would fail every
    later answer about its task. The message names the field and the problem."""
    try:
        owned, data = model_json.owned(model)
    except Unservable as exc:
        raise LimitExceeded(f"The agent made output that cannot be sent as JSON: {exc}.") from None
    return owned, len(data)


def check_parts(count: int, limits: Limits, field: str) -> None:
    """Checked on the raw list, before its parts are read: reading costs memory per part."""
    if count > limits.parts:
        raise InvalidParamsError(
            f"'{field}' has {count} parts; the limit is {limits.parts} (A2A_MAX_PARTS): "
            "send fewer, larger parts, or several messages",
            field=field,
        )


def check_metadata(value: dict[str, Any] | None, limits: Limits, field: str) -> None:
    if value is None:
        return
    size = json_bytes(value)
    if size > limits.metadata_bytes:
        raise InvalidParamsError(
            f"'{field}' has {size} bytes of JSON; the limit is {limits.metadata_bytes} "
            "(A2A_MAX_METADATA_BYTES)",
            field=field,
        )


def check_message(message: Message, limits: Limits, field: str) -> None:
    """A client's message: its parts, its and its parts' metadata, and its size."""
    check_parts(len(message.parts), limits, f"{field}.parts")
    size = model_bytes(message)
    # The message's JSON holds each metadata object's, written alike: while it fits the
    # metadata limit, so does each of them, and none is measured.
    if size > limits.metadata_bytes:
        check_metadata(message.metadata, limits, f"{field}.metadata")
        for i, part in enumerate(message.parts):
            check_metadata(part.metadata, limits, f"{field}.parts[{i}].metadata")
    if size > limits.message_bytes:
        raise InvalidParamsError(
            f"'{field}' has {size} bytes of JSON; the limit is {limits.message_bytes} "
            "(A2A_MAX_MESSAGE_BYTES): send large content as a file part by URL",
            field=field,
        )


def check_history(stored: StoredTask, message: Message, limits: Limits) -> None:
    """Refuse a message that would take the stored task's history past a limit. The JSON the
    store holds the task in (`stored.size`) holds each message of the history whole: while it
    and the new message fit A2A_MAX_HISTORY_BYTES, none of them is measured."""
    task = stored.task
    count = len(task.history) + 1
    if count > limits.history_messages:
        raise InvalidParamsError(
            f"task {task.id} has {len(task.history)} messages in its history; the limit is "
            f"{limits.history_messages} (A2A_MAX_HISTORY_MESSAGES): send the message without "
            "a taskId (same contextId) to go on in a new task",
            field="task_id",
        )
    added = model_bytes(message)
    if stored.size is not None and stored.size + added <= limits.history_bytes:
        return  # the history is within its stored JSON: nothing more to measure
    size = sum(model_bytes(m) for m in task.history) + added
    if size > limits.history_bytes:
        raise InvalidParamsError(
            f"task {task.id}'s history would hold {size} bytes of JSON; the limit is "
            f"{limits.history_bytes} (A2A_MAX_HISTORY_BYTES): send the message without a "
            "taskId (same contextId) to go on in a new task",
            field="task_id",
        )


class ArtifactMeter:
    """A turn's artifacts measured chunk by chunk, so that a handler streaming many chunks
    costs no re-serialization of the whole artifact per chunk. An artifact's parts are
    counted as the fold keeps them (`lifecycle.appended`: a chunk of plain text joins the
    artifact's last text part, so a streamed answer is one part however many chunks made
    it). Its size is the sum of its updates' JSON, a joined text counting only its own
    characters' JSON (so the bytes are the stored artifact's, give or take a chunk's
    envelope when one of several parts or not joining)."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._measured: dict[str, int] = {}  # artifact id -> bytes

    def add(self, update: ArtifactUpdate, task: Task) -> tuple[ArtifactUpdate, int]:
        """Count a handler's `update` against its artifact as `task` (before it) holds it:
        the update as the turn keeps it (`servable`), and the bytes of its chunk. Raises
        LimitExceeded, and then counts nothing."""
        # First: its fields are then of their types. The chunk is the artifact (the update's
        # ids are the turn's own), and of the rest the handler chose only the flags.
        artifact, chunk = servable(update.artifact)
        if type(update.append) is not bool or type(update.last_chunk) is not bool:
            servable(update)  # raises, naming the flag
        if artifact is not update.artifact:
            update = replace(update, artifact=artifact)
        if chunk > self._limits.message_bytes:
            raise LimitExceeded(
                f"The agent made an artifact update of {chunk} bytes; the limit for one update "
                f"is {self._limits.message_bytes} (A2A_MAX_MESSAGE_BYTES): send it in chunks "
                "(ctx.artifact(..., append=True))."
            )
        artifact_id = artifact.artifact_id
        earlier = None
        if update.append:
            earlier = next((a for a in task.artifacts if a.artifact_id == artifact_id), None)
        parts, size = len(artifact.parts), chunk
        if earlier is not None:
            if artifact_id not in self._measured:  # made by an earlier turn: measured once
                self._measured[artifact_id] = model_bytes(earlier)
            parts += len(earlier.parts)
            added = chunk
            if earlier.parts and artifact.parts and joins(earlier.parts[-1], artifact.parts[0]):
                parts -= 1
                if len(artifact.parts) == 1:  # the usual chunk: its text's JSON, unquoted
                    added = json_bytes(artifact.parts[0].text) - 2
            size = self._measured[artifact_id] + added
        if parts > self._limits.parts:
            raise LimitExceeded(
                f"The agent made an artifact with {parts} parts; the limit is "
                f"{self._limits.parts} (A2A_MAX_PARTS): appended plain text joins the "
                "artifact's last text part, every other part (data, a file, text with "
                "metadata) counts one; send fewer, larger parts."
            )
        if size > self._limits.artifact_bytes:
            raise LimitExceeded(
                f"The agent made an artifact of about {size} bytes; the limit is "
                f"{self._limits.artifact_bytes} (A2A_MAX_ARTIFACT_BYTES)."
            )
        self._measured[artifact_id] = size
        return update, chunk


# -- A push config's fields (fixed limits, docs/settings.md, "Limits") -----------------------------
# What one config may hold, checked where a request is decoded (shared.dialects.decode): each
# event of its task is posted with them, they are kept as long as the task, and the URL and
# the secrets end up in an HTTP request line and headers, where a control character would
# start another header or line (and http.client refuses what is not ASCII, or latin-1 in
# a header, after the config was accepted).
MAX_PUSH_URL_CHARS = 2048  # the longest URL every proxy and server takes
MAX_PUSH_SECRET_BYTES = 4096  # a token or credentials: a JWT or an API key fits
MAX_PUSH_SCHEMES = 8  # schemes of one config's authentication (v0.x lists them)
MAX_PUSH_SCHEME_CHARS = 64  # one scheme's name (`Bearer`, `Basic`)
_URL_TEXT = re.compile(r"[!-~]*")  # printable ASCII, no space
_HEADER_TEXT = re.compile(r"[ -~]*")  # printable ASCII and the space


def check_push_url_text(url: str, field: str) -> None:
    """A push config's URL: at most MAX_PUSH_URL_CHARS of printable ASCII (a URI's own
    characters; an IRI is sent percent-encoded, its host in punycode)."""
    if len(url) > MAX_PUSH_URL_CHARS:
        raise InvalidParamsError(
            f"'{field}' is {len(url)} characters, the limit {MAX_PUSH_URL_CHARS}",
            field=field,
            metadata={"limit": str(MAX_PUSH_URL_CHARS)},
        )
    if not _URL_TEXT.fullmatch(url):
        raise InvalidParamsError(
            f"'{field}' holds a space, a control character or a character outside ASCII: "
            "send the URL percent-encoded (RFC 3986), its host in punycode",
            field=field,
        )


def check_push_secret(value: str, field: str, *, limit: int = MAX_PUSH_SECRET_BYTES) -> None:
    """A push config's token, credentials or scheme: sent as an HTTP header value, so
    printable ASCII (spaces allowed), at most `limit` bytes."""
    if len(value) > limit:  # ASCII, when it passes below: one byte a character
        raise InvalidParamsError(
            f"'{field}' is longer than {limit} bytes, the limit",
            field=field,
            metadata={"limit": str(limit)},
        )
    if not _HEADER_TEXT.fullmatch(value):
        raise InvalidParamsError(
            f"'{field}' holds a control character or a character outside ASCII: it is sent as "
            "an HTTP header value (encode it, e.g. base64)",
            field=field,
        )
