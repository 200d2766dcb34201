"""`python -m emulator`: run the Firestore and Cloud Tasks emulators by hand (`make emulators`).

    python -m emulator [start] [--firestore-port 8085] [--tasks-port 9022] [--queue NAME]...
    python -m emulator setup     # install the Cloud Tasks venv and chromium; check java, the jar
    python -m emulator dev ...   # the three functions on both emulators (emulator/dev.py)

start prints the variables to export and runs until Ctrl-C (or SIGTERM), then stops both
emulators by PID. setup is for CI images: it does the one-time work ahead of `make test`.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import time
from types import FrameType

from emulator import cloud_tasks, firestore
from emulator._process import EmulatorError, log_tail
from emulator.browser import ensure_chromium
from emulator.cloud_tasks import TasksEmulator, ensure_tasks_venv, start_tasks_emulator
from emulator.firestore import FirestoreEmulator, find_jar, find_java, start_firestore


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m emulator", description=__doc__.split("\n")[0])
    parser.add_argument("command", nargs="?", choices=["start", "setup"], default="start")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--firestore-port", type=int, default=firestore.DEFAULT_PORT)
    parser.add_argument("--tasks-port", type=int, default=cloud_tasks.DEFAULT_PORT)
    parser.add_argument(
        "--project", default=firestore.DEFAULT_PROJECT, help="for GOOGLE_CLOUD_PROJECT"
    )
    parser.add_argument(
        "--queue",
        action="append",
        default=[],
        help="create this Cloud Tasks queue at start (projects/P/locations/L/queues/Q)",
    )
    parser.add_argument("--no-firestore", action="store_true", help="only Cloud Tasks")
    parser.add_argument("--no-tasks", action="store_true", help="only Firestore")
    return parser


def setup() -> int:
    """Install the tasks venv and chromium (the console's browser tests) and check java and
    the jar; 0 when all is there."""
    ensure_tasks_venv(out=sys.stdout)
    print(f"java: {find_java()}\nFirestore emulator jar: {find_jar()}")
    print(f"chromium: {ensure_chromium(sys.stdout)}\nready")
    return 0


class _Stop(Exception):
    """Raised by the SIGTERM/SIGINT handler so that the finally block stops the emulators."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def start(args: argparse.Namespace) -> int:
    """Start what was asked, print the exports, wait for Ctrl-C, stop everything."""
    store: FirestoreEmulator | None = None
    tasks: TasksEmulator | None = None
    signal.signal(signal.SIGTERM, _on_sigterm)
    # Explicitly, so that `kill -INT` works even where a shell started us with SIGINT ignored.
    signal.signal(signal.SIGINT, _on_sigterm)
    try:
        if not args.no_firestore:
            store = start_firestore(args.firestore_port, host=args.host, project=args.project)
            print(
                f"Firestore emulator    {store.address}  pid {store.pid}, ready in "
                f"{store.startup_seconds:.1f} s, log {store.log_path}"
            )
        if not args.no_tasks:
            # Reuse the caller's secret, so that already-configured workers keep working.
            secret = os.environ.get(cloud_tasks.SECRET_ENV) or secrets.token_urlsafe(24)
            tasks = start_tasks_emulator(
                args.tasks_port, host=args.host, secret=secret, queues=args.queue, out=sys.stdout
            )
            print(
                f"Cloud Tasks emulator  {tasks.address}  pid {tasks.pid}, ready in "
                f"{tasks.startup_seconds:.1f} s, log {tasks.log_path}"
            )
        exports = {"GOOGLE_CLOUD_PROJECT": args.project}
        for emu in (store, tasks):
            exports.update(emu.env() if emu else {})
        print("\nExport these where the functions and tests run:")
        for key, value in exports.items():
            print(f"export {key}={value}")
        if tasks:
            print(f"(clients: emulator.cloud_tasks.tasks_client() reads ${cloud_tasks.HOST_ENV})")
        print("\nRunning; Ctrl-C stops both.", flush=True)
        while True:
            for emu in (store, tasks):
                if emu is not None and not emu.alive():
                    print(
                        f"\n{type(emu).__name__} (pid {emu.pid}) exited. Log {emu.log_path}:\n"
                        f"{log_tail(emu.log_path)}",
                        file=sys.stderr,
                    )
                    return 1
            time.sleep(0.5)
    except EmulatorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except _Stop:
        print("\nstopping")
        return 0
    finally:
        for emu in (tasks, store):
            if emu is not None:
                emu.stop()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["dev"]:
        from emulator import dev

        return dev.main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "setup":
        try:
            return setup()
        except EmulatorError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return start(args)


if __name__ == "__main__":
    raise SystemExit(main())
