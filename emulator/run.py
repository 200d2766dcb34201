"""What `make run` checks before it starts the server, each failure one line and exit 1, so
that nothing says "ready" for another program or prints a server's traceback:

- its port is free (emulator._process.port_taken): a busy one is named, with a free port to
  pick instead;
- its handler module is there (emulator/handler.py): a missing one is named, with the
  closest handler module that exists.

    PYTHONPATH=... python -m emulator.run --host HOST --port PORT HANDLER

Run with the server's PYTHONPATH. Imports only the standard library.
"""

from __future__ import annotations

import argparse
import sys

from emulator import handler
from emulator._process import port_taken

LOOK_AHEAD = 50  # ports above a busy one tried for a free one to suggest


def port_problem(host: str, port: int) -> str | None:
    """Why the server cannot listen on host:port, or None when it can."""
    try:
        taken = port_taken(host, port)
    except OSError as exc:
        return (
            f"error: cannot listen on {host}:{port} ({exc.strerror or exc}): pick a port above "
            "1023 and an address of this machine (make run PORT=8080, HOST left out)"
        )
    if not taken:
        return None
    free = next_free(host, port)
    pick = f"make run PORT={free}" if free is not None else "make run PORT=N"
    return (
        f"error: port {port} is in use: another program listens on it (`lsof -iTCP:{port} "
        f"-sTCP:LISTEN` names it); stop it, or pick another port: {pick}"
    )


def next_free(host: str, port: int) -> int | None:
    """The first port above `port` the server could listen on, if one is near."""
    for candidate in range(port + 1, min(port + LOOK_AHEAD, 65535) + 1):
        try:
            if not port_taken(host, candidate):
                return candidate
        except OSError:
            continue
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulator.run", description=__doc__)
    parser.add_argument("handler", help="the handler module (HANDLER)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    if not 1 <= args.port <= 65535:
        print(
            f"error: PORT={args.port} is not a port (1 to 65535): make run PORT=8080",
            file=sys.stderr,
        )
        return 1
    problem = port_problem(args.host, args.port)
    if problem is None:
        found = handler.find(args.handler)
        problem = found if isinstance(found, str) else None
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
