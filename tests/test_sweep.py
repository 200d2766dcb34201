"""The sweep: every sweeper runs at one `now` and a failing one stops none of the others;
the timer of `make run`; the worker's `POST /sweep` (token first, then the count); and the
sweep the worker function is built with recovers a turn nobody reads again, and delivers
the events of a commit whose process died before its notifier recorded them."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from emulator.firestore import FirestoreEmulator
from emulator.oidc import make_token
from shared import lifecycle
from shared.app import build_worker
from shared.model import PushConfig, TaskState, utc_now
from shared.ports import Lease
from shared.push_notify import SWEEP_AFTER
from shared.settings import Settings
from shared.store.firestore import TASKS, FirestoreTaskStore, document_id
from shared.store.firestore_push import FirestorePushConfigStore
from shared.store.memory import MemoryTaskStore
from shared.sweep import BUDGET, Sweep, SweepTimer, pages
from tests.clock import ManualClock
from tests.conftest import SA, served
from tests.store.factory import new_task, status
from tests.webhook import Webhook
from tests.worker.test_recovery import left_by_a_dead_run

SECRET = "sweep-test-secret"
URL = "http://worker.test/"


@dataclass
class Counting:
    """A sweeper that records the times it was called with and re-drives `found` items."""

    found: int
    calls: list[datetime] = field(default_factory=list)
    called: threading.Event = field(default_factory=threading.Event)

    def __call__(self, now: datetime) -> int:
        self.calls.append(now)
        self.called.set()
        return self.found


def broken(now: datetime) -> int:
    raise ConnectionError("the store is down")


def test_every_sweeper_runs_at_one_time_and_a_failing_one_stops_no_other() -> None:
    clock = ManualClock()
    first, last = Counting(2), Counting(3)
    sweep = Sweep([first, broken, last], clock)
    assert sweep.run() == 5
    assert first.calls == last.calls == [clock.now()]


def test_the_timer_sweeps_once_an_interval_until_closed() -> None:
    clock, sweeper = ManualClock(), Counting(0)
    timer = SweepTimer(Sweep([sweeper], clock), interval=30, clock=clock)
    timer.start()
    try:
        clock.advance(29)
        assert not sweeper.called.wait(0.1)  # an interval has not passed
        clock.advance(1)
        assert sweeper.called.wait(10)
    finally:
        timer.close()
    timer._thread.join(10)
    assert not timer._thread.is_alive()
    clock.advance(60)
    assert len(sweeper.calls) == 1


def worker_app(store: MemoryTaskStore, **settings: Any) -> Any:
    return build_worker(
        Settings(
            handler="tests.handlers.long",
            backend="memory",
            tasks_emulator_host="localhost:1",
            tasks_emulator_secret=SECRET,
            tasks_service_account=SA,
            worker_url=URL,
            **settings,
        ),
        store=store,
    )


def test_only_cloud_scheduler_may_sweep_and_it_learns_how_much_was_redriven() -> None:
    store = MemoryTaskStore()
    app = worker_app(store)
    swept = Counting(4)
    app.sweep.sweepers = [swept]
    web = served(app)
    refused = web.post("/sweep", headers={"Authorization": f"Bearer {make_token(SA, URL, 'x')}"})
    assert refused.status_code == 401 and swept.calls == []
    token = make_token(SA, URL, SECRET)
    answer = web.post("/sweep", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200
    assert answer.json() == {"outcome": "swept", "redriven": 4}


def test_the_worker_sweep_fails_a_turn_nobody_will_run_or_read() -> None:
    """The worker of the emulator stack has no queue to itself: what it re-drives goes to
    the outbox; a turn out of re-drives is failed, whoever reads it or not."""
    store = MemoryTaskStore()
    app = worker_app(store, lease_seconds=1)
    long_gone = datetime(2020, 1, 1, tzinfo=UTC)
    spent = Lease(turn=1, holder="gone", expires=long_gone, message_id="m", redrives=3)
    left_by_a_dead_run(store, "t1", spent, owner="alice")
    assert app.sweep.run() == 1
    stored = store.get("alice", "t1")
    assert stored is not None and stored.task.status.state is TaskState.FAILED


def test_pages_go_on_from_the_last_item_until_a_short_page() -> None:
    items = list(range(7))
    asked: list[int | None] = []

    def read(after: int | None) -> list[int]:
        asked.append(after)
        start = 0 if after is None else after + 1
        return items[start : start + 3]

    assert list(pages(read, 3)) == items
    assert asked == [None, 2, 5]  # the third page is short: the last


def test_pages_that_may_come_back_short_end_at_an_empty_one() -> None:
    answers = iter([[1], [2, 3], []])  # a reader that dropped what it looked at
    assert list(pages(lambda after: next(answers), None)) == [1, 2, 3]


def test_pages_stop_once_the_budget_is_spent_and_the_next_sweep_goes_on() -> None:
    clock = ManualClock()

    def read(after: int | None) -> list[int]:
        clock.advance(BUDGET / 2)  # a slow store
        start = 0 if after is None else after + 1
        return [start, start + 1]

    assert list(pages(read, 2, clock=clock)) == [0, 1, 2, 3, 4, 5]  # three pages, 1.5 budgets


def test_the_worker_sweep_delivers_what_a_commit_s_dead_notifier_never_recorded(
    clean_firestore: FirestoreEmulator,
) -> None:
    """On the Firestore emulator: a task with a push config commits its end, and its process
    dies before the notifier records the event as wanted (the store is written to directly,
    without one). The config looks caught up; the worker's sweep, a SWEEP_AFTER later,
    delivers the end all the same, and once."""
    project = clean_firestore.project
    tasks = FirestoreTaskStore(project)
    configs = FirestorePushConfigStore(tasks.client, retention=tasks.retention, cost=tasks.cost)
    hook = Webhook()
    app = build_worker(
        Settings(
            handler="tests.handlers.long",
            backend="firestore",
            project=project,
            push_allowed_hosts=("localhost",),
            tasks_emulator_host="localhost:1",
            tasks_emulator_secret=SECRET,
            tasks_service_account=SA,
            worker_url=URL,
        )
    )
    try:
        created = tasks.create("alice", *new_task(task_id="t1"), dialect="v1.0")
        push = PushConfig(id="c1", task_id="t1", url=hook.url("/n"))
        configs.put("alice", push, dialect="1.0", delivered_seq=created.last_seq)
        current = tasks.get("alice", "t1")
        assert current is not None
        done = [status(current.task, TaskState.COMPLETED)]
        ended = tasks.commit(current, lifecycle.apply_all(current.task, done), done)
        web = served(app)
        token = make_token(SA, URL, SECRET)
        sweep = {"Authorization": f"Bearer {token}"}
        assert web.post("/sweep", headers=sweep).json()["redriven"] == 0, "its notifier's time"
        # A SWEEP_AFTER and a half on: the commit's news time, moved back as the clock moves on.
        (news,) = tasks.push_news(ended.updated_at - SWEEP_AFTER, utc_now(), 10)
        tasks.client.document(TASKS, document_id("alice", "t1")).update(
            {"pushNewsAt": news.at - SWEEP_AFTER * 1.5}
        )
        assert web.post("/sweep", headers=sweep).json()["redriven"] == 1
        (received,) = hook.wait_accepted(1)
        assert received.json["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert web.post("/sweep", headers=sweep).json()["redriven"] == 0, "recorded: once"
    finally:
        hook.close()
