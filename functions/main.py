"""Cloud Functions entry points: thin wrappers over the `shared` library (wired in shared.app).

`a2a` is the public agent: its card, JSON-RPC, HTTP+JSON and the seeds' legacy routes.
`worker` runs background turns and `deliver` posts push notifications, both for Cloud Tasks.
Each deployed function imports this module but serves one entry point, so each app is built
at its function's first call, with only what that function uses (see docs/settings.md).
The settings and the handler module are read at import: a bad setting, a module that does
not load or a misspelt declaration stops start-up whichever function this is, instead of
failing its first request.

All three are served on functions-framework's ASGI stack (uvicorn's event loop; their
apps run on the function's own threads: shared/bindings/asgi.py). Each function returns its
front, an ASGI app, which functions-framework then calls with the request's scope, receive
and send: the front reads the request itself.

SIGTERM (Cloud Run's notice before it stops an instance) and Ctrl-C stop what this process
built at once: its streams end within a second, cleanly (their clients resume elsewhere with
Last-Event-ID), and its in-process queues start nothing more. The server would otherwise
wait for open streams until its graceful timeout (30 s), past Cloud Run's 10 s, and cut them.
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

import functions_framework.aio
from starlette.requests import Request
from uvicorn.server import Server
from uvicorn_worker import UvicornWorker  # type: ignore[import-untyped]

from shared import observability
from shared.agent import load_handler_module
from shared.app import build, build_deliver, build_worker
from shared.bindings.asgi import Front
from shared.bindings.heads import HeadLimits, protocol
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

    The server's worker process (uvicorn's, under gunicorn) handles SIGTERM and SIGINT in
    uvicorn's `Server.handle_exit`, installed after this module is imported, and SIGQUIT
    (what gunicorn's arbiter sends its worker at Ctrl-C) in the worker's own `handle_exit`;
    neither offers a hook, so both are wrapped before the worker is forked.

    Ctrl-C reaches the worker twice: from the terminal, then from the arbiter, and the
    second may come while the first is still closing, in the same thread. Only the first
    closes and hands on: closing again there would wait forever on a lock the interrupted
    close holds."""
    first = threading.Lock()
    for owner in (Server, UvicornWorker):
        original = owner.handle_exit

        def handler(self: Any, sig: int, frame: Any, original: Any = original) -> None:
            if not first.acquire(blocking=False):
                return  # the first signal's handler is closing, then hands on
            for app in list(_BUILT):
                app.close()
            original(self, sig, frame)

        owner.handle_exit = handler  # type: ignore[method-assign]


_stop_on_shutdown()

# The server's settings: uvicorn's worker (made in gunicorn's arbiter, after this import)
# builds its server's config of these. Its HTTP protocol is httptools' with a bounded head
# (A2A_MAX_HEAD_BYTES, A2A_MAX_HEAD_LINES; 431 past them) that comes within
# A2A_HEAD_READ_SECONDS (shared/bindings/heads.py): uvicorn bounds none of these itself.
UvicornWorker.CONFIG_KWARGS = {
    **UvicornWorker.CONFIG_KWARGS,
    "http": protocol(HeadLimits.of(_SETTINGS)),
}


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


# Each function's requests run on a pool of THREADS threads (deploy.toml's `threads`, else its
# concurrency, set by `make deploy`; a waiting stream holds none); a body is read past what
# came with its head only once the app knows the caller, within A2A_MAX_BODY_BYTES,
# A2A_BODY_READ_SECONDS, A2A_MAX_BUFFERED_BYTES and the caller's A2A_MAX_OWNER_BUFFERED_BYTES
# (answers too, written within A2A_ANSWER_WRITE_SECONDS a piece).
_a2a_front = Front.of(_a2a, _SETTINGS)
_worker_front = Front.of(_worker, _SETTINGS)
_deliver_front = Front.of(_deliver, _SETTINGS)


# functions-framework awaits what an `aio` function returns as `response(scope, receive,
# send)` (starlette's request_response): the front is that callable, a plain ASGI app that
# reads the request from the scope itself, so nothing of Starlette's request or response is
# built. (Its annotation names Starlette's Response, the usual such callable: hence the
# ignores.)
@functions_framework.aio.http  # type: ignore[arg-type]
async def a2a(request: Request) -> Front:
    return _a2a_front


@functions_framework.aio.http  # type: ignore[arg-type]
async def worker(request: Request) -> Front:
    return _worker_front


@functions_framework.aio.http  # type: ignore[arg-type]
async def deliver(request: Request) -> Front:
    return _deliver_front


# functions-framework imports this module in gunicorn's arbiter, then forks the worker that
# serves. Frozen, what was made so far (every module loaded) is left out of the collector's
# passes: the worker's collections neither walk it nor write to its pages, which stay shared
# with the arbiter instead of being copied into the worker.
gc.freeze()
gc.enable()
