"""shared.model_json: what the pydantic models wrote reads back identically, and is written
again under the same names (without `null` fields); every model survives its JSON; what JSON
cannot carry is refused, naming the field and the problem."""

from __future__ import annotations

import json
import re
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared import model_json
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
from shared.model_json import MAX_DEPTH, Unservable
from shared.store import firestore, firestore_push

# -- what the pydantic models wrote ------------------------------------------------------------
# Literally, as their model_dump_json() made it (the Firestore task document's `task`, an
# event document's events, a push config document's `config`), generated on their code
# before they went, from the objects below.

TASK = (
    '{"id":"t-1","context_id":"c-1","status":{"state":"completed","message":{"message'
    '_id":"m-2","role":"agent","parts":[{"text":"done","raw":null,"url":null,"data":n'
    'ull,"filename":null,"media_type":null,"metadata":null}],"context_id":"c-1","task'
    '_id":"t-1","reference_task_ids":[],"extensions":[],"metadata":null},"timestamp":'
    '"2026-11-30T19:05:46.123000Z"},"history":[{"message_id":"m-1","role":"user","par'
    'ts":[{"text":"héllo ☃ \u2028 \\"q\\" \\\\ 😀","raw":null,"url":null,"data":null,"filename"'
    ':null,"media_type":null,"metadata":null},{"text":null,"raw":"aGk=","url":null,"d'
    'ata":null,"filename":"a.txt","media_type":"text/plain","metadata":null},{"text":'
    'null,"raw":null,"url":"https://example.com/f.png","data":null,"filename":null,"m'
    'edia_type":"image/png","metadata":null},{"text":null,"raw":null,"url":null,"data'
    '":{"a":[1,2.5,null,true,{"b":"c"}],"n":null,"e":{}},"filename":null,"media_type"'
    ':null,"metadata":{"k":"v"}},{"text":null,"raw":null,"url":null,"data":null,"file'
    'name":null,"media_type":null,"metadata":null},{"text":null,"raw":null,"url":null'
    ',"data":"just a string","filename":null,"media_type":null,"metadata":null}],"con'
    'text_id":"c-1","task_id":"t-1","reference_task_ids":["t-0"],"extensions":["https'
    '://example.com/ext/v1"],"metadata":{"m":{"x":null},"big":12345678901234567890}}]'
    ',"artifacts":[{"artifact_id":"a-1","parts":[{"text":"out","raw":null,"url":null,'
    '"data":null,"filename":null,"media_type":null,"metadata":null},{"text":null,"raw'
    '":null,"url":null,"data":[1,"two",-0.5,1e+100],"filename":null,"media_type":null'
    ',"metadata":null}],"name":"result","description":"the result","extensions":["urn'
    ':x"],"metadata":{"size":2}}],"metadata":{"t":1}}'
)
SHORT = (
    '{"id":"t-2","context_id":"c-2","status":{"state":"submitted","message":null,"tim'
    'estamp":"2026-11-30T19:05:47Z"},"history":[],"artifacts":[],"metadata":null}'
)
EVENT_MESSAGE = (
    '{"kind":"message","event":{"message_id":"m-1","role":"user","parts":[{"text":"hé'
    'llo ☃ \u2028 \\"q\\" \\\\ 😀","raw":null,"url":null,"data":null,"filename":null,"media_typ'
    'e":null,"metadata":null},{"text":null,"raw":"aGk=","url":null,"data":null,"filen'
    'ame":"a.txt","media_type":"text/plain","metadata":null},{"text":null,"raw":null,'
    '"url":"https://example.com/f.png","data":null,"filename":null,"media_type":"imag'
    'e/png","metadata":null},{"text":null,"raw":null,"url":null,"data":{"a":[1,2.5,nu'
    'll,true,{"b":"c"}],"n":null,"e":{}},"filename":null,"media_type":null,"metadata"'
    ':{"k":"v"}},{"text":null,"raw":null,"url":null,"data":null,"filename":null,"medi'
    'a_type":null,"metadata":null},{"text":null,"raw":null,"url":null,"data":"just a '
    'string","filename":null,"media_type":null,"metadata":null}],"context_id":"c-1","'
    'task_id":"t-1","reference_task_ids":["t-0"],"extensions":["https://example.com/e'
    'xt/v1"],"metadata":{"m":{"x":null},"big":12345678901234567890}}}'
)
EVENT_STATUS = (
    '{"kind":"status","event":{"task_id":"t-1","context_id":"c-1","status":{"state":"'
    'input-required","message":{"message_id":"m-2","role":"agent","parts":[{"text":"d'
    'one","raw":null,"url":null,"data":null,"filename":null,"media_type":null,"metada'
    'ta":null}],"context_id":"c-1","task_id":"t-1","reference_task_ids":[],"extension'
    's":[],"metadata":null},"timestamp":"2026-11-30T19:05:46.123000Z"},"metadata":{"e'
    '":1}}}'
)
EVENT_STATUS_PLAIN = (
    '{"kind":"status","event":{"task_id":"t-1","context_id":"c-1","status":{"state":"'
    'working","message":null,"timestamp":"2026-11-30T19:05:47Z"},"metadata":null}}'
)
EVENT_ARTIFACT = (
    '{"kind":"artifact","event":{"task_id":"t-1","context_id":"c-1","artifact":{"arti'
    'fact_id":"a-1","parts":[{"text":"out","raw":null,"url":null,"data":null,"filenam'
    'e":null,"media_type":null,"metadata":null},{"text":null,"raw":null,"url":null,"d'
    'ata":[1,"two",-0.5,1e+100],"filename":null,"media_type":null,"metadata":null}],"'
    'name":"result","description":"the result","extensions":["urn:x"],"metadata":{"si'
    'ze":2}},"append":true,"last_chunk":true,"metadata":null}}'
)
EVENT_ARTIFACT_PLAIN = (
    '{"kind":"artifact","event":{"task_id":"t-1","context_id":"c-1","artifact":{"arti'
    'fact_id":"a-2","parts":[{"text":"x","raw":null,"url":null,"data":null,"filename"'
    ':null,"media_type":null,"metadata":null}],"name":null,"description":null,"extens'
    'ions":[],"metadata":null},"append":false,"last_chunk":false,"metadata":null}}'
)
CONFIG_FULL = (
    '{"id":"p-1","task_id":"t-1","url":"https://example.com/hook","token":"tok","auth'
    'entication":{"schemes":["Bearer","Basic"],"credentials":"secret"}}'
)
CONFIG_BARE = (
    '{"id":"p-2","task_id":"t-1","url":"https://example.com/h2","token":null,"authentication":null}'
)
CONFIG_SCHEMES_ONLY = (
    '{"id":"p-3","task_id":"t-1","url":"https://example.com/h3","token":null,"authent'
    'ication":{"schemes":["Bearer"],"credentials":null}}'
)

