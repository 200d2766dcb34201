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

Each model is encoded once per send, though a send's task, events, limits and stores all ask
for it: a model's JSON is composed of its own fields' and its nested models' JSON, and the
texts made lately are kept by the identity of their models (`shared.recent`), so the task
composes from its status, messages and artifacts already encoded as events (or the other way
round). A model is frozen, and `owned` made the turn its own copy of a handler's nested data:
the same object always has the same JSON. A document larger than _LARGEST, or one a check
refuses, is written by the walk of its whole dict instead, as before.

`decode` and `from_dict` read back what `encode` wrote, and what the pydantic models wrote
before it (`model_dump_json`: the same names, with `null` fields; a deployed project's
Firestore documents hold it): a field that is null or absent takes its default. They check
nothing: what they read was checked when it was written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from json.encoder import encode_basestring
from operator import attrgetter
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
from shared.recent import Recent

# The nesting a data or metadata value may have: a request body may nest 64 levels in all
# (bindings/body.py), so any value a client sent fits; a document holding one stays far
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
        elif check is _str and isinstance(value, str):  # most fields: no call
            out[name] = value
        else:
            out[name] = check(value, cls, name, nested)
    return out


# -- the composed text, and the texts made lately -----------------------------------------------

# The kinds of fields the composer writes itself (the checks above stay the dict walk's, which
# to_dict and the refusals' messages take); any other is written as its check returns it.
_STR, _TEXT_ENUM, _TIME, _STRS, _MODEL, _MODELS, _VALUE, _BOOL, _OTHER = range(9)


def _kind(check: _Check, of: Any) -> int:
    if check is _enum:
        # A str enum's member is its value's text: written without reading `.value`.
        return _TEXT_ENUM if issubclass(of, str) else _OTHER
    kinds = {
        _str: _STR,
        _time: _TIME,
        _strs: _STRS,
        _model: _MODEL,
        _models: _MODELS,
        _bool: _BOOL,
    }
    return _VALUE if check in (_json, _object) else kinds.get(check, _OTHER)


# Per class: its fields' values in one call, and per field (its name, its kind, its check, the
# class a check takes, whether it is required, `"field":`).
_Field = tuple[str, int, _Check, Any, bool, str]
_LAYOUT: dict[type, tuple[Callable[[Any], tuple[Any, ...]], tuple[_Field, ...]]] = {
    cls: (
        attrgetter(*(name for name, *_ in spec)),
        tuple(
            (name, _kind(check, of), check, of, required, f'"{name}":')
            for name, check, of, required in spec
        ),
    )
    for cls, spec in _SPECS.items()
}
# A data or metadata value whose JSON may nest this deep is left to the walk of the whole
# document, which refuses what is too deep to write at all exactly as it always did.
_DEEP = 512
# The largest JSON composed (and kept): a larger document is written by the walk of its
# dict in one go, as a copy per level of nesting would add to the peak of a large request.
_LARGEST = 64 * 1024


class _Refused(Exception):
    """The composer leaves the document to the walk of its whole dict: a check refused a
    value (the walk names it), or the document is larger than _LARGEST (the walk writes it in
    one go, where composing would copy it once per level)."""


# A class's composer: (model, nested, made, recent) -> the model's JSON text, as
# _json_text(_dict(model)) writes it, composed field by field; each model composed is added
# to `made`, its data and metadata containers to `nested`. With `recent`, a model encoded
# lately is not walked again. Raises _Refused, or the encoder's ValueError, TypeError or
# RecursionError, for what the dict walk refuses.
_Composer = Callable[[Any, list[tuple[str, Any]], list[tuple[Any, str]], bool], str]


def _composer(cls: type) -> _Composer:
    """The composer of one class, its fields written out one by one, each as its kind needs
    (a loop over the fields, asking each its kind, took a send a good part of its JSON's
    time)."""
    env: dict[str, Any] = {
        "_Refused": _Refused,
        "_LARGEST": _LARGEST,
        "_COMPOSERS": _COMPOSERS,
        "encode_basestring": encode_basestring,
        "_checked_text": _checked_text,
        "_recent": _RECENT.get,
        "datetime": datetime,
    }
    lines = [
        "def text(model, nested, made, recent):",
        "    if recent:",
        "        known = _recent(model)",
        "        if known is not None:",
        "            return known",
        "    pieces = []",
    ]
    for number, field in enumerate(_LAYOUT[cls][1]):
        name, kind, _, of, required, key = field
        env[f"field{number}"], env[f"key{number}"], env[f"of{number}"] = field, key, of
        lines += [f"    value = model.{name}", "    if value is None:"]
        lines.append("        raise _Refused" if required else "        pass")
        if kind == _STR:
            lines += [
                "    elif not isinstance(value, str) or len(value) > _LARGEST:",
                "        raise _Refused",
                "    else:",
                f"        pieces.append(key{number} + encode_basestring(value))",
            ]
        elif kind == _MODELS:
            lines += [
                "    elif not isinstance(value, tuple | list):",
                "        raise _Refused",
                "    else:",
                f"        compose = _COMPOSERS[of{number}]",
                "        items, size = [], 0",
                "        for item in value:",
                f"            if type(item) is not of{number}:",
                "                raise _Refused",
                "            items.append(text := compose(item, nested, made, recent))",
                "            size += len(text)",
                "            if size > _LARGEST:",
                "                raise _Refused",
                f"        pieces.append(key{number} + '[' + ','.join(items) + ']')",
            ]
        elif kind == _MODEL:
            lines += [
                f"    elif type(value) is not of{number}:",
                "        raise _Refused",
                "    else:",
                f"        compose = _COMPOSERS[of{number}]",
                f"        pieces.append(key{number} + compose(value, nested, made, recent))",
            ]
        elif kind == _TEXT_ENUM:
            lines += [
                f"    elif not isinstance(value, of{number}):",
                "        raise _Refused",
                "    else:",
                f"        pieces.append(key{number} + encode_basestring(value))",
            ]
        elif kind == _STRS:
            lines += [
                "    elif not value and isinstance(value, tuple | list):",
                f"        pieces.append(key{number} + '[]')",
                "    else:",
                f"        pieces.append(key{number} + _checked_text(value, field{number}, nested))",
            ]
        elif kind == _BOOL:
            lines += [
                "    elif value is True:",
                f"        pieces.append(key{number} + 'true')",
                "    elif value is False:",
                f"        pieces.append(key{number} + 'false')",
                "    else:",
                f"        pieces.append(key{number} + _checked_text(value, field{number}, nested))",
            ]
        elif kind == _TIME:
            # A datetime's ISO text needs no escaping (a subclass's might: it is checked).
            lines += [
                "    elif type(value) is datetime:",
                "        text = value.isoformat()",
                "        if text.endswith('+00:00'):",
                "            text = text[:-6] + 'Z'",
                f"        pieces.append(key{number} + '\"' + text + '\"')",
                "    else:",
                f"        pieces.append(key{number} + _checked_text(value, field{number}, nested))",
            ]
        else:
            lines += [
                "    else:",
                f"        pieces.append(key{number} + _checked_text(value, field{number}, nested))",
            ]
    lines += [
        "    text = '{' + ','.join(pieces) + '}'",
        "    if len(text) > _LARGEST:",
        "        raise _Refused",
        "    made.append((model, text))",
        "    return text",
    ]
    # Our own text, made of the field names above; named so a traceback names the class.
    exec(compile("\n".join(lines), f"<model_json composer of {cls.__name__}>", "exec"), env)
    composer: _Composer = env["text"]
    return composer


