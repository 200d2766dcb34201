"""The soak's ledger catches each invariant broken on purpose: given a store and client logs
of a clean run, it reports nothing; given a worker that commits an artifact twice, a deliverer
that skips an event, a stream that sees an event twice or misses one, a resend answered with
a second task, a task left working with a dead lease, or a 5xx outside the faults, it names
the invariant. In memory, without the emulators: cheap."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.dialects.v1_0 import V1
from shared.lifecycle import apply_all
from shared.model import (
    Artifact,
    ArtifactUpdate,
    Event,
    Message,
    Part,
    PushConfig,
    Role,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
)
from shared.ports import Lease
from shared.store.memory import MemoryTaskStore
from shared.store.memory_push import MemoryPushConfigStore
from tests.soak.ledger import Evidence, Ledger

OWNER = "owner-0"
NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
PATH = f"/hook/{OWNER}/c1"


class Run:
    """A small soak's worth of stored tasks and logs: one completed push-subscribed task that
    a client streamed (cut after two events and resumed), sent twice."""

    def __init__(self) -> None:
        self.store = MemoryTaskStore()
        self.configs = MemoryPushConfigStore(tasks=self.store)
        first = Message(message_id="m1", role=Role.USER, parts=(Part(text="steps=1 arts=2"),))
        task = Task(
            id="t1", context_id="c", status=TaskStatus(state=TaskState.SUBMITTED), history=(first,)
        )
        self.events: list[Event] = [
            self.status(TaskState.WORKING),
            self.artifact("a1", "turn 1 art 0"),
            self.artifact("a2", "turn 1 art 1"),
            self.status(TaskState.COMPLETED),
        ]
        stored = self.store.create(OWNER, task, [], dialect="1.0")
        config = PushConfig(id="c1", task_id="t1", url="http://localhost/hook")
        self.configs.put(OWNER, config, dialect="1.0")
        stored = self.store.get(OWNER, "t1") or stored
        self.store.commit(stored, apply_all(task, self.events), self.events)
        seqs = [e.seq for e in self.store.events(OWNER, "t1")]
        self.hooks = {PATH: self.posted()}
        send = {"owner": OWNER, "op": "SendMessage", "mid": "m1", "t0": 1.0, "t1": 2.0}
        stream = {"owner": OWNER, "op": "SendStreamingMessage", "chain": "s1", "task": "t1"}
        self.records: list[dict[str, Any]] = [
            {**send, "http": 200, "task": "t1", "state": "TASK_STATE_SUBMITTED"},
            {**send, "http": 200, "task": "t1", "state": "TASK_STATE_COMPLETED", "attempt": 1},
            {"owner": OWNER, "op": "push-config", "task": "t1", "config": "c1", "path": PATH},
            {**stream, "t0": 3.0, "events": [[str(s), "status", None] for s in seqs[:2]]},
            {**stream, "t0": 4.0, "events": [[str(s), "status", None] for s in seqs[2:]]},
        ]
        self.windows: list[tuple[float, float]] = [(10.0, 12.0)]

    def posted(self) -> list[Any]:
        """What the task's webhook is to get: each status and artifact event, in order."""
        final = self.store.get(OWNER, "t1")
        assert final is not None
        return [
            V1.stream_update(e.event, final.task)
            for e in self.store.events(OWNER, "t1")
            if isinstance(e.event, StatusUpdate | ArtifactUpdate)
        ]

    def status(self, state: TaskState) -> StatusUpdate:
        return StatusUpdate(task_id="t1", context_id="c", status=TaskStatus(state=state))

    def artifact(self, artifact_id: str, name: str) -> ArtifactUpdate:
        made = Artifact(artifact_id=artifact_id, parts=(Part(text=name),), name=name)
        return ArtifactUpdate(task_id="t1", context_id="c", artifact=made)

    def commit(self, events: list[Event], lease: Lease | None = None) -> None:
        stored = self.store.get(OWNER, "t1")
        assert stored is not None
        self.store.commit(replace(stored, lease=lease), apply_all(stored.task, events), events)

    def violations(self) -> list[str]:
        evidence = Evidence(self.records, self.windows, self.hooks)
        report = Ledger(self.store, self.configs, evidence, [OWNER], NOW).check()
        return sorted({v.invariant for v in report.violations})


@pytest.fixture
def run() -> Run:
    return Run()


def test_a_clean_run_has_a_clean_ledger(run: Run) -> None:
    assert run.violations() == []


def test_a_worker_that_commits_an_artifact_twice_is_caught(run: Run) -> None:
    run.commit([run.artifact("a3", "turn 1 art 0")])  # the same artifact, stored again
    run.hooks[PATH] = run.posted()  # and delivered
    assert run.violations() == ["artifact stored once"]


def test_a_deliverer_that_skips_an_event_is_caught(run: Run) -> None:
    del run.hooks[PATH][1]
    assert run.violations() == ["push got every event"]


def test_a_deliverer_that_reorders_events_is_caught(run: Run) -> None:
    posted = run.hooks[PATH]
    posted[1], posted[2] = posted[2], posted[1]
    assert run.violations() == ["push got every event"]


def test_a_stream_that_sees_an_event_twice_or_misses_one_is_caught(run: Run) -> None:
    resumed = run.records[4]["events"]
    resumed.insert(0, run.records[3]["events"][-1])  # Last-Event-ID not honoured
    assert run.violations() == ["stream saw each event once, in order"]
    del resumed[:2]  # resumed past an event it never saw
    assert run.violations() == ["stream saw each event once, in order"]


def test_a_resend_answered_with_another_task_is_caught(run: Run) -> None:
    run.records[1] = {**run.records[1], "task": "t2"}
    run.store.create(
        OWNER,
        Task(id="t2", context_id="c", status=run.status(TaskState.COMPLETED).status),
        [],
        dialect="1.0",
    )
    assert run.violations() == ["no duplicate task for a resent message"]


def test_a_task_working_under_a_dead_lease_is_caught(run: Run) -> None:
    dead = Lease(turn=5, holder="w", expires=NOW - timedelta(seconds=1))
    run.commit([run.status(TaskState.WORKING)], lease=dead)
    run.hooks[PATH] = run.posted()
    assert run.violations() == ["accepted task settled", "no live task without a live lease"]


def test_a_5xx_is_excused_only_in_a_fault_window(run: Run) -> None:
    failed = {"owner": OWNER, "op": "GetTask", "http": 503, "t0": 11.0, "t1": 11.5}
    run.records.append(failed)
    assert run.violations() == []
    run.records.append({**failed, "t0": 30.0, "t1": 30.1, "http": 200, "error": -32603})
    assert run.violations() == ["no 5xx or -32603 outside the faults"]