STAMP = datetime(2026, 11, 30, 19, 5, 46, 123000, tzinfo=UTC)
WHOLE_SECOND = datetime(2026, 11, 30, 19, 5, 47, tzinfo=UTC)
USER = Message(
    message_id="m-1",
    role=Role.USER,
    parts=(
        Part(text='h\u00e9llo \u2603 \u2028 "q" \\ \U0001f600'),
        Part(raw="aGk=", filename="a.txt", media_type="text/plain"),
        Part(url="https://example.com/f.png", media_type="image/png"),
        Part(data={"a": [1, 2.5, None, True, {"b": "c"}], "n": None, "e": {}}, metadata={"k": "v"}),
        Part(data=None),
        Part(data="just a string"),
    ),
    context_id="c-1",
    task_id="t-1",
    reference_task_ids=("t-0",),
    extensions=("https://example.com/ext/v1",),
    metadata={"m": {"x": None}, "big": 12345678901234567890},
)
AGENT = Message(
    message_id="m-2", role=Role.AGENT, parts=(Part(text="done"),), context_id="c-1", task_id="t-1"
)
ARTIFACT = Artifact(
    artifact_id="a-1",
    parts=(Part(text="out"), Part(data=[1, "two", -0.5, 1e100])),
    name="result",
    description="the result",
    extensions=("urn:x",),
    metadata={"size": 2},
)
WRITTEN: list[tuple[str, Any]] = [
    (
        TASK,
        Task(
            id="t-1",
            context_id="c-1",
            status=TaskStatus(state=TaskState.COMPLETED, message=AGENT, timestamp=STAMP),
            history=(USER,),
            artifacts=(ARTIFACT,),
            metadata={"t": 1},
        ),
    ),
    (
        SHORT,
        Task(
            id="t-2",
            context_id="c-2",
            status=TaskStatus(state=TaskState.SUBMITTED, timestamp=WHOLE_SECOND),
        ),
    ),
    (
        CONFIG_FULL,
        PushConfig(
            id="p-1",
            task_id="t-1",
            url="https://example.com/hook",
            token="tok",
            authentication=PushAuthentication(schemes=("Bearer", "Basic"), credentials="secret"),
        ),
    ),
    (CONFIG_BARE, PushConfig(id="p-2", task_id="t-1", url="https://example.com/h2")),
    (
        CONFIG_SCHEMES_ONLY,
        PushConfig(
            id="p-3",
            task_id="t-1",
            url="https://example.com/h3",
            authentication=PushAuthentication(schemes=("Bearer",)),
        ),
    ),
]
LOGGED: list[tuple[str, Any]] = [
    (EVENT_MESSAGE, USER),
    (
        EVENT_STATUS,
        StatusUpdate(
            task_id="t-1",
            context_id="c-1",
            status=TaskStatus(state=TaskState.INPUT_REQUIRED, message=AGENT, timestamp=STAMP),
            metadata={"e": 1},
        ),
    ),
    (
        EVENT_STATUS_PLAIN,
        StatusUpdate(
            task_id="t-1",
            context_id="c-1",
            status=TaskStatus(state=TaskState.WORKING, timestamp=WHOLE_SECOND),
        ),
    ),
    (
        EVENT_ARTIFACT,
        ArtifactUpdate(
            task_id="t-1", context_id="c-1", artifact=ARTIFACT, append=True, last_chunk=True
        ),
    ),
    (
        EVENT_ARTIFACT_PLAIN,
        ArtifactUpdate(
            task_id="t-1",
            context_id="c-1",
            artifact=Artifact(artifact_id="a-2", parts=(Part(text="x"),)),
        ),
    ),
]