def _checked_text(value: Any, field: _Field, nested: list[tuple[str, Any]]) -> str:
    """A field's JSON as the dict walk checks it: data and metadata, times, lists of strings."""
    name, kind, check, of, _, _ = field
    try:
        checked = check(value, of, name, nested)
    except _Fault:
        raise _Refused from None
    if kind == _TIME:
        return encode_basestring(checked)
    text = _json_text(checked)
    if kind == _VALUE and (
        len(text) > _LARGEST or (len(text) >= _DEEP and text.count("[") + text.count("{") >= _DEEP)
    ):
        raise _Refused
    return text


# A send makes ~11 texts: the sends of 16 clients in flight fit in one generation.
_RECENT: Recent[str] = Recent(entries=256, weight=256 * 1024, weigh=len)
# Each class's composer, made once (filled in after the table exists: a composer calls its
# nested classes' through it).
_COMPOSERS: dict[type, _Composer] = {}
_COMPOSERS.update({cls: _composer(cls) for cls in _LAYOUT})


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
    made: list[tuple[Any, str]] = []
    data = _encoded(model, [], made, recent=True)[1]
    _RECENT.add(made)
    return data


def owned(model: M) -> tuple[M, bytes]:
    """A handler's output as its maker can no longer change it, and its JSON (encode's,
    checked as encode checks it, and its data and metadata no deeper than MAX_DEPTH). A
    model holding data or metadata objects is read back from that JSON, a copy: its maker may
    still change its own objects after handing them over (reusing a dict in a loop, say), and
    the turn keeps what was checked."""
    nested: list[tuple[str, Any]] = []
    made: list[tuple[Any, str]] = []
    # Walked whole, whatever was encoded lately: the check, and the data to copy, are found.
    text, data = _encoded(model, nested, made, recent=False)
    # A document with fewer brackets than the limit has no value nested deeper (most events).
    if text.count("[") + text.count("{") > MAX_DEPTH:
        for name, found in nested:
            if _too_deep(found, MAX_DEPTH):
                raise Unservable(
                    f"{type(model).__name__} holds {name} nested deeper than {MAX_DEPTH} "
                    "levels of objects and arrays: flatten it"
                )
    if not nested:  # nothing its maker could change: the model and its parts are the turn's
        _RECENT.add(made)
        return model, data
    copy = decode(type(model), data)  # the turn's own: its parts are the copy's, not these
    _RECENT.add([(copy, text)])
    return copy, data


def detached(model: M) -> M:
    """The model as its reader may change nothing of it: the model itself when it holds no
    data or metadata object or array (its classes are frozen and its other values immutable),
    else a copy read back from its JSON. A handler reads its task's messages and artifacts
    so: changing what it reads changes nothing stored or served."""
    return decode(type(model), encode(model)) if _holds_containers(model) else model


def _holds_containers(model: Any) -> bool:
    for name, check in _MAY_HOLD_CONTAINERS[type(model)]:
        value = getattr(model, name)
        if value is None:
            continue
        if check is _json or check is _object:
            if isinstance(value, dict | list | tuple):
                return True
        elif check is _model:
            if _holds_containers(value):
                return True
        elif check is _models and any(_holds_containers(item) for item in value):
            return True
    return False


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


def _encoded(
    model: Model, nested: list[tuple[str, Any]], made: list[tuple[Any, str]], *, recent: bool
) -> tuple[str, bytes]:
    """The model's JSON as text and as UTF-8 (its composer's, with `recent` as there); adds its
    data and metadata values that are objects or arrays to `nested`, and the models composed
    to `made` (to be kept: what JSON cannot carry raises Unservable)."""
    composer = _COMPOSERS.get(type(model))
    if composer is not None:
        try:
            text = composer(model, nested, made, recent)
            return text, text.encode()
        except (_Refused, ValueError, TypeError, RecursionError):
            # Refused: the walk of the whole document finds what and where, as it always did.
            nested.clear()
            made.clear()
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
