"""Whether a local function answers: the "ready" of `make dev` and `make run`.

A port that accepts connections is not a function that serves: functions-framework binds
before its worker has imported the handler, and a worker that fails to import it dies after.
So "ready" is an HTTP answer: `a2a`'s agent card (200), or any answer below 500 from
`worker` and `deliver` (they take only Cloud Tasks' POSTs, and refuse a bare GET).

    python -m emulator.ready --pid PID URL   # make run: print "ready" once URL answers 200

Imports only the standard library: `make run` starts it beside the server.
"""

from __future__ import annotations

import argparse
import http.client
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from emulator._process import pid_alive

CARD_PATH = "/.well-known/agent-card.json"
POLL_SECONDS = 0.05
WAIT_SECONDS = 60.0  # make run: a server that does not answer by then is not waited on


def status(url: str, timeout: float = 1.0) -> int | None:
    """The HTTP status `url` answers a GET with; None when nothing answers (yet)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            code: int = response.status
            return code
    except urllib.error.HTTPError as error:
        return error.code
    except (OSError, http.client.HTTPException):
        return None  # refused, reset, or cut mid-answer: not serving yet


def wait_answering(
    url: str,
    answered: Callable[[int], bool],
    *,
    running: Callable[[], bool],
    deadline: float,
) -> int | None:
    """Poll `url` until its status satisfies `answered`, the process stops `running`, or
    the (monotonic) deadline passes; the last status seen (None: no answer at all)."""
    seen: int | None = None
    while running() and time.monotonic() < deadline:
        seen = status(url)
        if seen is not None and answered(seen):
            return seen
        time.sleep(POLL_SECONDS)
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulator.ready", description=__doc__)
    parser.add_argument("url", help="what must answer 200, e.g. the agent card")
    parser.add_argument("--pid", type=int, required=True, help="the server: stop when it exits")
    parser.add_argument("--seconds", type=float, default=WAIT_SECONDS)
    parser.add_argument("--say", default="ready", help="the line printed once it answers")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.seconds
    try:
        seen = wait_answering(
            args.url,
            lambda code: code == 200,
            running=lambda: pid_alive(args.pid),
            deadline=deadline,
        )
    except KeyboardInterrupt:
        return 1
    if seen == 200:
        print(args.say, flush=True)
        return 0
    if pid_alive(args.pid):  # an exited server has said why itself
        print(f"not ready: {args.url} answered {seen or 'nothing'} in {args.seconds:g} s")
    return 1


if __name__ == "__main__":
    sys.exit(main())
