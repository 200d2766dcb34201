"""Wiring: settings -> store, queue, handler module, service, card -> the `a2a` HTTP app;
settings -> store, handler module, worker, token check -> the `worker` HTTP app.

Adapters for Google services are imported only when the settings choose them, so the
embedded backend never pays for the Google client libraries at cold start.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from shared.agent import HandlerModule, load_handler_module
from shared.bindings.http import HttpApp
from shared.bindings.worker import WorkerApp
from shared.card import AgentCard, card_template
from shared.identity import Authenticator
from shared.ports import TaskQueue, TaskStore
from shared.service import A2AService
from shared.settings import Settings, SettingsError
from shared.tasks_auth import EmulatorTokens, GoogleTokens, TokenVerifier
from shared.worker import Worker


def _store(settings: Settings) -> TaskStore:
    if settings.backend == "firestore":
        from shared.store.firestore import FirestoreTaskStore

        return FirestoreTaskStore(
            settings.project,
            database=settings.firestore_database,
            retention_days=settings.retention_days,
        )
    from shared.store.memory import MemoryTaskStore

    return MemoryTaskStore()


def _queue(settings: Settings) -> TaskQueue | None:
    """The Cloud Tasks queue to the worker function, or None: the service runs background
    turns in process."""
    if settings.worker_url is None:
        return None
    from shared.queue.cloud_tasks import CloudTasksQueue

    assert settings.tasks_service_account is not None  # Settings.from_env checked it
    return CloudTasksQueue(
        f"projects/{settings.project}/locations/{settings.region}/queues/{settings.work_queue}",
        settings.worker_url,
        settings.tasks_service_account,
        emulator_host=settings.tasks_emulator_host,
    )


def _verifier(settings: Settings) -> TokenVerifier:
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


def _card_time(module: HandlerModule) -> datetime:
    """The handler module's file time: the same on every instance of one deployment."""
    path = getattr(sys.modules.get(module.name), "__file__", None)
    if path:
        return datetime.fromtimestamp(Path(path).stat().st_mtime, UTC)
    return datetime.now(UTC)


def build(settings: Settings | None = None, store: TaskStore | None = None) -> HttpApp:
    settings = settings or Settings.from_env()
    module = load_handler_module(settings.handler)
    service = A2AService(
        store or _store(settings),
        module,
        commit_interval=settings.commit_interval,
        deduplicate=settings.deduplicate_messages,
        queue=_queue(settings),
        blocking_wait=settings.blocking_wait,
        lease_seconds=settings.lease_seconds,
    )
    card = AgentCard(
        card_template(module, settings), _card_time(module), hybrid=settings.card_style == "hybrid"
    )
    return HttpApp(service, card, Authenticator(settings), settings)


def build_worker(settings: Settings | None = None, store: TaskStore | None = None) -> WorkerApp:
    settings = settings or Settings.from_env()
    worker = Worker(
        store or _store(settings),
        load_handler_module(settings.handler),
        commit_interval=settings.commit_interval,
        lease_seconds=settings.lease_seconds,
    )
    return WorkerApp(worker, _verifier(settings), settings)
