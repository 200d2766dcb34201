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
from shared.ports import PushConfigStore, TaskStore
from shared.push_signing import NotificationSigner
from shared.push_url import check_push_url
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


def _push_store(settings: Settings, store: TaskStore) -> PushConfigStore | None:
    if not settings.push_notifications:
        return None
    if settings.backend == "firestore":
        from shared.store.firestore import FirestoreTaskStore
        from shared.store.firestore_push import FirestorePushConfigStore

        assert isinstance(store, FirestoreTaskStore)
        return FirestorePushConfigStore(store.client, retention=store.retention, cost=store.cost)
    from shared.store.memory_push import MemoryPushConfigStore

    return MemoryPushConfigStore()


def _card_time(module: HandlerModule) -> datetime:
    """The handler module's file time: the same on every instance of one deployment."""
    path = getattr(sys.modules.get(module.name), "__file__", None)
    if path:
        return datetime.fromtimestamp(Path(path).stat().st_mtime, UTC)
    return datetime.now(UTC)


def build(settings: Settings | None = None, store: TaskStore | None = None) -> HttpApp:
    settings = settings or Settings.from_env()
    module = load_handler_module(settings.handler)
    store = store or _store(settings)
    hosts = settings.push_allowed_hosts
    service = A2AService(
        store,
        module,
        commit_interval=settings.commit_interval,
        deduplicate=settings.deduplicate_messages,
        push_configs=_push_store(settings, store),
        check_push_url=lambda url: check_push_url(url, allowed_hosts=hosts),
    )
    card = AgentCard(
        card_template(module, settings), _card_time(module), hybrid=settings.card_style == "hybrid"
    )
    signer = None
    if settings.push_signing_key:
        issuer = settings.public_url or module.info.name
        signer = NotificationSigner(settings.push_signing_key, issuer=issuer)
    return HttpApp(service, card, Authenticator(settings), settings, signer)
