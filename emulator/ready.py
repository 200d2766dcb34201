"""Whether a local function answers: the "ready" of `make dev` and `make run`.

A port that accepts connections is not a function that serves: functions-framework binds
before its worker has imported the handler, and a worker that fails to import it dies after.
So "ready" is an HTTP answer: `a2a`'s agent card (200); from `worker` and `deliver`, which
take only Cloud Tasks' POSTs, functions-framework's own answer to `GET /robots.txt` (404,
given without calling the function, so its log says nothing of it; functions-framework
imports the function's module before it listens).

And an answer of this run's own server: another program on the port answers too. So an
answer counts only while the server's process (its PID; gunicorn's workers are its
children and share its socket) holds the socket that listens on the port: on Linux from
/proc (the socket inodes of /proc/net/tcp{,6} in LISTEN, against its descriptors), else
from `lsof`; where neither tells, the port checked free before the start has to do.

    python -m emulator.ready --pid PID URL   # print "ready" once PID's server answers URL 200
    python -m emulator.ready --pid PID --host HOST --port PORT   # make run: its card, asked
                                             # where a server listening on HOST is reached

Imports only the standard library: `make run` starts it beside the server.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from emulator._process import pid_alive

CARD_PATH = "/.well-known/agent-card.json"
# functions-framework answers it (404) itself: the server is up, the function is not called.
QUIET_PATH = "/robots.txt"
LISTEN = "0A"  # the LISTEN state in /proc/net/tcp
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


def reach(host: str) -> str:
    """The address to ask a server that listens on `host`: loopback for every address."""
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def holds_listener(pid: int, port: int) -> bool | None:
    """Whether the process `pid` holds a socket listening on TCP `port`; None when this
    system cannot tell."""
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if tables[0].exists():
        listening = set()
        for table in tables:
            with contextlib.suppress(OSError):
                for line in table.read_text().splitlines()[1:]:
                    fields = line.split()
                    if fields[3] == LISTEN and int(fields[1].rpartition(":")[2], 16) == port:
                        listening.add(f"socket:[{fields[9]}]")
        try:
            descriptors = os.scandir(f"/proc/{pid}/fd")
        except OSError:
            return False  # gone (or not ours to look at: not our server either)
        with descriptors:
            for fd in descriptors:
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path) in listening:
                        return True
        return False
    lsof = shutil.which("lsof")
    if lsof is None:
        return None
    asked = [lsof, "-nP", "-a", "-p", str(pid), f"-iTCP:{port}", "-sTCP:LISTEN", "-t"]
    found = subprocess.run(asked, capture_output=True, text=True, timeout=10, check=False)
    return bool(found.stdout.strip())


def wait_answering(
    url: str,
    answered: Callable[[int], bool],
    *,
    running: Callable[[], bool],
    deadline: float,
    pid: int | None = None,
) -> int | None:
    """Poll `url` until its status satisfies `answered` (and, given the server's `pid`, that
    process holds the port's listener), the process stops `running`, or the (monotonic)
    deadline passes; the last status seen (None: no answer at all, or none of `pid`'s)."""
    seen: int | None = None
    port = urlsplit(url).port or 80
    while running() and time.monotonic() < deadline:
        answer = status(url)
        ours = pid is None or answer is None or holds_listener(pid, port) is not False
        seen = answer if ours else None
        if seen is not None and answered(seen):
            return seen
        time.sleep(POLL_SECONDS)
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulator.ready", description=__doc__)
    parser.add_argument("url", nargs="?", help="what must answer 200 (default: the card)")
    parser.add_argument("--host", default="127.0.0.1", help="where the server listens")
    parser.add_argument("--port", type=int, help="the server's port, for the card's URL")
    parser.add_argument("--pid", type=int, required=True, help="the server: stop when it exits")
    parser.add_argument("--seconds", type=float, default=WAIT_SECONDS)
    parser.add_argument("--say", default="ready", help="the line printed once it answers")
    args = parser.parse_args(argv)
    if args.url is None:
        if args.port is None:
            parser.error("give the URL, or the server's --port")
        args.url = f"http://{reach(args.host)}:{args.port}{CARD_PATH}"
    deadline = time.monotonic() + args.seconds
    try:
        seen = wait_answering(
            args.url,
            lambda code: code == 200,
            running=lambda: pid_alive(args.pid),
            deadline=deadline,
            pid=args.pid,
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
