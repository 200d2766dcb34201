"""`make soak`: the chaos soak (issue 27). The production shape on the emulators (tests/soak/
stack.py), a mixed load of several owners (load.py) and faults drawn from a seed (faults.py)
for SOAK_SECONDS; then, once the stack is whole and quiet, the ledger (ledger.py) holds what
Firestore stored against every client's log. Prints the seed, the faults and the counts; exits
1 on any violation. Always stops every process it started.

    SOAK_SECONDS (300)  SOAK_SEED (random, printed)  SOAK_OWNERS (3)  SOAK_CLIENTS (6 an owner)
    SOAK_DIR (build/soak/<seed>): the client logs, faults.jsonl, hooks.json, the servers' output
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from shared.model import TaskState
from shared.store.firestore import FirestoreTaskStore
from shared.store.firestore_push import FirestorePushConfigStore
from tests.soak.faults import Injector, schedule
from tests.soak.ledger import Evidence, Ledger
from tests.soak.load import run_clients
from tests.soak.receiver import Receiver
from tests.soak.stack import Stack, SweepTimer, start_emulators

ROOT = Path(__file__).resolve().parents[2]
QUIET = 180.0  # seconds the stack has, after the load, to settle every task and delivery


@dataclass(frozen=True)
class Options:
    seconds: float
    seed: int
    owners: int
    clients: int
    folder: Path

    @staticmethod
    def from_env() -> Options:
        seed = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(10**6))
        folder = os.environ.get("SOAK_DIR") or str(ROOT / "build" / "soak" / str(seed))
        return Options(
            float(os.environ.get("SOAK_SECONDS") or 300),
            seed,
            int(os.environ.get("SOAK_OWNERS") or 3),
            int(os.environ.get("SOAK_CLIENTS") or 6),
            Path(folder),
        )


def main() -> int:
    # Stopped by a signal (a CI job's timeout, `kill`), it still stops what it started: the
    # `finally` below runs for SystemExit as it does for Ctrl-C.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    options = Options.from_env()
    options.folder.mkdir(parents=True, exist_ok=True)
    owners = [f"owner-{n}" for n in range(options.owners)]
    faults = schedule(options.seed, options.seconds)
    print(
        f"soak: seed {options.seed}, {options.seconds:g} s, {len(owners)} owners x "
        f"{options.clients} clients, {len(faults)} faults; logs in {options.folder}",
        flush=True,
    )
    firestore, tasks = start_emulators()
    stack = Stack(firestore, tasks, logs=options.folder)
    receiver = Receiver()
    injector: Injector | None = None
    sweeper: SweepTimer | None = None
    try:
        stack.start(owners, options.seed, "localhost")
        print(f"soak: stack up ({', '.join(sorted(stack.processes))}); load starts", flush=True)
        sweeper = SweepTimer(stack, tasks.secret or "", random.Random(f"sweep-{options.seed}"))
        sweeper.start()
        injector = Injector(stack, receiver, faults, options.folder / "faults.jsonl")
        origin = time.monotonic()
        injector.start(origin)
        scenarios = run_clients(
            owners,
            per_owner=options.clients,
            seed=options.seed,
            a2a=stack.urls("a2a"),
            receiver=receiver,
            logs=options.folder,
            origin=origin,
            seconds=options.seconds,
        )
        injector.close()
        print(
            f"soak: load done after {time.monotonic() - origin:.0f} s: {dict(scenarios)}",
            flush=True,
        )
        store = FirestoreTaskStore(firestore.project)
        configs = FirestorePushConfigStore(store.client, retention=store.retention, cost=store.cost)
        quiesce(store, configs, options.folder, owners)
        (options.folder / "hooks.json").write_text(json.dumps(receiver.accepted()))
        evidence = Evidence.read(options.folder)
        report = Ledger(store, configs, evidence, owners, datetime.now(UTC)).check()
    finally:
        if sweeper is not None:
            sweeper.close()
        if injector is not None:
            injector.close()
        save_outputs(stack, options.folder)
        stack.close()
        receiver.close()
    kinds = Counter(f"{w.fault.kind} {w.fault.target.split('-')[0]}" for w in injector.windows)
    report.counts["faults"] = len(injector.windows)
    report.counts["sweeps"] = sweeper.sweeps
    report.counts["sweep re-drives"] = sweeper.redriven
    print(f"soak: seed {options.seed}; faults: {dict(sorted(kinds.items()))}")
    print(report.text(), flush=True)
    return 1 if report.violations else 0


def quiesce(
    store: FirestoreTaskStore,
    configs: FirestorePushConfigStore,
    folder: Path,
    owners: list[str],
) -> None:
    """Wait (QUIET seconds at most) until every task the clients were answered with is
    settled and every push config has caught up with its task or recorded its failure: what
    the stack alone does after the load (its queues, the sweep), nobody reading."""
    evidence = Evidence.read(folder)
    tasks = {(r["owner"], r["task"]) for r in evidence.records if r.get("task")}
    pushes = {
        (r["owner"], r["task"], r["config"])
        for r in evidence.records
        if r.get("op") == "push-config"
    }
    settled = {
        TaskState.COMPLETED,
        TaskState.FAILED,
        TaskState.CANCELED,
        TaskState.REJECTED,
        TaskState.INPUT_REQUIRED,
    }
    deadline = time.monotonic() + QUIET
    while time.monotonic() < deadline:
        for owner, task_id in list(tasks):
            stored = store.get(owner, task_id)
            if stored is not None and stored.task.status.state in settled and stored.lease is None:
                tasks.discard((owner, task_id))
        for owner, task_id, config_id in list(pushes):
            stored = store.get(owner, task_id)
            config = configs.get(owner, task_id, config_id)
            if (
                stored is None  # nothing to wait for: the ledger says what is missing
                or config is None
                or config.delivered_seq >= stored.last_seq
                or config.last_error is not None
            ):
                pushes.discard((owner, task_id, config_id))
        if not tasks and not pushes:
            return
        time.sleep(1)  # the stack's own work: nothing in this process to wait on
    print(f"soak: {len(tasks)} tasks and {len(pushes)} push configs still busy after {QUIET:g} s")


def save_outputs(stack: Stack, folder: Path) -> None:
    """Each live process's output beside the logs (a restarted one's since its restart)."""
    for name, process in stack.processes.items():
        with contextlib.suppress(ValueError):  # its log is closed
            (folder / f"{name}.log").write_text(process.output())


if __name__ == "__main__":
    sys.exit(main())
