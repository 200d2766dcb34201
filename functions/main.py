"""Cloud Functions entry points: thin wrappers over the `shared` library.

`a2a` is the public agent: its card, JSON-RPC, and the seeds' legacy routes. The app is
built at import, once per instance, from the environment (see README, "Settings").
`worker` runs background turns and `deliver` posts push notifications, both for Cloud Tasks;
each is built at its first call (only that function needs its token check) and shares the
a2a app's task store.
"""

from __future__ import annotations

import functools

import flask
import functions_framework

from shared.app import build, build_deliver, build_worker
from shared.bindings.queue_target import QueueTargetApp

_a2a = build()


@functools.cache
def _worker() -> QueueTargetApp:
    return build_worker(store=_a2a.service.store)


@functools.cache
def _deliver() -> QueueTargetApp:
    return build_deliver(store=_a2a.service.store)


@functions_framework.http
def a2a(request: flask.Request) -> flask.Response:
    return _a2a(request)


@functions_framework.http
def worker(request: flask.Request) -> flask.Response:
    return _worker()(request)


@functions_framework.http
def deliver(request: flask.Request) -> flask.Response:
    return _deliver()(request)
