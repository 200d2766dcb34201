"""The HTTP face of a Cloud Tasks target (`worker`, `deliver`): a POSTed payload in, its
fate out.

Only Cloud Tasks may call: its token is checked before anything else (shared.tasks_auth),
the body read past what came with the head only after it.
The status code is the whole protocol: 2xx lets Cloud Tasks forget the payload (done, or
nothing to do), anything else makes it retry with backoff. Errors are JSON, never a traceback.

The worker also takes `POST /sweep` (shared.sweep) from Cloud Scheduler, with a token of the
same account: it re-drives what failures left behind and says how many items it did.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Generator
from typing import Any

from shared.bindings.json_http import json_response
from shared.bindings.wire import Answer, BodyRefused, Request, http_log, logged_when_answered
from shared.jobs import Outcome
from shared.observability.context import CLOUD_TRACE, TRACEPARENT, note
from shared.observability.work import unit
from shared.pause import Later, Waiting, begun
from shared.ports import BadPayload, Delivery
from shared.sweep import Sweep
from shared.tasks_auth import TokenRefused, TokenVerifier, bearer

log = logging.getLogger("a2a.queue_target")

# Takes one payload and its attempt; raises BadPayload when it cannot read the payload. Its
# outcome may come once its work is done: a worker's turn (shared.pause.Waiting).
Target = Callable[[dict[str, Any], Delivery], Outcome | Waiting[Outcome]]


class QueueTargetApp:
    def __init__(
        self,
        name: str,
        target: Target,
        verifier: TokenVerifier,
        *,
        url: str | None,
        max_attempts: int,
        sweep: Sweep | None = None,
    ) -> None:
        """`url` is the target's own URL (the audience of its tokens, `/sweep` included); None
        only with the local Cloud Tasks emulator (shared.app refuses it otherwise). `sweep`:
        what `POST /sweep` runs (None: the path is a payload's like any other)."""
        self.name = name
        self.target = target
        self._verifier = verifier
        self._url = url
        self._max_attempts = max_attempts
        self.sweep = sweep

    def __call__(self, request: Request) -> Answer:
        """The answer, and the call's one log line (shared.observability), in the trace of
        the request that queued the payload (its `traceparent` travels on the task)."""
        headers = request.headers
        opened = unit(
            self.name, traceparent=headers.get(TRACEPARENT), cloud_trace=headers.get(CLOUD_TRACE)
        )
        with opened as record:
            response = self._answer(request)
            if response.later is not None:  # a turn runs: its line once it is done
                kept = opened.keep()
                # Cloud Tasks calls from Google's network: no forwarded address of a client.
                return Answer(
                    later=logged_when_answered(request, response.later, kept, forwarded=False)
                )
            record.fields["httpRequest"] = http_log(request, response.status, forwarded=False)
        return response

    def _answer(self, request: Request) -> Answer:
        if request.method != "POST":
            return json_response(
                {"error": f"the {self.name} takes Cloud Tasks' POST requests only"}, 405
            )
        try:
            token = bearer(request.headers.get("Authorization"))
            self._verifier.verify(token, self._audience(request))
        except TokenRefused as exc:
            log.warning("refused a call to the %s: %s", self.name, exc)
            return json_response(
                {"error": f"only Cloud Tasks may call the {self.name}: {_refusal(exc.reason)}"},
                401,
                {"WWW-Authenticate": "Bearer"},
            )
        if self.sweep is not None and request.path.rstrip("/").endswith("/sweep"):
            redriven = self.sweep.run()
            note(outcome="swept", redriven=redriven)
            return json_response({"outcome": "swept", "redriven": redriven}, 200)
        try:  # read only now, once the token is known good
            payload = json.loads(request.read())
        except BodyRefused as refused:
            retry = {} if refused.retry_after is None else {"Retry-After": str(refused.retry_after)}
            return json_response({"error": refused.message}, refused.status, retry)
        except ValueError:
            return json_response({"error": "the body must be a JSON object"}, 400)
        attempt = _count(request.headers.get("X-CloudTasks-TaskRetryCount"))
        delivery = Delivery(attempt, final=attempt + 1 >= self._max_attempts)
        note(attempt=attempt, queueLagSeconds=_lag(request.headers.get("X-CloudTasks-TaskETA")))
        answer = begun(self._delivered(payload, delivery))
        return Answer(later=answer.rest()) if isinstance(answer, Later) else answer

    def _delivered(self, payload: dict[str, Any], delivery: Delivery) -> Waiting[Answer]:
        """The target's outcome as an answer, once it is done (a worker's turn waits)."""
        try:
            result = self.target(payload, delivery)
            outcome = (yield from result) if isinstance(result, Generator) else result
        except BadPayload as exc:
            return json_response({"error": f"not a payload of the {self.name}: {exc}"}, 400)
        except Exception:
            attempt = delivery.attempt
            log.exception("%s: attempt %d failed; Cloud Tasks retries it", self.name, attempt + 1)
            return json_response({"error": f"the {self.name} failed; its log says why"}, 500)
        return json_response({"outcome": outcome.value}, 200 if outcome.accepted else 503)

    def _audience(self, request: Request) -> str:
        """The URL Cloud Tasks addresses its tokens to: the configured one; with the local
        emulator (whose tokens are signed with a shared secret) this request's."""
        if self._url:
            return self._url
        proto = (request.headers.get("X-Forwarded-Proto") or request.scheme).split(",")[0].strip()
        return f"{proto}://{request.host}{request.path}"


# What a refused caller is told: the class of the reason only. The expected account and
# audience (in the exception's message) go to the log: told to the caller, they would say
# whom to obtain a token as, and for what.
_REFUSALS = {
    "no token": "the token is missing",
    "wrong audience": "the token is for another audience or account",
    "wrong account": "the token is for another audience or account",
    "wrong issuer": "the token is for another audience or account",
    "signing keys unavailable": "the token cannot be checked now",
}


def _refusal(reason: str) -> str:
    return _REFUSALS.get(reason, "the token is invalid")


def _count(header: str | None) -> int:
    try:
        return max(0, int(header or 0))
    except ValueError:
        return 0


def _lag(eta: str | None) -> float | None:
    """Seconds between when Cloud Tasks was to dispatch this attempt (X-CloudTasks-TaskETA,
    seconds since the epoch) and now: the queue's lag. None when the header is unusable."""
    try:
        due = float(eta or "")
    except ValueError:
        return None
    if not math.isfinite(due):
        return None
    return round(max(time.time() - due, 0.0), 6)