def without_model_nulls(value: Any, inside_data: bool = False) -> Any:
    """pydantic's JSON without its `null` fields: a null inside data or metadata stays."""
    if isinstance(value, dict):
        return {
            key: without_model_nulls(item, inside_data or key in ("data", "metadata"))
            for key, item in value.items()
            if inside_data or item is not None
        }
    if isinstance(value, list):
        return [without_model_nulls(item, inside_data) for item in value]
    return value


@pytest.mark.parametrize(("written", "expected"), WRITTEN)
def test_what_pydantic_wrote_reads_back_identically_and_is_written_under_its_names(
    written: str, expected: Any
) -> None:
    assert model_json.decode(type(expected), written) == expected
    assert model_json.decode(type(expected), written.encode()) == expected
    again = model_json.encode(expected)
    assert json.loads(again) == without_model_nulls(json.loads(written))


@pytest.mark.parametrize(("logged", "expected"), LOGGED)
def test_event_documents_pydantic_wrote_read_back_identically(logged: str, expected: Any) -> None:
    assert firestore._decode_event(logged) == expected
    again = json.loads(firestore._encode_event(expected))
    assert again == without_model_nulls(json.loads(logged))


def test_push_config_documents_pydantic_wrote_read_back_identically() -> None:
    document = {"config": CONFIG_FULL, "owner": "o", "dialect": "1.0", "delivered": 3}
    assert firestore_push._decode(document).config == WRITTEN[2][1]


def test_timestamps_are_written_as_pydantic_wrote_them() -> None:
    elsewhere = datetime(2026, 1, 1, tzinfo=UTC).astimezone(timezone(timedelta(hours=2)))
    for stamp, text in (
        (STAMP, "2026-11-30T19:05:46.123000Z"),
        (WHOLE_SECOND, "2026-11-30T19:05:47Z"),
        (elsewhere, "2026-01-01T02:00:00+02:00"),
    ):
        status = TaskStatus(state=TaskState.WORKING, timestamp=stamp)
        assert model_json.to_dict(status)["timestamp"] == text
        assert model_json.decode(TaskStatus, model_json.encode(status)).timestamp == stamp


# -- every model survives its JSON -------------------------------------------------------------

