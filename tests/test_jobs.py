"""The queue payloads: their JSON and entry names stay as Cloud Tasks entries in flight carry
them, the parser is strict and names the field, and the outcomes say what the queue does."""

from __future__ import annotations

from typing import Any

import pytest

from shared.jobs import Outcome, PushJob, TurnJob
from shared.ports import BadPayload

TURN = {"taskId": "t-1", "owner": "anonymous", "turn": 3, "messageId": "m"}
PUSH = {"owner": "anonymous", "taskId": "t-1", "configId": "c", "seq": 7}


def test_payloads_round_trip_in_their_wire_form() -> None:
    turn = TurnJob.from_payload(TURN)
    assert turn == TurnJob("t-1", "anonymous", 3, "m")
    assert turn.payload() == TURN
    push = PushJob.from_payload(PUSH)
    assert push == PushJob("anonymous", "t-1", "c", 7)
    assert push.payload() == PUSH


def test_entry_names_are_stable() -> None:
    # Computed by the code that enqueued them before shared.jobs existed.
    assert TurnJob.from_payload(TURN).name == "t-t-1-3"
    assert TurnJob("a task/id", "o", 2, "m").name == (
        "h-e17ac6a11db630281cfbe8cfdbc7baadd2c59667bb9556712e212ba0820e0953-2"
    )
    assert PushJob.from_payload(PUSH).name == "p-f38c501d22cbd813f4133a1acbc74d29dba45bd5-7"


@pytest.mark.parametrize(
    ("kind", "payload", "field"),
    [
        (TurnJob, {**TURN, "turn": "3"}, "turn"),
        (TurnJob, {**TURN, "turn": True}, "turn"),
        (TurnJob, {k: v for k, v in TURN.items() if k != "owner"}, "owner"),
        (TurnJob, {**TURN, "taskId": 1}, "taskId"),
        (PushJob, {**PUSH, "seq": "7"}, "seq"),
        (PushJob, {**PUSH, "seq": 7.0}, "seq"),
        (PushJob, {**PUSH, "configId": None}, "configId"),
    ],
)
def test_the_parser_is_strict_and_names_the_field(
    kind: type[TurnJob | PushJob], payload: dict[str, Any], field: str
) -> None:
    with pytest.raises(BadPayload, match=f"^{field} must be a "):
        kind.from_payload(payload)


@pytest.mark.parametrize("kind", [TurnJob, PushJob])
def test_a_payload_that_is_no_object_is_refused(kind: type[TurnJob | PushJob]) -> None:
    with pytest.raises(BadPayload, match="JSON object"):
        kind.from_payload(["not", "an", "object"])


def test_only_busy_and_failed_make_the_queue_retry() -> None:
    assert {o.value: o.accepted for o in Outcome} == {
        "ran": True,
        "delivered": True,
        "nothing to do": True,
        "busy": False,
        "failed": False,
        "rescheduled": True,
    }
