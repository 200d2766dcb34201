"""The embedded push config store's bounds: its bytes (a share of A2A_MEMORY_MAX_BYTES,
counted as what its configs take in the process, the biggest holder's oldest config forgotten
first past it) and an owner's configs of tasks the task store forgot, dropped at its limit."""

from __future__ import annotations

import gc
import tracemalloc
import uuid
from datetime import timedelta

from shared.app import build
from shared.model import PushAuthentication, PushConfig
from shared.settings import Settings
from shared.store.memory import MemoryTaskStore
from shared.store.memory_push import MemoryPushConfigStore
from tests.clock import ManualClock
from tests.store.factory import new_task

SECRET = "s" * 4096  # a token and credentials at their limit (shared.limits)


def config(n: int, secret: str = "t", task_id: str | None = None) -> PushConfig:
    return PushConfig(
        id=f"c{n}",
        task_id=task_id or str(uuid.uuid4()),
        url=f"https://hooks.example.com/{'p' * 100}/{n}",
        token=secret + str(n),
        authentication=PushAuthentication(schemes=("Bearer",), credentials=secret + "c"),
    )


def test_the_bound_counts_what_a_config_holds() -> None:
    """Honest: at least what the configs allocate (made and kept by the store alone), and not
    much more; a short config ~1.1 KiB, one at the limits ~9 KiB."""
    for secret, most in (("t", 1200), (SECRET, 9500)):
        store = MemoryPushConfigStore()
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for n in range(300):
            store.put("alice", config(n, secret), dialect="1.0")
        gc.collect()
        allocated = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert allocated * 0.97 <= store.bytes <= allocated * 1.25
        assert store.bytes / 300 < most


def test_past_its_bytes_the_biggest_holders_oldest_configs_go_first() -> None:
    # The finding: 30 configs with 3 MB tokens took an embedded backend from 54 to 177 MB,
    # outside A2A_MEMORY_MAX_BYTES. Tokens are 4 KiB at most now, and the configs count.
    store = MemoryPushConfigStore(max_bytes=100_000)
    bobs = [config(n) for n in range(2)]
    for made in bobs:
        store.put("bob", made, dialect="1.0")
    alices = [config(n, SECRET) for n in range(30)]
    for made in alices:
        store.put("alice", made, dialect="1.0")
        assert store.bytes <= 100_000
    for made in bobs:  # the small holder keeps its configs
        assert store.get("bob", made.task_id, made.id) is not None
    kept = [m for m in alices if store.get("alice", m.task_id, m.id) is not None]
    assert kept == alices[-len(kept) :] and 5 < len(kept) < 30  # the newest, as many as fit
    for made in alices:
        if made not in kept:
            assert store.list("alice", made.task_id) == []


def test_an_embedded_app_keeps_its_push_configs_within_the_memory_bound() -> None:
    app = build(Settings(handler="functions.handlers.echo", memory_max_bytes=8 * 1024 * 1024))
    try:
        configs = app.service.ports.push_configs
        assert isinstance(configs, MemoryPushConfigStore)
        # The task store's bound leaves the push config store its eighth: the two together
        # hold A2A_MEMORY_MAX_BYTES.
        assert configs._max_bytes == 1024 * 1024
        assert configs._tasks is not None and configs._tasks._size.limit == 7 * 1024 * 1024
    finally:
        app.close()


def test_at_its_limit_an_owners_configs_of_forgotten_tasks_are_dropped() -> None:
    clock = ManualClock()
    tasks = MemoryTaskStore(retention=timedelta(days=1), clock=clock)
    store = MemoryPushConfigStore(tasks.cost, tasks=tasks, owner_limit=2)
    old = [new_task() for _ in range(2)]
    for n, (task, events) in enumerate(old):
        tasks.create("alice", task, events, dialect="v1.0")
        store.put("alice", config(n, task_id=task.id), dialect="1.0")
    clock.advance(timedelta(days=2).total_seconds())
    fresh, events = new_task()
    tasks.create("alice", fresh, events, dialect="v1.0")  # the old ones are past retention
    assert all(tasks.get("alice", task.id) is None for task, _ in old)
    # Their configs can neither be delivered nor deleted by their owner: they do not count.
    store.put("alice", config(9, task_id=fresh.id), dialect="1.0")
    assert [c.config.id for c in store.list("alice", fresh.id)] == ["c9"]
    assert all(store.list("alice", task.id) == [] for task, _ in old)