# JSON values: what data and metadata may hold (no NaN or infinity; text without surrogates).
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)
OBJECTS = st.none() | st.dictionaries(st.text(), JSON, max_size=3)
OPTIONAL_TEXT = st.none() | st.text()
TEXTS = st.lists(st.text(), max_size=2).map(tuple)
PARTS = st.lists(
    st.builds(
        Part,
        text=OPTIONAL_TEXT,
        raw=OPTIONAL_TEXT,
        url=OPTIONAL_TEXT,
        data=JSON,
        filename=OPTIONAL_TEXT,
        media_type=OPTIONAL_TEXT,
        metadata=OBJECTS,
    ),
    max_size=3,
).map(tuple)
TIMES = st.datetimes(timezones=st.just(UTC))
MESSAGES = st.builds(
    Message,
    message_id=st.text(),
    role=st.sampled_from(Role),
    parts=PARTS,
    context_id=OPTIONAL_TEXT,
    task_id=OPTIONAL_TEXT,
    reference_task_ids=TEXTS,
    extensions=TEXTS,
    metadata=OBJECTS,
)
STATUSES = st.builds(
    TaskStatus,
    state=st.sampled_from(TaskState),
    message=st.none() | MESSAGES,
    timestamp=TIMES,
)
ARTIFACTS = st.builds(
    Artifact,
    artifact_id=st.text(),
    parts=PARTS,
    name=OPTIONAL_TEXT,
    description=OPTIONAL_TEXT,
    extensions=TEXTS,
    metadata=OBJECTS,
)
TASKS = st.builds(
    Task,
    id=st.text(),
    context_id=st.text(),
    status=STATUSES,
    history=st.lists(MESSAGES, max_size=2).map(tuple),
    artifacts=st.lists(ARTIFACTS, max_size=2).map(tuple),
    metadata=OBJECTS,
)
EVENTS = (
    MESSAGES
    | st.builds(
        StatusUpdate, task_id=st.text(), context_id=st.text(), status=STATUSES, metadata=OBJECTS
    )
    | st.builds(
        ArtifactUpdate,
        task_id=st.text(),
        context_id=st.text(),
        artifact=ARTIFACTS,
        append=st.booleans(),
        last_chunk=st.booleans(),
        metadata=OBJECTS,
    )
)
PUSH_CONFIGS = st.builds(
    PushConfig,
    id=st.text(),
    task_id=st.text(),
    url=st.text(),
    token=OPTIONAL_TEXT,
    authentication=st.none()
    | st.builds(PushAuthentication, schemes=TEXTS, credentials=OPTIONAL_TEXT),
)


@given(model=TASKS | EVENTS | PUSH_CONFIGS)
def test_every_model_reads_back_equal_from_its_json(model: Any) -> None:
    data = model_json.encode(model)
    assert model_json.decode(type(model), data) == model
    assert model_json.from_dict(type(model), model_json.to_dict(model)) == model
    assert json.loads(data) == model_json.to_dict(model)
    assert model_json.detached(model) == model_json.decode(type(model), data)  # without the JSON
    assert data == json.dumps(json.loads(data), ensure_ascii=False, separators=(",", ":")).encode()
    if not isinstance(model, Task | PushConfig):  # an event: and in a Firestore event document
        assert firestore._decode_event(firestore._encode_event(model)) == model


def walked(model: Any) -> bytes:
    """The model's JSON as the walk of its whole document writes it (to_dict's, encoded once):
    what encode must write, byte for byte."""
    return model_json._json_text(model_json.to_dict(model)).encode()


@given(model=TASKS | EVENTS | PUSH_CONFIGS)
def test_the_json_of_a_model_is_the_whole_documents_however_often_it_is_written(
    model: Any,
) -> None:
    """Byte for byte what the walk of the whole document writes: made fresh, made again, and
    a task's made after its status, messages and artifacts were encoded (as a send encodes
    its events, then its task), and what owned writes."""
    expected = walked(model)
    assert model_json.encode(model) == expected
    assert model_json.encode(model) == expected  # from the text kept
    if isinstance(model, Task):
        parts: list[Any] = [model.status, *model.history, *model.artifacts]
        for part in parts:
            model_json.encode(part)
        assert model_json.encode(replace(model)) == expected  # another task of those parts
    assert model_json.owned(model)[1] == expected


class OddTime(datetime):
    """A datetime whose ISO text JSON must escape."""

    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        return 'a"b\\c\n'


@given(
    at=st.datetimes(
        timezones=st.none()
        | st.just(UTC)
        | st.builds(timezone, st.timedeltas(timedelta(hours=-23), timedelta(hours=23)))
    )
)
def test_a_timestamp_is_written_as_the_walk_writes_it_whatever_its_zone(at: datetime) -> None:
    for stamp in (at, OddTime.fromisoformat(at.isoformat())):
        status = TaskStatus(state=TaskState.WORKING, timestamp=stamp)
        assert model_json.encode(status) == walked(status)


