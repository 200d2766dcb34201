"""Wiring: settings -> store, handler module, service, card -> the `a2a` HTTP app.

Adapters for Google services are imported only when the settings choose them, so the
embedded backend never pays for the Google client libraries at cold start.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from shared.agent import HandlerModule, load_handler_module
from shared.bindings.http import HttpApp
from shared.card import AgentCard, card_template
from shared.identity import Authenticator
from shared.ports import TaskStore
from shared.service import A2AService
from shared.settings import Settings


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

    return MemoryTaskStore()


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
    )
    card = AgentCard(
        card_template(module, settings), _card_time(module), hybrid=settings.card_style == "hybrid"
    )
    return HttpApp(service, card, Authenticator(settings), settings)
