"""From committed events to queued push deliveries, driven by state rather than by luck.

`PushNotifier` is told of the task store's commits (shared.store.notifying, wired in
shared.app). After each commit that logged status or artifact events, for each push config
of the task, it records on the config that events up to the commit's last one are wanted
(the config now lags: state in the store), then queues one delivery (shared.jobs.PushJob,
named by task, config and sequence number, so a repeated enqueue adds nothing). Wired with a
Cloud Tasks queue, the enqueue runs off the commit path (shared.queue.off_path), retried with
backoff: a queue outage never stalls a commit.

A config that lags longer than a delivery takes (`SWEEP_AFTER`), or than the queue's retries
of a failed delivery (`RETRY_WINDOW`), is due to a sweep: `PushSweeper` (one of the sweepers
the sweep runs, each called with the current time) queues a delivery for each, so an
enqueue lost with its process, or a delivery dropped by the queue, still ends up delivered.
A config whose last attempt failed waits for the next event or for its owner to update it.

A process that dies between a commit and its notifier (or whose record failed and whose
enqueue was lost) leaves every config looking caught up, which no lagging query finds. So
the commit itself records that it had news for configs (on the task's own document: no
extra write), and `NewsSweeper` looks at each task whose last news is between one and two
SWEEP_AFTER old (`TaskStore.push_news`; by then its notifier has long recorded it, or
died): a config that neither wanted nor had the task's last event is recorded as lagging
and gets the delivery the notifier would have queued, under its name.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from shared.clock import SYSTEM, Clock
from shared.jobs import PushJob
from shared.model import Event, notifiable
from shared.ports import PushConfigStore, StoredTask, TaskQueue, TaskStore
from shared.sweep import pages

log = logging.getLogger("a2a.push")

# A lagging config that no delivery caught up within this is presumed lost to the queue (a
# delivery waits for a busy config for at most its sending lease: the deliver function's
# timeout and a margin, 70 s as deployed).
SWEEP_AFTER = timedelta(minutes=2)
# After a failed attempt the queue owns the retry; its backoff reaches an hour as deployed
# (infra/deploy.toml, queues.push.max_backoff): a sweep steps in only after that.
RETRY_WINDOW = timedelta(hours=1)
# Lagging configs one page of the sweep reads.
SWEEP_BATCH = 200


class PushNotifier:
    """The commit callback that queues deliveries (a NotifyingTaskStore's `on_commit`)."""

    def __init__(
        self, configs: PushConfigStore, queue: TaskQueue, *, clock: Clock = SYSTEM
    ) -> None:
        self._configs = configs
        self.queue = queue
        self._clock = clock

    def __call__(self, stored: StoredTask, events: Sequence[Event]) -> None:
        if not notifiable(events):
            return
        if not stored.push_configs:
            return  # the task says none was put on it (no read: shared.store.firestore_push)
        sweep_at = self._clock.now() + SWEEP_AFTER
        for config in self._configs.list(stored.owner, stored.task.id):
            job = PushJob(stored.owner, stored.task.id, config.config.id, stored.last_seq)
            want_and_queue(self._configs, self.queue, job, sweep_at)


def want_and_queue(
    configs: PushConfigStore, queue: TaskQueue, job: PushJob, sweep_at: datetime
) -> bool:
    """Record the job's event as wanted by its config, then queue its delivery; whether the
    queue took it (False: a delivery of that name was queued already)."""
    # Recorded first: if the enqueue is lost (outage, dead process), the sweep sees it. A
    # record that fails (Firestore aborts a write that waits on a config locked by a
    # delivery) still queues the delivery, which posts all the config has not had: without
    # it, a task's last events would never be posted.
    try:
        configs.want(job.owner, job.task_id, job.config_id, job.seq, sweep_at)
    except Exception:
        log.exception(
            "could not record event %d as wanted by push config %s of task %s; "
            "its delivery is queued all the same",
            job.seq,
            job.config_id,
            job.task_id,
        )
    return queue.enqueue(job.name, job.payload())


class PushSweeper:
    """Re-drives lagging configs: call it with the current time; it answers how many
    deliveries it queued. Each is named by the config, its wanted event and the sweep's
    SWEEP_AFTER window, so a config is re-driven at most once a window however often the
    sweep runs (a re-driven delivery may still be waiting for a busy config)."""

    def __init__(
        self, configs: PushConfigStore, queue: TaskQueue, *, clock: Clock = SYSTEM
    ) -> None:
        self._configs = configs
        self._queue = queue
        self._clock = clock

    def __call__(self, now: datetime) -> int:
        queued = 0
        found = pages(
            lambda after: self._configs.lagging(now, SWEEP_BATCH, after),
            None,  # configs found caught up are left out of their page
            clock=self._clock,
        )
        for config in found:
            if config.wanted_seq <= config.delivered_seq:
                continue  # caught up since the query
            job = PushJob(config.owner, config.config.task_id, config.config.id, config.wanted_seq)
            name = f"{job.name}-s{int(now.timestamp() // SWEEP_AFTER.total_seconds())}"
            if self._queue.enqueue(name, job.payload()):
                queued += 1
                log.info(
                    "sweep: re-queued the delivery of task %s to push config %s (events %d to %d)",
                    job.task_id,
                    job.config_id,
                    config.delivered_seq + 1,
                    job.seq,
                )
        return queued


class NewsSweeper:
    """Queues the deliveries that a commit's notifier never recorded (see the module's
    docstring): call it with the current time; it answers how many it queued. A task is
    looked at by every sweep of the SWEEP_AFTER its news spends in the window (two, one a
    minute as deployed: a config list each); one found caught up costs nothing more."""

    def __init__(
        self,
        tasks: TaskStore,
        configs: PushConfigStore,
        queue: TaskQueue,
        *,
        clock: Clock = SYSTEM,
    ) -> None:
        self._tasks = tasks
        self._configs = configs
        self._queue = queue
        self._clock = clock

    def __call__(self, now: datetime) -> int:
        since, before = now - 2 * SWEEP_AFTER, now - SWEEP_AFTER
        queued = 0
        found = pages(
            lambda after: self._tasks.push_news(since, before, SWEEP_BATCH, after),
            SWEEP_BATCH,
            clock=self._clock,
        )
        for news in found:
            for config in self._configs.list(news.owner, news.task_id):
                if max(config.wanted_seq, config.delivered_seq) >= news.last_seq:
                    continue  # its notifier recorded it (or a later one did)
                job = PushJob(news.owner, news.task_id, config.config.id, news.last_seq)
                if want_and_queue(self._configs, self._queue, job, now + SWEEP_AFTER):
                    queued += 1
                    log.warning(
                        "sweep: queued the delivery of task %s to push config %s (events %d to "
                        "%d) that its commit's notifier never recorded",
                        job.task_id,
                        job.config_id,
                        config.delivered_seq + 1,
                        job.seq,
                    )
        return queued
