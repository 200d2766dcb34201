"""Cloud Functions entry points: thin wrappers over the `shared` library (wired in shared.app).

`a2a` is the public agent: its card, JSON-RPC, HTTP+JSON and the seeds' legacy routes.
`worker` runs background turns and `deliver` posts push notifications, both for Cloud Tasks.
Each deployed function imports this module but serves one entry point, so each app is built
at its function's first call, with only what that function uses (see README, "Settings").
The settings and the handler module are read at import: a bad setting, a module that does
not load or a misspelt declaration stops start-up whichever function this is, instead of
failing its first request.

SIGTERM (Cloud Run's notice before it stops an instance) and Ctrl-C stop what this process
built at once: its streams end within a second, cleanly (their clients resume elsewhere with
Last-Event-ID), and its in-process queues start nothing more. The server (gunicorn, under
functions-framework) would otherwise wait for open streams for its graceful timeout (30 s),
past Cloud Run's 10 s, and cut them.
"""

# ruff: noqa: E402 - the collector is off before the imports below (see gc.disable)
from __future__ import annotations

import gc

# What the import makes is no garbage: the collector's passes over it (~35 of them, ~15 ms of
# a cold start) find nothing. It runs again once that is frozen, at the end of this module.
gc.disable()

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import flask
import functions_framework
from gunicorn.workers.gthread import ThreadWorker  # type: ignore[import-untyped]

from shared import observability
from shared.agent import load_handler_module
from shared.app import build, build_deliver, build_worker
from shared.bindings.http import HttpApp
from shared.settings import Settings

if TYPE_CHECKING:  # the a2a function never loads it: shared.app imports it to build the others
    from shared.bindings.queue_target import QueueTargetApp

App = TypeVar("App")

_SETTINGS = Settings.from_env()
observability.setup(_SETTINGS)  # logs (JSON on Cloud Functions) and, when asked, tracing
_MODULE = load_handler_module(_SETTINGS.handler)


_BUILT: list[HttpApp] = []  # what a shutdown stops (the worker's and deliver's hold nothing)


def _stop_on_shutdown() -> None:
    """Stop every app built here, then let the server's own handler of the signal go on.

    The server's worker process sets its own handlers for SIGTERM (handle_exit) and SIGINT
    (handle_quit) after this module is imported, and offers no hook for SIGTERM: its worker
    class's (gthread, functions-framework's) two handlers are wrapped before it is forked.

    Ctrl-C reaches the worker twice: from the terminal, then from the server's arbiter (as
    SIGQUIT), and the second may come while the first is still closing, in the same thread.
    Only the first closes and hands on: closing again there would wait forever on a lock the
    interrupted close holds."""
    first = threading.Lock()
    for name in ("handle_exit", "handle_quit"):
        original = getattr(ThreadWorker, name)

        def handler(worker: Any, sig: int, frame: Any, original: Any = original) -> None:
            if not first.acquire(blocking=False):
                return  # the first signal's handler is closing, then hands on
            for app in list(_BUILT):
                app.close()
            original(worker, sig, frame)

        setattr(ThreadWorker, name, handler)


_stop_on_shutdown()


def _once(make: Callable[..., App]) -> Callable[[], App]:
    """`make` with the settings and the handler module read at import, called at the first
    use only, even when requests race to it: two apps would mean two embedded stores."""
    lock = threading.Lock()
    made: list[App] = []

    def get() -> App:
        if made:  # every request after the first: no lock to contend for among the threads
            return made[0]
        with lock:
            if not made:
                app = make(_SETTINGS, module=_MODULE)
                made.append(app)
                if isinstance(app, HttpApp):
                    _BUILT.append(app)
            return made[0]

    return get


_a2a: Callable[[], HttpApp] = _once(build)
_worker: Callable[[], QueueTargetApp] = _once(build_worker)
_deliver: Callable[[], QueueTargetApp] = _once(build_deliver)


@functions_framework.http
def a2a(request: flask.Request) -> flask.Response:
    return _a2a()(request)


@functions_framework.http
def worker(request: flask.Request) -> flask.Response:
    return _worker()(request)


@functions_framework.http
def deliver(request: flask.Request) -> flask.Response:
    return _deliver()(request)


# functions-framework imports this module in gunicorn's arbiter, then forks the worker that
# serves. Frozen, what was made so far (every module loaded) is left out of the collector's
# passes: the worker's collections neither walk it nor write to its pages, which stay shared
# with the arbiter instead of being copied into the worker.
gc.freeze()
gc.enable()
