"""Wiring, all of it: from the settings to the three functions' apps.

- `a2a` (`build`): task store, push notifier, queues, handler module, service, card.
- `worker` (`build_worker`): task store, push notifier, handler module, worker, token check,
  and the sweep (`POST /sweep`, Cloud Scheduler's).
- `deliver` (`build_deliver`): task store, push config store, deliverer, token check.

With push notifications on, the task store of `a2a` and `worker` is wrapped by the notifier
(shared.store.notifying), so each commit's notifications go out whichever function made it.

Adapters for Google services are imported only when the settings choose them, so the
embedded backend never pays for the Google client libraries at cold start.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.agent import HandlerModule, load_handler_module
from shared.bindings.http import HttpApp
from shared.card import AgentCard, card_template, extended_skills
from shared.clock import SYSTEM
from shared.engine import Engine
from shared.frozen import frozen
from shared.identity import Anonymous, Authenticator
from shared.observability.store import traced
from shared.pause import wait_out
from shared.ports import DelayingTaskQueue, PushConfigStore, TaskQueue, TaskStore
from shared.push_delivery import Deliverer
from shared.push_notify import NewsSweeper, PushNotifier, PushSweeper
from shared.push_signing import NotificationSigner
from shared.push_url import resolve_push_url
from shared.queue.inline import InlineQueue
from shared.runtime import Runner, TurnSettings
from shared.service import A2AService
from shared.service.base import Ports, ServiceSettings
from shared.settings import Settings, SettingsError
from shared.store.notifying import NotifyingTaskStore
from shared.sweep import Sweep, Sweeper, SweepTimer
from shared.turn_queue import TurnQueue, retry_span
from shared.worker import Worker

if TYPE_CHECKING:  # what only the worker and deliver functions use: imported where they are built
    from shared.bindings.queue_target import QueueTargetApp
    from shared.card_signing import CardSigner
    from shared.tasks_auth import TokenVerifier

# The in-process work queue's backoff between attempts, in seconds. A turn whose worker went
# silent is recovered once the queue can have no attempt left (Cloud Tasks' retry schedule
# is a setting, A2A_WORK_RETRY_SECONDS, that `make deploy` takes from the queue it creates).
_INLINE_BACKOFF = (0.1, 5.0)
# How often a process that runs its work queue itself (make run) sweeps; deployed, Cloud
# Scheduler calls the worker's /sweep (infra/deploy.toml, [sweep]).
_SWEEP_SECONDS = 30.0


def _store(settings: Settings) -> TaskStore:
    if settings.backend == "firestore":
        from shared.store.firestore import FirestoreTaskStore

        return FirestoreTaskStore(
            settings.project,
            database=settings.firestore_database,
            retention_days=settings.retention_days,
            tail=settings.stream_tail,
        )
    from shared.store.memory import MemoryTaskStore

    return MemoryTaskStore(
        max_bytes=settings.memory_max_bytes - settings.memory_push_bytes,
        retention=timedelta(days=settings.retention_days),
    )


def _push_configs(settings: Settings, store: TaskStore) -> PushConfigStore | None:
    """The push config store beside `store` (the adapter, not a decorator of it), when push
    notifications are on."""
    if not settings.push_notifications:
        return None
    if settings.backend == "firestore":
        from shared.store.firestore import FirestoreTaskStore
        from shared.store.firestore_push import FirestorePushConfigStore

        assert isinstance(store, FirestoreTaskStore)
        return FirestorePushConfigStore(
            store.client,
            retention=store.retention,
            cost=store.cost,
            owner_limit=settings.max_push_configs_per_owner,
        )
    from shared.store.memory import MemoryTaskStore
    from shared.store.memory_push import MemoryPushConfigStore

    # Its share of A2A_MEMORY_MAX_BYTES, which the task store's bound leaves to it (`_store`).
    owner_limit, max_bytes = settings.max_push_configs_per_owner, settings.memory_push_bytes
    if isinstance(store, MemoryTaskStore):
        return MemoryPushConfigStore(
            store.cost, tasks=store, owner_limit=owner_limit, max_bytes=max_bytes
        )
    return MemoryPushConfigStore(owner_limit=owner_limit, max_bytes=max_bytes)


def _cloud_queue(
    settings: Settings, queue: str, target_url: str | None
) -> DelayingTaskQueue | None:
    """The Cloud Tasks queue to a target function, or None: the work runs in process."""
    if target_url is None:
        return None
    from shared.queue.cloud_tasks import CloudTasksQueue

    assert settings.tasks_service_account is not None  # Settings.from_env checked it
    return CloudTasksQueue(
        f"projects/{settings.project}/locations/{settings.region}/queues/{queue}",
        target_url,
        settings.tasks_service_account,
        emulator_host=settings.tasks_emulator_host,
    )


def _signer(settings: Settings, module: HandlerModule) -> NotificationSigner | None:
    if not settings.push_signing_key:
        return None
    return NotificationSigner(
        settings.push_signing_key, issuer=settings.public_url or module.info.name
    )


def _card_signer(settings: Settings) -> CardSigner | None:
    """The card's signer, with A2A_CARD_SIGNING_KEY (SigningKeyError names it)."""
    if not settings.card_signing_key:
        return None
    from shared.card_signing import CardSigner  # its JOSE and JCS only when signing

    return CardSigner(settings.card_signing_key)