def test_flags_are_written_as_the_walk_writes_them_and_a_flag_that_is_no_bool_is_refused() -> None:
    for append, last_chunk in [(True, False), (False, True)]:
        update = ArtifactUpdate(
            task_id="t", context_id="c", artifact=ARTIFACT, append=append, last_chunk=last_chunk
        )
        assert model_json.encode(update) == walked(update)
    with pytest.raises(Unservable, match=r"ArtifactUpdate\.append is 1, not true or false"):
        model_json.encode(ArtifactUpdate(task_id="t", context_id="c", artifact=ARTIFACT, append=1))  # type: ignore[arg-type]


def test_owned_copies_data_it_found_whatever_was_encoded_before() -> None:
    """A handler may hand over a model whose data was encoded before (a part of the message
    it was sent, say): the turn still gets its own copy, and keeps what was checked."""
    data: dict[str, Any] = {"n": 1}
    part = Part(data=data)
    model_json.encode(part)
    copy, written = model_json.owned(part)
    assert copy == part and copy is not part and copy.data is not data
    data["n"] = float("nan")  # its maker spoils it after handing it over
    assert model_json.encode(copy) == written == b'{"data":{"n":1}}'


def test_a_model_refused_once_is_refused_again() -> None:
    """What JSON cannot carry is never kept: a second encode refuses it as the first did."""
    bad = artifact(Part(text="\ud800 half"))
    for _ in range(2):
        with pytest.raises(Unservable, match="lone UTF-16 surrogate"):
            model_json.encode(bad)


# -- what JSON cannot carry --------------------------------------------------------------------


def wrong(value: Any) -> Any:
    """A value of a type its field does not allow (what a handler's bug may pass)."""
    return value


def artifact(*parts: Part, **fields: Any) -> ArtifactUpdate:
    return ArtifactUpdate(
        task_id="t",
        context_id="c",
        artifact=Artifact(artifact_id="a", parts=(Part(text="fine"), *parts)),
        **fields,
    )


def nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


# A value of the wrong type in a typed field: to_dict refuses it too.
TYPE_FAULTS: list[tuple[Any, list[str]]] = [
    (
        artifact(Part(text=wrong(5))),
        ["ArtifactUpdate.artifact.parts[1].text", "int, not a string"],
    ),
    (artifact(Part(metadata=wrong([1]))), ["parts[1].metadata", "list, not an object"]),
    (
        artifact(Part(metadata=wrong({1: "a"}))),
        ["parts[1].metadata", "key 1", "must be strings"],
    ),
    (artifact(append="yes"), ["ArtifactUpdate.append", "'yes', not true or false"]),
    (artifact(wrong("text")), ["ArtifactUpdate.artifact.parts[1]", "str, not a Part"]),
    (
        Message(message_id="m", role=wrong("user"), parts=()),
        ["Message.role", "'user', not a Role"],
    ),
    (
        StatusUpdate(
            task_id="t",
            context_id="c",
            status=TaskStatus(state=TaskState.WORKING, timestamp=wrong("now")),
        ),
        ["StatusUpdate.status.timestamp", "str, not a datetime"],
    ),
    (
        Message(message_id=wrong(None), role=Role.USER, parts=()),
        ["Message.message_id", "missing"],
    ),
    (
        Message(message_id="m", role=Role.USER, parts=(), extensions=wrong(("a", 1))),
        ["Message.extensions", "not a sequence of strings"],
    ),
]
# What JSON cannot carry in data, metadata or text: found when the model is written.
VALUE_FAULTS: list[tuple[Any, list[str]]] = [
    (artifact(Part(data=float("nan"))), ["parts[1].data", "nan", "finite number"]),
    (artifact(Part(data={"x": [float("-inf")]})), ["parts[1].data.x[0]", "-inf"]),
    (artifact(Part(data={"a b": "\ud800"})), ["data['a b']", "lone UTF-16 surrogate"]),
    (artifact(Part(data={"\udfff": 1})), ["(a key)", "lone UTF-16 surrogate"]),
    (artifact(Part(text="\ud800 half")), ["parts[1].text", "lone UTF-16 surrogate"]),
    (artifact(Part(data={"s": {1, 2}})), ["data.s", "a set, which JSON cannot carry"]),
    (artifact(Part(data=b"bytes")), ["data", "a bytes, which JSON cannot carry"]),
    (artifact(Part(data={(1, 2): 3})), ["data", "key of type tuple"]),
    (artifact(Part(data=10**5000)), ["data", "integer too long"]),
    (artifact(Part(data=nested(5000))), ["data", f"deeper than {MAX_DEPTH}"]),
]


