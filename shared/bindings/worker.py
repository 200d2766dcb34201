"""The HTTP face of the `worker` function: Cloud Tasks POSTs a job, the answer says its fate.

Only Cloud Tasks may call: its token is checked before anything else (shared.tasks_auth).
The status code is the whole protocol: 2xx lets Cloud Tasks forget the job (done, or nothing
to do), anything else makes it retry with backoff. Errors are JSON, never a traceback.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import flask

from shared.ports import Delivery
from shared.settings import Settings
from shared.tasks_auth import TokenRefused, TokenVerifier, bearer
from shared.worker import BadJob, Worker

log = logging.getLogger("a2a.worker")


def _json(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> flask.Response:
    body = json.dumps(payload, separators=(",", ":"))
    return flask.Response(body, status=status, mimetype="application/json", headers=headers)


class WorkerApp:
    def __init__(self, worker: Worker, verifier: TokenVerifier, settings: Settings) -> None:
        self.worker = worker
        self._verifier = verifier
        self._settings = settings

    def __call__(self, request: flask.Request) -> flask.Response:
        if request.method != "POST":
            return _json({"error": "the worker takes Cloud Tasks' POST requests only"}, 405)
        try:
            token = bearer(request.headers.get("Authorization"))
            self._verifier.verify(token, self._audience(request))
        except TokenRefused as exc:
            log.warning("refused a call to the worker: %s", exc)
            return _json(
                {"error": f"only Cloud Tasks may call the worker: {exc}"},
                401,
                {"WWW-Authenticate": "Bearer"},
            )
        try:
            payload = json.loads(request.get_data())
        except ValueError:
            return _json({"error": "the body must be a JSON job"}, 400)
        attempt = _count(request.headers.get("X-CloudTasks-TaskRetryCount"))
        delivery = Delivery(attempt, final=attempt + 1 >= self._settings.work_max_attempts)
        try:
            outcome = self.worker.deliver(payload, delivery)
        except BadJob as exc:
            return _json({"error": f"not a job: {exc}"}, 400)
        except Exception:
            log.exception("the job failed (attempt %d); Cloud Tasks retries it", attempt + 1)
            return _json({"error": "the job failed; the worker's log says why"}, 500)
        return _json({"outcome": outcome.value}, 200 if outcome.accepted else 503)

    def _audience(self, request: flask.Request) -> str:
        """The URL Cloud Tasks addresses its tokens to: A2A_WORKER_URL, else this request's
        (the deploy cannot tell a function its own URL before it exists)."""
        if self._settings.worker_url:
            return self._settings.worker_url
        proto = request.headers.get("X-Forwarded-Proto", request.scheme).split(",")[0].strip()
        return f"{proto}://{request.host}{request.path}"


def _count(header: str | None) -> int:
    try:
        return max(0, int(header or 0))
    except ValueError:
        return 0