def _deliverer(
    settings: Settings, store: TaskStore, configs: PushConfigStore, module: HandlerModule
) -> Deliverer:
    hosts, ports = settings.push_allowed_hosts, settings.push_allowed_ports
    return Deliverer(
        store,
        configs,
        resolve_url=lambda url: resolve_push_url(url, allowed_hosts=hosts, allowed_ports=ports),
        signer=_signer(settings, module),
        function_timeout=settings.function_timeout,
        owner_posts_per_minute=settings.max_push_deliveries_per_owner_per_minute,
        max_failures=settings.push_max_attempts,
    )


class _FirstUse:
    """A DelayingTaskQueue made by `make` at its first enqueue."""

    def __init__(self, make: Callable[[], DelayingTaskQueue | None]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._queue: DelayingTaskQueue | None = None

    def enqueue(self, name: str, payload: dict[str, Any], *, delay: float = 0.0) -> bool:
        with self._lock:
            if self._queue is None:
                self._queue = self._make()
            queue = self._queue
        assert queue is not None  # made only where a Cloud Tasks queue is configured
        return queue.enqueue(name, payload, delay=delay)

    def close(self) -> None:
        if self._queue is not None:
            self._queue.close()


@frozen
class _Tasks:
    """What a function that commits tasks (`a2a`, `worker`) writes through."""

    store: TaskStore  # with push notifications on, it enqueues them after each commit
    push_configs: PushConfigStore | None  # None: push notifications are off
    push_queue: TaskQueue | None  # where the notifications go; closed when the process ends


def _tasks(settings: Settings, module: HandlerModule, store: TaskStore | None) -> _Tasks:
    """The task store of `a2a` and `worker`: the backend's adapter (or `store`) and, with push
    notifications on, the notifier around it, so every commit of either function notifies.
    Without A2A_DELIVER_URL the notifications are delivered in this process."""
    store = store or _store(settings)
    configs = _push_configs(settings, store)
    store = traced(store)  # a span per store call, when tracing is on
    if configs is None:
        return _Tasks(store, None, None)
    queue = _cloud_queue(settings, settings.push_queue, settings.deliver_url)
    if queue is None:
        deliverer = _deliverer(settings, store, configs, module)
        queue = InlineQueue(
            lambda payload, delivery: deliverer.deliver(payload, delivery).accepted,
            max_attempts=settings.push_max_attempts,
            kind="deliver",
        )
        deliverer.queue = queue
    else:  # a Cloud Tasks outage must not stall the commit that queues a notification
        from shared.queue.off_path import OffPathQueue

        queue = OffPathQueue(queue)
    return _Tasks(NotifyingTaskStore(store, PushNotifier(configs, queue)), configs, queue)


def _verifier(settings: Settings) -> TokenVerifier:
    from shared.tasks_auth import EmulatorTokens, GoogleTokens

    if settings.tasks_emulator_host:
        if not settings.tasks_emulator_secret:
            raise SettingsError(
                "CLOUD_TASKS_EMULATOR_HOST is set but CLOUD_TASKS_EMULATOR_SECRET is not: the "
                "worker cannot check the emulator's tokens; export the secret `python -m "
                "emulator` prints"
            )
        return EmulatorTokens(settings.tasks_emulator_secret, settings.tasks_service_account)
    if not settings.tasks_service_account:
        raise SettingsError(
            "the worker needs A2A_TASKS_SERVICE_ACCOUNT, the service account e-mail whose "
            "Cloud Tasks tokens it accepts (make deploy sets it)"
        )
    return GoogleTokens(settings.tasks_service_account)


def _authenticator(settings: Settings) -> Authenticator:
    """Who may call `a2a` (A2A_AUTH); a mode's module is imported only when chosen."""
    if settings.auth == "api-key":
        from shared.identity.api_key import ApiKeys

        return ApiKeys(settings.api_keys, settings.api_key_header)
    if settings.auth == "google":
        from shared.identity.google import GoogleIdTokens

        return GoogleIdTokens(settings.google_audiences)
    if settings.auth == "oidc":
        from shared.identity.oidc import OidcTokens

        assert settings.oidc_issuer and settings.oidc_audience  # Settings.from_env checked
        return OidcTokens(
            settings.oidc_issuer,
            settings.oidc_audience,
            owner_claim=settings.oidc_owner_claim,
            required_scopes=settings.oidc_required_scopes,
        )
    return Anonymous()


def _own_url(settings: Settings, name: str, url: str | None) -> str | None:
    """A Cloud Tasks target's own URL, the audience of the tokens it accepts: fixed at deploy
    time, never read from a request's Host header (only the local emulator goes without)."""
    if url is None and not settings.tasks_emulator_host:
        variable = "A2A_WORKER_URL" if name == "worker" else "A2A_DELIVER_URL"
        raise SettingsError(
            f"the {name} needs {variable}, its own URL: Cloud Tasks' tokens must be addressed "
            "to it (make deploy sets it once the function exists)"
        )
    return url


def _card_time(module: HandlerModule) -> datetime:
    """The handler module's file time: the same on every instance of one deployment."""
    path = getattr(sys.modules.get(module.name), "__file__", None)
    if path:
        return datetime.fromtimestamp(Path(path).stat().st_mtime, UTC)
    return datetime.now(UTC)


def build(
    settings: Settings | None = None,
    store: TaskStore | None = None,
    module: HandlerModule | None = None,
) -> HttpApp:
    """The `a2a` function: the agent card, JSON-RPC, HTTP+JSON and the legacy routes."""
    settings = settings or Settings.from_env()
    module = module or load_handler_module(settings.handler)
    card_signer = _card_signer(settings)  # an unusable key stops the build before anything runs
    tasks = _tasks(settings, module, store)
    engine = _engine(settings)
    work_queue = _cloud_queue(settings, settings.work_queue, settings.worker_url)
    if work_queue is None:  # the embedded backend: the worker runs in this process
        # `worker` is made below, before anything is enqueued.
        work_queue = _in_process(settings, lambda: worker)
        span = retry_span(settings.work_max_attempts, *_INLINE_BACKOFF)
        turns = _turns(settings, tasks.store, work_queue, span, module)
        worker = Worker(_runner(settings, tasks.store, module, engine, turns), turns)
    else:
        turns = _turns(settings, tasks.store, work_queue, settings.work_retry_seconds, module)
    service = A2AService(
        Ports(tasks.store, module, turns, tasks.push_configs, engine=engine),
        ServiceSettings.from_settings(settings),
    )
    card = AgentCard(
        {hybrid: card_template(module, settings, hybrid=hybrid) for hybrid in (True, False)},
        _card_time(module),
        hybrid=settings.card_style == "hybrid",
        extended_skills=extended_skills(module, settings),
        signer=card_signer,
    )
    app = HttpApp(service, card, _authenticator(settings), settings, _signer(settings, module))
    if isinstance(work_queue, InlineQueue):  # no worker function, so no Cloud Scheduler
        timer = SweepTimer(Sweep(_sweepers(turns, tasks)), _SWEEP_SECONDS)
        timer.start()
        app.closers.append(timer.close)
    app.closers.append(app.streams.slots.stop)
    app.closers.append(work_queue.close)
    app.closers.append(engine.close)
    if tasks.push_queue is not None:
        app.closers.append(tasks.push_queue.close)
    return app


def _in_process(settings: Settings, worker: Callable[[], Worker]) -> InlineQueue:
    """A work queue whose deliveries `worker()` runs on threads of this process (each waits
    for its turn, which runs on the engine)."""
    return InlineQueue(
        lambda payload, delivery: wait_out(worker().deliver(payload, delivery)).accepted,
        max_attempts=settings.work_max_attempts,
        min_backoff=_INLINE_BACKOFF[0],
        max_backoff=_INLINE_BACKOFF[1],
        kind="worker",
    )


def _sweepers(turns: TurnQueue, tasks: _Tasks) -> list[Sweeper]:
    """What the sweep re-drives: every module's work that a failure can leave behind (turns
    without a queue entry or a live owner; push configs behind their task's events, and
    events whose commit's notifier never recorded them)."""
    sweepers: list[Sweeper] = [turns.sweep]
    if tasks.push_configs is not None and tasks.push_queue is not None:
        sweepers.append(PushSweeper(tasks.push_configs, tasks.push_queue))
        sweepers.append(NewsSweeper(tasks.store, tasks.push_configs, tasks.push_queue))
    return sweepers


def _turns(
    settings: Settings,
    store: TaskStore,
    queue: TaskQueue,
    span: float,
    module: HandlerModule,
) -> TurnQueue:
    """Queued turns onto `queue`, recovered once its retries (`span` seconds, first attempt
    to last) are over, as the module allows (RERUN_SAFE)."""
    return TurnQueue(
        store,
        queue,
        lease_seconds=settings.lease_seconds,
        queue_span=span,
        rerun_safe=module.rerun_safe,
    )


def _engine(settings: Settings) -> Engine:
    """The engine of a function's turns (its store's calls block on Firestore only). Sync
    turns run on their requests' threads while half of THREADS do at most: the other half
    is for requests that run no handler."""
    return Engine(
        settings.sync_turns,
        on_requests=settings.threads // 2,
        store_blocks=settings.backend == "firestore",
    )


def _runner(
    settings: Settings, store: TaskStore, module: HandlerModule, engine: Engine, turns: TurnQueue
) -> Runner:
    """What runs the worker's turns: on `engine`, handing tasks over through `turns`."""
    return Runner(
        store,
        module,
        engine,
        turns.hand_over,
        TurnSettings.of(settings),
        SYSTEM,
    )


def build_worker(
    settings: Settings | None = None,
    store: TaskStore | None = None,
    module: HandlerModule | None = None,
) -> QueueTargetApp:
    """The `worker` function: Cloud Tasks hands it background turns."""
    from shared.bindings.queue_target import QueueTargetApp

    settings = settings or Settings.from_env()
    module = module or load_handler_module(settings.handler)
    tasks = _tasks(settings, module, store)
    # A turn that ends while messages wait on its task queues the next one, to this worker:
    # through Cloud Tasks to its own URL. On the emulator a worker may go without one (it is
    # no Cloud Tasks target then): it runs those turns on threads of its own, as the embedded
    # backend's a2a does. In the outbox they would wait for a reader that recovers them, or
    # a sweep, which nothing schedules on the emulator (issue 27).
    own_queue = _cloud_queue(settings, settings.work_queue, settings.worker_url)
    if own_queue is None:
        # `worker` is made below, before anything is enqueued.
        own_queue = _in_process(settings, lambda: worker)
    turns = _turns(settings, tasks.store, own_queue, settings.work_retry_seconds, module)
    worker = Worker(_runner(settings, tasks.store, module, _engine(settings), turns), turns)
    return QueueTargetApp(
        "worker",
        worker.deliver,
        _verifier(settings),
        url=_own_url(settings, "worker", settings.worker_url),
        max_attempts=settings.work_max_attempts,
        sweep=Sweep(_sweepers(turns, tasks)),
    )


def build_deliver(
    settings: Settings | None = None,
    store: TaskStore | None = None,
    module: HandlerModule | None = None,
) -> QueueTargetApp:
    """The `deliver` function: Cloud Tasks hands it push deliveries. It only reads tasks, so
    its store needs no notifier."""
    from shared.bindings.queue_target import QueueTargetApp

    settings = settings or Settings.from_env()
    store = store or _store(settings)
    configs = _push_configs(settings, store)
    if configs is None:
        raise SettingsError("the deliver function needs A2A_PUSH_NOTIFICATIONS=true")
    store = traced(store)
    module = module or load_handler_module(settings.handler)
    deliverer = _deliverer(settings, store, configs, module)
    # Its own queue, to queue a delivery again that finds its config busy (none with the
    # emulator and no A2A_DELIVER_URL: the queue's retry comes back instead), made when first
    # needed: most deliveries never wait, and the Cloud Tasks client costs a cold start 0.4 s.
    if settings.region is not None and settings.deliver_url is not None:
        deliverer.queue = _FirstUse(
            lambda: _cloud_queue(settings, settings.push_queue, settings.deliver_url)
        )
    return QueueTargetApp(
        "deliver",
        deliverer.deliver,
        _verifier(settings),
        url=_own_url(settings, "deliver", settings.deliver_url),
        max_attempts=settings.push_max_attempts,
    )
