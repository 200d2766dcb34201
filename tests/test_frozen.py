"""shared.frozen: a frozen class behaves as `@dataclass(frozen=True)` makes one (construction,
equality, hash, repr, immutability, replace, copy and pickle), with one compile per class."""

from __future__ import annotations

import copy
import inspect
import pickle
from dataclasses import FrozenInstanceError, dataclass, field, fields, replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.frozen import frozen


@frozen(slots=True, kw_only=True)
class Note:
    """A value of the kinds the model declares: slotted, built by keyword."""

    text: str
    tags: tuple[str, ...] = ()
    seen: int | None = field(default=None, compare=False)
    secret: str = field(default="", repr=False)
    marks: list[int] = field(default_factory=list, compare=False, hash=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reference:
    """The same fields, declared by the dataclass decorator alone: what Note must match."""

    text: str
    tags: tuple[str, ...] = ()
    seen: int | None = field(default=None, compare=False)
    secret: str = field(default="", repr=False)
    marks: list[int] = field(default_factory=list, compare=False, hash=False)


@frozen
class Pair:
    """Positional, not slotted (as the requests and ports declare theirs)."""

    left: int
    right: int = 0


@frozen
class OtherPair:
    """Pair's fields in another class: never equal to a Pair."""

    left: int
    right: int = 0


@frozen
class Checked:
    """A value that checks itself after __init__, as Settings does."""

    count: int
    seen: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError("count must not be negative")
        object.__setattr__(self, "count", self.count * 2)


@frozen
class Custom:
    """A class's own eq is kept."""

    value: int

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Custom) and abs(self.value - other.value) <= 1

    __hash__ = None  # type: ignore[assignment]


values: st.SearchStrategy[dict[str, Any]] = st.builds(
    dict,
    text=st.text(max_size=5),
    tags=st.lists(st.text(max_size=3), max_size=3).map(tuple),
    seen=st.none() | st.integers(),
    secret=st.text(max_size=5),
    marks=st.lists(st.integers(), max_size=2),
)


@given(values.map(lambda v: {k: v[k] for k in v if k == "text" or hash(k + str(v[k])) % 2}))
def test_init_sets_what_the_dataclass_s_would(given_values: dict[str, Any]) -> None:
    ours, reference = Note(**given_values), Reference(**given_values)
    assert [getattr(ours, f.name) for f in fields(Note)] == [
        getattr(reference, f.name) for f in fields(Reference)
    ]


def test_init_takes_the_parameters_the_dataclass_s_would() -> None:
    def parameters(cls: type) -> list[tuple[str, Any, str]]:
        return [
            (p.name, p.kind, repr(p.default)) for p in inspect.signature(cls).parameters.values()
        ]

    assert parameters(Note) == parameters(Reference)
    assert str(inspect.signature(Pair)) == "(left, right=0)"
    with pytest.raises(TypeError, match="text"):
        Note()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="colour"):
        Note(text="a", colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Pair(1, 2, 3)  # type: ignore[call-arg]
    assert Pair(1) == Pair(left=1, right=0)


def test_a_factory_makes_a_new_default_for_each_value() -> None:
    first, second = Note(text="a"), Note(text="b")
    assert first.marks == [] and first.marks is not second.marks
    assert Note(text="a", marks=[1]).marks == [1]


def test_a_field_not_in_init_starts_from_its_default_or_factory() -> None:
    @frozen(slots=True)
    class Memo:
        """A value with memos beside its fields (as MessageKey keeps its derived id)."""

        key: str
        last: str | None = field(default=None, init=False, compare=False, repr=False)
        seen: list[str] = field(default_factory=list, init=False, compare=False, repr=False)

    @dataclass(frozen=True, slots=True)
    class Reference:
        key: str
        last: str | None = field(default=None, init=False, compare=False, repr=False)
        seen: list[str] = field(default_factory=list, init=False, compare=False, repr=False)

    memo, reference = Memo("k"), Reference("k")
    assert (memo.last, memo.seen) == (reference.last, reference.seen) == (None, [])
    assert memo.seen is not Memo("k").seen
    assert list(inspect.signature(Memo).parameters) == list(inspect.signature(Reference).parameters)
    assert replace(memo, key="j").last is None
    with pytest.raises(TypeError):
        Memo("k", "given")  # type: ignore[call-arg]


def test_post_init_runs_after_the_fields_are_set() -> None:
    assert Checked(2).count == 4
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)


@given(values, values)
def test_eq_hash_and_repr_are_the_dataclass_ones(a: dict[str, Any], b: dict[str, Any]) -> None:
    ours_a, ours_b = Note(**a), Note(**b)
    ref_a, ref_b = Reference(**a), Reference(**b)
    assert (ours_a == ours_b) is (ref_a == ref_b)
    assert (ours_a != ours_b) is (ref_a != ref_b)
    assert hash(ours_a) == hash(ref_a)
    assert repr(ours_a) == repr(ref_a).replace("Reference(", "Note(", 1)


def test_a_field_left_out_of_compare_does_not_count() -> None:
    assert Note(text="a", seen=1) == Note(text="a", seen=2)
    assert hash(Note(text="a", seen=1)) == hash(Note(text="a", seen=2))
    assert Note(text="a") != Note(text="b")


def test_only_an_instance_of_the_same_class_is_equal() -> None:
    assert Pair(1, 2) == Pair(1, 2)
    others: list[object] = [OtherPair(1, 2), (1, 2)]
    assert all(Pair(1, 2) != other for other in others)
    assert len({Pair(1, 2), Pair(1, 2), Pair(2, 1)}) == 2


def test_repr_leaves_out_what_the_field_says_and_names_the_class() -> None:
    shown = repr(Note(text="hi", secret="s3cret"))
    assert shown == "Note(text='hi', tags=(), seen=None, marks=[])"
    assert "s3cret" not in shown
    assert repr(Pair(1)) == "Pair(left=1, right=0)"


def test_instances_cannot_change() -> None:
    note = Note(text="hi")
    with pytest.raises(FrozenInstanceError):
        note.text = "changed"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del note.text
    with pytest.raises(AttributeError):  # slotted: no attribute of another name either
        object.__setattr__(note, "other", 1)
    with pytest.raises(FrozenInstanceError):
        Pair(1).left = 2  # type: ignore[misc]
    assert note.text == "hi"


def test_a_dataclass_as_the_rest_of_the_kit_uses_it() -> None:
    note = Note(text="hi", tags=("a",))
    assert replace(note, text="ho") == Note(text="ho", tags=("a",))
    assert [f.name for f in fields(Note)] == ["text", "tags", "seen", "secret", "marks"]
    for twin in (pickle.loads(pickle.dumps(note)), copy.copy(note), copy.deepcopy(note)):
        assert twin == note and twin.secret == note.secret
    pair = Pair(1, 2)
    assert pickle.loads(pickle.dumps(pair)) == copy.deepcopy(pair) == pair
    with pytest.raises(TypeError):
        Note("hi")  # type: ignore[call-arg]  # keyword only


@frozen
class Bare:
    left: int
    right: str = "r"


def test_a_class_without_a_docstring_gets_its_signature_as_one() -> None:
    assert Bare.__doc__ == "Bare(left, right='r')"
    assert Note.__doc__ == "A value of the kinds the model declares: slotted, built by keyword."


def test_a_class_keeps_its_own_methods() -> None:
    assert Custom(1) == Custom(2)
    assert Custom(1) != Custom(3)
    assert Custom.__hash__ is None
