"""The soak's faults: a schedule drawn from the seed before the run (`schedule`), played
against the stack (`Injector`), each fault logged with the window it really took.

Kinds: `kill` (SIGKILL of one function process, restarted in its place after a pause; its
window lasts until the new process answers), `pause` (SIGSTOP of the Firestore or Cloud Tasks
emulator, SIGCONT 1-15 s later), `webhook` (the receiver answers 500, or hangs, for a while).
One target has one fault at a time; faults of different targets overlap.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from tests.soak.receiver import Receiver
from tests.soak.stack import COUNTS, Stack, pause, resume

# Mean seconds between two draws (a draw whose target is still busy is dropped): 300 s
# gives 55-65 faults.
MEAN_GAP = 3.5
# Where faults go: function processes most, as instances die most often.
KINDS = (("kill", 5), ("pause", 3), ("webhook", 2))


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the load's start
    kind: str  # kill | pause | webhook
    target: str  # a process name, "firestore" | "tasks", or "fail" | "hang"
    seconds: float  # how long it lasts (kill: before the restart)


def schedule(seed: int, length: float) -> list[Fault]:
    """The faults of a run of `length` seconds, the same for the same seed; none starts in the
    last tenth, so the stack is whole again before the load ends."""
    rng = random.Random(f"faults-{seed}")
    names = [f"{target}-{n}" for target, count in COUNTS.items() for n in range(count)]
    kinds = [kind for kind, weight in KINDS for _ in range(weight)]
    busy: dict[str, float] = {}  # target -> when its fault ends
    faults: list[Fault] = []
    at = rng.uniform(1, MEAN_GAP)
    while at < length * 0.9:
        kind = rng.choice(kinds)
        if kind == "kill":
            target, seconds = rng.choice(names), rng.uniform(0.2, 3)
        elif kind == "pause":
            target, seconds = rng.choice(("firestore", "tasks")), rng.uniform(1, 15)
        else:
            target, seconds = rng.choice(("fail", "hang")), rng.uniform(2, 20)
        key = "webhook" if kind == "webhook" else target
        if busy.get(key, -1.0) < at:
            faults.append(Fault(round(at, 3), kind, target, round(seconds, 3)))
            busy[key] = at + seconds + (10 if kind == "kill" else 0)  # and its restart
        at += rng.expovariate(1 / MEAN_GAP)
    return faults


@dataclass(frozen=True)
class Window:
    """A fault as it happened: from its start to when the stack was whole again (monotonic
    seconds, the clock of the client logs)."""

    fault: Fault
    start: float
    end: float


class Injector:
    """Plays a schedule: each fault on a thread of its own at its time; `windows` once done."""

    def __init__(self, stack: Stack, receiver: Receiver, faults: list[Fault], log: Path) -> None:
        self._stack = stack
        self._receiver = receiver
        self._faults = faults
        self._log: IO[str] = log.open("w")
        self._lock = threading.Lock()
        self.windows: list[Window] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._main = threading.Thread(target=self._play, name="faults", daemon=True)
        self.origin = 0.0

    def start(self, origin: float) -> None:
        self.origin = origin
        self._main.start()

    def close(self) -> None:
        """Stop starting faults; wait for those under way to end (each is bounded)."""
        self._stop.set()
        self._main.join()
        for thread in self._threads:
            thread.join(90)
        self._log.close()

    def _play(self) -> None:
        for fault in self._faults:
            if self._stop.wait(max(0.0, self.origin + fault.at - time.monotonic())):
                return
            thread = threading.Thread(target=self._inject, args=(fault,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _inject(self, fault: Fault) -> None:
        start = time.monotonic()
        error = ""
        try:
            if fault.kind == "kill":
                self._stack.kill(fault.target)
                time.sleep(fault.seconds)  # the instance is gone this long: the fault itself
                self._stack.restart(fault.target)
            elif fault.kind == "pause":
                pid = (
                    self._stack.firestore if fault.target == "firestore" else self._stack.tasks
                ).pid
                pause(pid)
                try:
                    time.sleep(fault.seconds)  # the outage itself
                finally:
                    resume(pid)
            else:
                self._receiver.set_mode(fault.target)
                try:
                    time.sleep(fault.seconds)  # the webhook's bad spell itself
                finally:
                    self._receiver.set_mode("ok")
        except Exception as exc:  # logged with its window: the report shows it
            error = repr(exc)
        end = time.monotonic()
        window = Window(fault, start, end)
        with self._lock:
            self.windows.append(window)
            line = {**asdict(fault), "start": start - self.origin, "end": end - self.origin}
            if error:
                line["error"] = error
            self._log.write(json.dumps(line) + "\n")
            self._log.flush()
