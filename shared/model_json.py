"""The model's own JSON: how the stores keep tasks, events and push configs, and what the
limits measure.

`encode` makes compact UTF-8 JSON of any model class: Python field names, fields that are
None left out, datetimes in ISO 8601 (`Z` for UTC), enums as their values. It is also the
check of what a handler made (`limits.servable` runs it on every event before the turn
applies it): it refuses, with `Unservable` naming the field and the problem, what no answer
could carry — a value of the wrong type in a typed field, NaN or Infinity, a lone UTF-16
surrogate, a value JSON has no form for (a set, bytes, an object); `owned`, the check a turn
makes, also refuses data or metadata nested deeper than MAX_DEPTH (the front door does for a
client's). A stored value was encoded here, so every later answer can serve it.

One way to write a model: its fields are walked into a dict of JSON-ready values, each
checked against its type (`to_dict`), and the dict is written by one compact encoder
(`shared.json_text`); the walk that names what JSON could not carry, and where, runs only
when writing fails.

`decode` and `from_dict` read back what `encode` wrote, and what the pydantic models wrote
before it (`model_dump_json`: the same names, with `null` fields; a deployed project's
Firestore documents hold it): a field that is null or absent takes its default. They check
nothing: what they read was checked when it was written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar, cast

from shared import json_text
from shared.model import (
    Artifact,
    ArtifactUpdate,
    Message,
    Part,
    PushAuthentication,
    PushConfig,
    Role,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
)

# The nesting a data or metadata value may have: a request body may nest 64 levels in all
# (json_body.py), so any value a client sent fits; a document holding one stays far
# below the recursion limit of every reader and writer of JSON (1000).
MAX_DEPTH = 64


# Any model class, for the functions that take any (Model) or return the class asked (M).
Model = (
    Part
    | Message
    | TaskStatus
    | Artifact
    | Task
    | StatusUpdate
    | ArtifactUpdate
    | PushAuthentication
    | PushConfig
)
M = TypeVar("M", bound=Model)


# Compact JSON, NaN refused, UTF-8 (not ASCII-escaped).
_json_text = json_text.encoder(ensure_ascii=False, allow_nan=False)


class Unservable(ValueError):
    """A model holds what JSON cannot carry; the message names the field and the problem."""


class _Fault(Exception):
    """Raised inside `_dict`: the problem, and the path to it, innermost first."""

    def __init__(self, problem: str, *path: str) -> None:
        self.problem = problem
        self.path = list(path)


# -- encoding ----------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    return type(value).__name__


# Each field's check: (value, its class for models and enums, the field, the nested values
# found) -> the JSON-ready value. Raises _Fault.
_Check = Callable[[Any, Any, str, list[tuple[str, Any]]], Any]


def _str(value: Any, cls: None, name: str, nested: list[tuple[str, Any]]) -> str:
    if not isinstance(value, str):
        raise _Fault(f"{_type_name(value)}, not a string", name)
    return value


def _bool(value: Any, cls: None, name: str, nested: list[tuple[str, Any]]) -> bool:
    if type(value) is not bool:
        raise _Fault(f"{value!r:.80}, not true or false", name)
    return value


def _strs(value: Any, cls: None, name: str, nested: list[tuple[str, Any]]) -> list[str]:
    if not isinstance(value, tuple | list) or not all(isinstance(v, str) for v in value):
        raise _Fault(f"{value!r:.80}, not a sequence of strings", name)
    return list(value)


def _json(value: Any, cls: None, name: str, nested: list[tuple[str, Any]]) -> Any:
    # Any JSON value: what JSON cannot carry is found when it is written (_fault_in).
    if isinstance(value, dict | list | tuple):
        nested.append((name, value))
    return value


def _object(value: Any, cls: None, name: str, nested: list[tuple[str, Any]]) -> dict[str, Any]:
    if type(value) is not dict:
        raise _Fault(f"{_type_name(value)}, not an object (a dict)", name)
    for key in value:
        if type(key) is not str:
            raise _Fault(f"an object with the key {key!r:.80}: its keys must be strings", name)
    nested.append((name, value))
    return value


def _time(value: Any, cls: None, name: str, nested: list[tuple[str, Any]]) -> str:
    if not isinstance(value, datetime):
        raise _Fault(f"{_type_name(value)}, not a datetime", name)
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text  # as pydantic wrote UTC


def _enum(value: Any, cls: type[Enum], name: str, nested: list[tuple[str, Any]]) -> Any:
    if not isinstance(value, cls):
        raise _Fault(f"{value!r:.80}, not a {cls.__name__}", name)
    return value.value


def _model(value: Any, cls: type, name: str, nested: list[tuple[str, Any]]) -> dict[str, Any]:
    if type(value) is not cls:
        raise _Fault(f"{_type_name(value)}, not a {cls.__name__}", name)
    try:
        return _dict(value, nested)
    except _Fault as fault:
        fault.path.append(name)
        raise


def _models(
    value: Any, cls: type, name: str, nested: list[tuple[str, Any]]
) -> list[dict[str, Any]]:
    if not isinstance(value, tuple | list):
        raise _Fault(f"{_type_name(value)}, not a sequence of {cls.__name__}", name)
    return _items(value, cls, name, nested)


def _items(
    value: tuple[Any, ...] | list[Any], cls: type, name: str, nested: list[tuple[str, Any]]
) -> list[dict[str, Any]]:
    """A sequence of models, each checked to be of `cls`."""
    items = []
    for index, item in enumerate(value):
        if type(item) is not cls:
            raise _Fault(f"{_type_name(item)}, not a {cls.__name__}", str(index), name)
        try:
            items.append(_dict(item, nested))
        except _Fault as fault:
            fault.path += (str(index), name)
            raise
    return items


# What each field may hold: (field, its check, the class a model or enum check takes, whether
# it is required: None there is refused, elsewhere it is left out).
_SPECS: dict[type, tuple[tuple[str, _Check, Any, bool], ...]] = {
    Part: (
        ("text", _str, None, False),
        ("raw", _str, None, False),
        ("url", _str, None, False),
        ("data", _json, None, False),
        ("filename", _str, None, False),
        ("media_type", _str, None, False),
        ("metadata", _object, None, False),
    ),
    Message: (
        ("message_id", _str, None, True),
        ("role", _enum, Role, True),
        ("parts", _models, Part, True),
        ("context_id", _str, None, False),
        ("task_id", _str, None, False),
        ("reference_task_ids", _strs, None, True),
        ("extensions", _strs, None, True),
        ("metadata", _object, None, False),
    ),
    TaskStatus: (
        ("state", _enum, TaskState, True),
        ("message", _model, Message, False),
        ("timestamp", _time, None, True),
    ),
    Artifact: (
        ("artifact_id", _str, None, True),
        ("parts", _models, Part, True),
        ("name", _str, None, False),
        ("description", _str, None, False),
        ("extensions", _strs, None, True),
        ("metadata", _object, None, False),
    ),
    Task: (
        ("id", _str, None, True),
        ("context_id", _str, None, True),
        ("status", _model, TaskStatus, True),
        ("history", _models, Message, True),
        ("artifacts", _models, Artifact, True),
        ("metadata", _object, None, False),
    ),
    StatusUpdate: (
        ("task_id", _str, None, True),
        ("context_id", _str, None, True),
        ("status", _model, TaskStatus, True),
        ("metadata", _object, None, False),
    ),
    ArtifactUpdate: (
        ("task_id", _str, None, True),
        ("context_id", _str, None, True),
        ("artifact", _model, Artifact, True),
        ("append", _bool, None, True),
        ("last_chunk", _bool, None, True),
        ("metadata", _object, None, False),
    ),
    PushAuthentication: (
        ("schemes", _strs, None, True),
        ("credentials", _str, None, False),
    ),
    PushConfig: (
        ("id", _str, None, True),
        ("task_id", _str, None, True),
        ("url", _str, None, True),
        ("token", _str, None, False),
        ("authentication", _model, PushAuthentication, False),
    ),
}


def _dict(model: Any, nested: list[tuple[str, Any]]) -> dict[str, Any]:
    """The model's fields as JSON-ready values, each checked against its type; the data and
    metadata values that are objects or arrays are added to `nested` (for the depth check,
    and `owned`'s copy)."""
    out: dict[str, Any] = {}
    for name, check, cls, required in _SPECS[type(model)]:
        value = getattr(model, name)
        if value is None:
            if required:
                raise _Fault("missing (None)", name)
        # The common cases without a call to their check (a send walks ~30 models).
        elif check is _str and isinstance(value, str):
            out[name] = value
        elif check is _models and type(value) is tuple:
            out[name] = _items(value, cls, name, nested)
        elif check is _enum and type(value) is cls:
            out[name] = value.value
        elif check is _strs and type(value) is tuple and not value:
            out[name] = []
        else:
            out[name] = check(value, cls, name, nested)
    return out


def to_dict(model: Model) -> dict[str, Any]:
    """The model as JSON-ready values, fields that are None left out, each field's type
    checked (raises Unservable); what JSON cannot carry inside data and metadata is found only
    when it is written (encode)."""
    return _fields(model, [])


def encode(model: Model) -> bytes:
    """Compact UTF-8 JSON of the model, fields that are None left out; raises Unservable for
    what JSON cannot carry (the message names the field). Data nested too deep to write at
    all is refused too; MAX_DEPTH is `owned`'s check, made once where a value enters (a
    client's by the front door): a store writing a task again walks none of its data."""
    return _encoded(model, [])[1]


def owned(model: M) -> tuple[M, bytes]:
    """A handler's output as its maker can no longer change it, and its JSON (encode's,
    checked as encode checks it, and its data and metadata no deeper than MAX_DEPTH). A
    model holding data or metadata objects is read back from that JSON, a copy: its maker may
    still change its own objects after handing them over (reusing a dict in a loop, say), and
    the turn keeps what was checked."""
    nested: list[tuple[str, Any]] = []
    text, data = _encoded(model, nested)
    # A document with fewer brackets than the limit has no value nested deeper (most events).
    if text.count("[") + text.count("{") > MAX_DEPTH:
        for name, found in nested:
            if _too_deep(found, MAX_DEPTH):
                raise Unservable(
                    f"{type(model).__name__} holds {name} nested deeper than {MAX_DEPTH} "
                    "levels of objects and arrays: flatten it"
                )
    if not nested:  # nothing its maker could change: the model and its parts are the turn's
        return model, data
    return decode(type(model), data), data  # the turn's own: its parts are the copy's


def detached(model: M) -> M:
    """The model as its reader may change nothing of it: the model itself when it holds no
    data or metadata object or array (its classes are frozen and its other values immutable),
    else a copy whose objects and arrays are new, and whose models holding none are shared. A
    handler reads its task's messages and artifacts so: changing what it reads changes nothing
    stored or served. For a model that was checked (`owned`) or read back (`decode`): its
    data holds JSON values only, which the copy holds alike (what decode(encode(model))
    would, without writing and reading JSON)."""
    copy: M = _detached(model)
    return copy


def _detached(model: Any) -> Any:
    changed: dict[str, Any] = {}
    for name, check in _MAY_HOLD_CONTAINERS[type(model)]:
        value = getattr(model, name)
        if value is None:
            continue
        if check is _model:
            copy = _detached(value)
        elif check is _models:
            items = tuple(map(_detached, value))
            copy = value if all(a is b for a, b in zip(items, value, strict=True)) else items
        elif isinstance(value, dict | list | tuple):
            copy = _copied(value)
        else:
            continue
        if copy is not value:
            changed[name] = copy
    return replace(model, **changed) if changed else model


def _copied(value: Any) -> Any:
    """A JSON value with new objects and arrays (arrays as lists, as JSON reads them back)."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copied(item) for item in value]
    return value


# Per class: the fields that may hold a data or metadata object or array (its own, or a
# nested model's), and their checks.
_MAY_HOLD_CONTAINERS: dict[type, tuple[tuple[str, _Check], ...]] = {
    cls: tuple(
        (name, check) for name, check, _, _ in spec if check in (_json, _object, _model, _models)
    )
    for cls, spec in _SPECS.items()
}


def _fields(model: Model, nested: list[tuple[str, Any]]) -> dict[str, Any]:
    if type(model) not in _SPECS:
        raise Unservable(f"{_type_name(model)} is not a model class")
    try:
        return _dict(model, nested)
    except _Fault as fault:
        raise Unservable(_where(model, fault.path) + f" is {fault.problem}") from None


def _encoded(model: Model, nested: list[tuple[str, Any]]) -> tuple[str, bytes]:
    """The model's JSON as text and as UTF-8, its dict written in one go; adds its data and
    metadata values that are objects or arrays to `nested`. Raises Unservable for what JSON
    cannot carry (the walk that finds what and where runs only then)."""
    value = _fields(model, nested)
    try:
        text = _json_text(value)
        return text, text.encode()
    except (ValueError, TypeError, RecursionError, UnicodeEncodeError):
        raise Unservable(_fault_in(model, value)) from None


# Levels of the model's own objects and arrays above a data value (task, history, message,
# parts, part): the walk of a document that failed to encode allows them beside MAX_DEPTH.
_MODEL_DEPTH = 8


def _too_deep(value: Any, levels: int) -> bool:
    """Whether the JSON value nests more than `levels` containers (recursion bounded by it)."""
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, list | tuple):
        return False
    if levels == 0:
        return True
    return any(_too_deep(item, levels - 1) for item in value)


def _where(model: Any, path: list[str]) -> str:
    """`Task.history[0].parts[1].text` from a path innermost first."""
    where = type(model).__name__
    for step in reversed(path):
        where += f"[{step}]" if step.isdigit() else f".{step}"
    return where


def _fault_in(model: Any, value: dict[str, Any]) -> str:
    """What made the encoder fail, and where (the error path only: it walks the value)."""
    stack: list[tuple[str, Any, int]] = [(type(model).__name__, value, 0)]
    while stack:
        path, item, depth = stack.pop()
        where = path if len(path) <= 160 else path[:80] + "..." + path[-77:]
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{where} is {item!r}, which JSON has no form for: send a finite number"
            continue
        if isinstance(item, str):
            try:
                item.encode()
            except UnicodeEncodeError:
                return (
                    f"{where} holds a lone UTF-16 surrogate (\\ud800-\\udfff without its pair), "
                    "which is no character: send valid Unicode"
                )
            continue
        if isinstance(item, int) and not isinstance(item, bool):
            try:
                str(item)
            except ValueError:
                return f"{where} is an integer too long to write as JSON: send it as a string"
            continue
        if item is None or isinstance(item, bool):
            continue
        if depth > MAX_DEPTH + _MODEL_DEPTH:
            return f"{where} nests deeper than {MAX_DEPTH} levels of objects and arrays: flatten it"
        if isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str | int | float | bool) and key is not None:
                    return f"{where} has a key of type {_type_name(key)}: keys must be strings"
                step = f".{key}" if isinstance(key, str) and key.isidentifier() else f"[{key!r}]"
                stack.append((path + step, inner, depth + 1))
                if isinstance(key, str):
                    stack.append((f"{path} (a key)", key, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((f"{path}[{i}]", inner, depth + 1) for i, inner in enumerate(item))
        else:
            return (
                f"{where} is a {_type_name(item)}, which JSON cannot carry: convert it to a "
                "string, number, list or object"
            )
    return f"{type(model).__name__} cannot be written as JSON"


# -- decoding ----------------------------------------------------------------------------------


def _part(d: Mapping[str, Any]) -> Part:
    get = d.get
    return Part(
        text=get("text"),
        raw=get("raw"),
        url=get("url"),
        data=get("data"),
        filename=get("filename"),
        media_type=get("media_type"),
        metadata=get("metadata"),
    )


def _message(d: Mapping[str, Any]) -> Message:
    get = d.get
    return Message(
        message_id=d["message_id"],
        role=Role(d["role"]),
        parts=tuple(map(_part, d["parts"])),
        context_id=get("context_id"),
        task_id=get("task_id"),
        reference_task_ids=tuple(get("reference_task_ids") or ()),
        extensions=tuple(get("extensions") or ()),
        metadata=get("metadata"),
    )


def _status(d: Mapping[str, Any]) -> TaskStatus:
    message = d.get("message")
    return TaskStatus(
        state=TaskState(d["state"]),
        message=None if message is None else _message(message),
        timestamp=datetime.fromisoformat(d["timestamp"]),
    )


def _artifact(d: Mapping[str, Any]) -> Artifact:
    get = d.get
    return Artifact(
        artifact_id=d["artifact_id"],
        parts=tuple(map(_part, d["parts"])),
        name=get("name"),
        description=get("description"),
        extensions=tuple(get("extensions") or ()),
        metadata=get("metadata"),
    )


def _task(d: Mapping[str, Any]) -> Task:
    get = d.get
    return Task(
        id=d["id"],
        context_id=d["context_id"],
        status=_status(d["status"]),
        history=tuple(map(_message, get("history") or ())),
        artifacts=tuple(map(_artifact, get("artifacts") or ())),
        metadata=get("metadata"),
    )


def _status_update(d: Mapping[str, Any]) -> StatusUpdate:
    return StatusUpdate(
        task_id=d["task_id"],
        context_id=d["context_id"],
        status=_status(d["status"]),
        metadata=d.get("metadata"),
    )


def _artifact_update(d: Mapping[str, Any]) -> ArtifactUpdate:
    get = d.get
    return ArtifactUpdate(
        task_id=d["task_id"],
        context_id=d["context_id"],
        artifact=_artifact(d["artifact"]),
        append=bool(get("append")),
        last_chunk=bool(get("last_chunk")),
        metadata=get("metadata"),
    )


def _authentication(d: Mapping[str, Any]) -> PushAuthentication:
    return PushAuthentication(schemes=tuple(d["schemes"]), credentials=d.get("credentials"))


def _push_config(d: Mapping[str, Any]) -> PushConfig:
    authentication = d.get("authentication")
    return PushConfig(
        id=d["id"],
        task_id=d["task_id"],
        url=d["url"],
        token=d.get("token"),
        authentication=None if authentication is None else _authentication(authentication),
    )


_READERS: dict[type, Callable[[Mapping[str, Any]], Any]] = {
    Part: _part,
    Message: _message,
    TaskStatus: _status,
    Artifact: _artifact,
    Task: _task,
    StatusUpdate: _status_update,
    ArtifactUpdate: _artifact_update,
    PushAuthentication: _authentication,
    PushConfig: _push_config,
}


def from_dict(cls: type[M], value: Mapping[str, Any]) -> M:
    """The model of class `cls` that `value` (what to_dict made, or JSON read back) holds."""
    return cast(M, _READERS[cls](value))


def decode(cls: type[M], data: bytes | str) -> M:
    """The model of class `cls` that `data` (what encode or pydantic wrote) holds."""
    return from_dict(cls, json.loads(data))