@pytest.mark.parametrize(("model", "names"), TYPE_FAULTS + VALUE_FAULTS)
def test_what_json_cannot_carry_is_refused_naming_the_field_and_problem(
    model: Any, names: list[str]
) -> None:
    with pytest.raises(Unservable) as refused:
        model_json.encode(model)
    for name in names:
        assert name in str(refused.value)
    with pytest.raises(Unservable):
        model_json.owned(model)  # what a turn keeps of a handler's output


@pytest.mark.parametrize(("model", "names"), TYPE_FAULTS)
def test_a_field_of_the_wrong_type_is_refused_as_a_dict_too(model: Any, names: list[str]) -> None:
    with pytest.raises(Unservable, match=re.escape(names[0])):
        model_json.to_dict(model)


def test_a_handler_s_data_may_nest_as_deep_as_a_request_may() -> None:
    """owned (the turn's check) bounds the depth; encode (a store's) leaves it to whoever let
    the value in, and refuses only what is too deep to write at all."""
    deepest = Part(data=nested(MAX_DEPTH), metadata={"k": nested(MAX_DEPTH - 1)})
    assert model_json.owned(deepest) == (deepest, model_json.encode(deepest))
    assert model_json.decode(Part, model_json.encode(deepest)) == deepest
    for deeper in (Part(data=nested(MAX_DEPTH + 1)), Part(metadata={"k": nested(MAX_DEPTH)})):
        with pytest.raises(Unservable, match=f"Part holds .* nested deeper than {MAX_DEPTH}"):
            model_json.owned(deeper)
        model_json.encode(deeper)
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(Unservable, match="deeper than"):
        model_json.encode(Part(data=loop))


def test_only_model_classes_are_encoded() -> None:
    with pytest.raises(Unservable, match="dict is not a model class"):
        model_json.encode({"text": "x"})  # type: ignore[arg-type]


@given(
    data=JSON,
    where=st.integers(min_value=0),
    bad=st.sampled_from([float("nan"), float("inf"), "\ud800x"]),
)
def test_a_bad_value_anywhere_in_data_is_refused(data: Any, where: int, bad: Any) -> None:
    """NaN, Infinity or a lone surrogate, put at any place of any JSON value."""
    holder = {"at": data}
    containers: list[Any] = [holder]
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list):
            containers.append(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    target = containers[where % len(containers)]
    if isinstance(target, dict):
        target["bad"] = bad
    else:
        target.append(bad)
    with pytest.raises(Unservable, match=r"finite number|lone UTF-16 surrogate"):
        model_json.encode(artifact(Part(data=holder)))


def test_a_detached_model_shares_nothing_its_reader_could_change() -> None:
    plain = Message(message_id="m", role=Role.USER, parts=(Part(text="hi"),))
    assert model_json.detached(plain) is plain  # nothing in it can change: no copy
    task = Task(
        id="t",
        context_id="c",
        status=TaskStatus(state=TaskState.WORKING, message=plain),
        history=(plain,),
        artifacts=(Artifact(artifact_id="a", parts=(Part(text="x"),)),),
    )
    assert model_json.detached(task) is task
    holding: list[Message | Task] = [
        Message(message_id="m", role=Role.USER, parts=(Part(data={"a": [1]}),)),
        Message(message_id="m", role=Role.USER, parts=(Part(data=[1]),)),
        Message(message_id="m", role=Role.USER, parts=(Part(text="x", metadata={"k": 1}),)),
        Message(message_id="m", role=Role.USER, parts=(Part(text="x"),), metadata={"k": 1}),
        replace(task, status=TaskStatus(state=TaskState.WORKING, message=holding_message())),
        replace(task, artifacts=(Artifact(artifact_id="a", parts=(Part(data={}),)),)),
    ]
    for model in holding:
        copy = model_json.detached(model)
        assert copy == model and copy is not model
        assert model_json.encode(copy) == model_json.encode(model)
        assert not any(a is b for a, b in zip(containers(copy), containers(model), strict=True)), (
            type(model).__name__
        )


def holding_message() -> Message:
    return Message(message_id="q", role=Role.AGENT, parts=(Part(text="?"),), metadata={"k": []})


def containers(model: Any) -> list[Any]:
    """The dicts and lists a model holds, in field order."""
    found: list[Any] = []
    for value in vars_of(model):
        if isinstance(value, dict | list):
            found.append(value)
        elif isinstance(value, tuple):
            for item in value:
                found += containers(item) if hasattr(item, "__slots__") else []
        elif hasattr(value, "__slots__"):
            found += containers(value)
    return found


def vars_of(model: Any) -> list[Any]:
    return [getattr(model, f.name) for f in fields(model)]
