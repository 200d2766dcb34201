"""The queue payloads and what their targets answer: the one codec both queues' jobs use.

Two kinds of job travel through a TaskQueue: a `TurnJob` (the `work` queue: one background turn
of a task, for the worker) and a `PushJob` (the `push` queue: one push notification delivery,
for the deliverer). Each names its queue entry, so that enqueueing the same job again adds
nothing, and is carried as a small JSON object of identities, never of message bodies. The
JSON keys are a wire format between releases: Cloud Tasks entries already in flight must
still parse after a deploy, so they never change.

Parsing is strict: every field must be present with its JSON type (a number is not a string,
`true` is not a number), and BadPayload names the first field that is not.

`Outcome` is what either target answers for one delivery: `accepted` says whether the queue
may forget it (HTTP 2xx) or must retry it later.
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import Enum
from typing import Any, ClassVar, TypeVar

from shared.frozen import frozen
from shared.ports import BadPayload

_SAFE_NAME = re.compile(r"[A-Za-z0-9_-]{1,400}")

J = TypeVar("J", "TurnJob", "PushJob")
# (attribute, JSON key, JSON type) of each field, in the payload's order.
_Fields = tuple[tuple[str, str, type[str] | type[int]], ...]


@frozen
class TurnJob:
    """One queued turn of a task (the worker's job)."""

    task_id: str
    owner: str
    turn: int  # the task version that queued the turn
    message_id: str  # the message that started the turn; it is in the task's history
    # How often a reader re-queued the turn after its owner vanished (worker.TurnQueue): a
    # new entry name each time, since the queue keeps a used name for a while. Not in the
    # payload: the worker reads the turn from the task, whichever entry brought it.
    redrive: int = 0

    _FIELDS: ClassVar[_Fields] = (
        ("task_id", "taskId", str),
        ("owner", "owner", str),
        ("turn", "turn", int),
        ("message_id", "messageId", str),
    )

    @property
    def name(self) -> str:
        """The queue entry's name: the same for every enqueue of this turn, so a repeated
        request adds nothing. Task ids a client chose may hold any character: those are hashed."""
        again = f"-r{self.redrive}" if self.redrive else ""
        if _SAFE_NAME.fullmatch(self.task_id):
            return f"t-{self.task_id}-{self.turn}{again}"
        return f"h-{hashlib.sha256(self.task_id.encode()).hexdigest()}-{self.turn}{again}"

    def payload(self) -> dict[str, Any]:
        return _payload(self, self._FIELDS)

    @classmethod
    def from_payload(cls, payload: object) -> TurnJob:
        return _parse(cls, payload, cls._FIELDS)


@frozen
class PushJob:
    """Deliver a task's events up to `seq` to one of its push configs (the deliverer's job)."""

    owner: str
    task_id: str
    config_id: str
    seq: int  # the newest event to deliver

    _FIELDS: ClassVar[_Fields] = (
        ("owner", "owner", str),
        ("task_id", "taskId", str),
        ("config_id", "configId", str),
        ("seq", "seq", int),
    )

    @property
    def name(self) -> str:
        """The queue entry's name: one per config and newest event, whoever enqueues it."""
        digest = hashlib.sha256(json.dumps([self.task_id, self.config_id]).encode()).hexdigest()
        return f"p-{digest[:40]}-{self.seq}"

    def payload(self) -> dict[str, Any]:
        return _payload(self, self._FIELDS)

    @classmethod
    def from_payload(cls, payload: object) -> PushJob:
        return _parse(cls, payload, cls._FIELDS)


def _payload(job: TurnJob | PushJob, layout: _Fields) -> dict[str, Any]:
    return {key: getattr(job, attribute) for attribute, key, _ in layout}


def _parse(cls: type[J], payload: object, layout: _Fields) -> J:
    if not isinstance(payload, dict):
        raise BadPayload("the payload must be a JSON object")
    values: dict[str, Any] = {}
    for attribute, key, kind in layout:
        value = payload.get(key)
        # bool is an int in Python, but `true` is no turn or sequence number.
        if not isinstance(value, kind) or isinstance(value, bool):
            raise BadPayload(f"{key} must be a {'number' if kind is int else 'string'}")
        values[attribute] = value
    return cls(**values)


class Outcome(Enum):
    """What a queue target did with one delivery."""

    RAN = "ran"  # the worker ran the turn to its end (or it was canceled, or handed over)
    DELIVERED = "delivered"  # the webhook took every pending notification
    NOTHING_TO_DO = "nothing to do"  # gone, ended, not this turn, or delivered already
    BUSY = "busy"  # another run holds the task's or the config's lease: retry later
    # The config was busy, or had more than one delivery's worth: queued again under another
    # name, so the queue spends no attempt on it (it counts every answer but a 2xx).
    RESCHEDULED = "rescheduled"
    FAILED = "failed"  # the webhook did not take it: retry with backoff

    @property
    def accepted(self) -> bool:
        """Whether the queue may forget the delivery (HTTP 2xx); else it retries."""
        return self not in (Outcome.BUSY, Outcome.FAILED)
