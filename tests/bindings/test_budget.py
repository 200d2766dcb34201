"""The bytes in flight (shared/bindings/budget.py): the instance's room and each owner's share,
whatever the order of takes and gives."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from shared.bindings.budget import Budget
from shared.bindings.wire import Headers, Request
from shared.identity.api_key import hashed
from tests.bindings.test_wire import scope
from tests.conftest import Client

OWNERS = st.sampled_from([None, "alice", "bob"])
STEPS = st.lists(st.tuples(st.integers(0, 400), OWNERS, st.booleans()), max_size=40)


@given(STEPS, st.integers(0, 39))
def test_takes_stay_within_the_room_and_shares_and_gives_let_all_go(
    steps: list[tuple[int, str | None, bool]], keep: int
) -> None:
    budget = Budget(1000, 300)
    taken: list[tuple[int, str | None]] = []
    for size, owner, alone in steps:
        owned = budget.owners.get(owner, 0) if owner else 0
        held = budget.held
        refusal = budget.take(size, owner, alone=alone)
        fits_room = held + size <= 1000 or (alone and held == 0)
        fits_share = owner is None or owned + size <= 300 or (alone and owned == 0)
        assert (refusal is None) == (fits_room and fits_share)
        if refusal is None:
            taken.append((size, owner))
        else:
            assert budget.held == held  # a refusal counts nothing
            setting = "A2A_MAX_BUFFERED_BYTES" if not fits_room else "A2A_MAX_OWNER_BUFFERED_BYTES"
            assert setting in refusal
        assert budget.held == sum(size for size, _ in taken)
        for name, count in budget.owners.items():
            assert count == sum(size for size, who in taken if who == name) > 0
    for size, owner in taken[keep:] + taken[:keep]:
        budget.give(size, owner)
    assert budget.held == 0 and budget.owners == {}


def test_a_caller_s_bytes_count_in_its_own_share_once_authenticated(
    make_client: Callable[..., Client],
) -> None:
    """Shares are of callers the agent knows: with A2A_AUTH=none every caller is the one
    anonymous owner, whose share would be the whole machine's: none, the instance's room."""
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "t"}}'
    headers = [(b"host", b"localhost"), (b"content-type", b"application/json")]
    for app, key, owner in (
        (make_client().app, b"", None),
        (make_client(auth="api-key", api_keys={hashed("key-a"): "alice"}).app, b"key-a", "alice"),
        (make_client(auth="api-key", api_keys={hashed("key-a"): "alice"}).app, b"nope", None),
    ):
        lines = [*headers, (b"x-api-key", key)] if key else headers
        request = Request(scope(headers=lines), Headers.of(lines), body)
        app(request)
        assert request.owner == owner
