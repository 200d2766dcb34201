"""shared.recent: values by their objects' identity, bounded by entries and by weight."""

from __future__ import annotations

from shared.recent import Recent


class Thing:
    """Equal to every other Thing: only identity tells them apart."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Thing)

    __hash__ = object.__hash__


def test_a_value_is_its_very_objects() -> None:
    recent: Recent[str] = Recent(entries=4)
    thing = Thing()
    recent.add([(thing, "its")])
    assert recent.get(thing) == "its"
    assert recent.get(Thing()) is None  # equal, another object


def test_entries_and_weight_are_bounded_the_newest_kept() -> None:
    by_count: Recent[int] = Recent(entries=4)
    things = [Thing() for _ in range(20)]
    by_count.add((thing, n) for n, thing in enumerate(things))
    assert len(by_count) <= 8
    assert by_count.get(things[-1]) == 19
    assert by_count.get(things[0]) is None
    by_weight: Recent[str] = Recent(entries=100, weight=10, weigh=len)
    for thing in things:
        by_weight.add([(thing, "12345")])
        assert len(by_weight) <= 4  # two generations of two values of 5
    assert by_weight.get(things[-1]) == "12345"
    assert by_weight.get(things[0]) is None
