"""The soak's ledger: what the stack stored (a TaskStore and a PushConfigStore: Firestore's
after a run, any store in the ledger's own tests) held against what every client logged, what
the webhook received and when the faults were. Each invariant broken is a `Violation` named
after it; `Report.counts` says how much was checked.

The invariants (issue 27): every accepted task settled (terminal, or input-required with no
answer accepted after its question); every artifact of a task stored once; every stream,
resumed or not, saw each event once, in order, none missed; every push config's webhook got
every event in order (a repeat of an event taken before is counted as a re-post: delivery is
at least once), or the config records why not; no task `working` or `submitted` without a
live lease; no two tasks for one message (a resend names the first one's task); no 5xx or
-32603 outside a fault's window.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from shared.dialects.v1_0 import V1
from shared.model import ArtifactUpdate, StatusUpdate, TaskState
from shared.ports import PushConfigStore, StoredTask, TaskQuery, TaskStore

GRACE = 5.0  # seconds after a fault's window that its effects may still be answered
TERMINAL = {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
LIVE = {TaskState.SUBMITTED, TaskState.WORKING}
MAX_SHOWN = 5  # examples of one violation printed


@dataclass
class Evidence:
    """What the run left outside the store."""

    records: list[dict[str, Any]]  # every client's log lines
    windows: list[tuple[float, float]]  # each fault's (start, end), the records' clock
    hooks: dict[str, list[Any]]  # each webhook path's accepted bodies, in arrival order

    @staticmethod
    def read(folder: Path) -> Evidence:
        records = [
            json.loads(line)
            for path in sorted(folder.glob("client-*.jsonl"))
            for line in path.read_text().splitlines()
        ]
        faults = folder / "faults.jsonl"
        windows = [
            (line["start"], line["end"])
            for line in map(json.loads, faults.read_text().splitlines() if faults.exists() else [])
        ]
        hooks = folder / "hooks.json"
        return Evidence(records, windows, json.loads(hooks.read_text()) if hooks.exists() else {})


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str


@dataclass
class Report:
    violations: list[Violation] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def text(self) -> str:
        lines = [f"  {name}: {count}" for name, count in sorted(self.counts.items())]
        by_name: dict[str, list[Violation]] = defaultdict(list)
        for violation in self.violations:
            by_name[violation.invariant].append(violation)
        for name, found in sorted(by_name.items()):
            lines.append(f"VIOLATION {name}: {len(found)}")
            lines.extend(f"    {v.detail}" for v in found[:MAX_SHOWN])
        lines.append("ledger: clean" if not self.violations else "ledger: VIOLATED")
        return "\n".join(lines)


class Ledger:
    def __init__(
        self,
        store: TaskStore,
        configs: PushConfigStore,
        evidence: Evidence,
        owners: Iterable[str],
        now: datetime,
    ) -> None:
        self.store = store
        self.configs = configs
        self.evidence = evidence
        self.owners = list(owners)
        self.now = now
        self.report = Report()
        self._tasks: dict[tuple[str, str], StoredTask | None] = {}

    def check(self) -> Report:
        self.check_settled()
        self.check_stored()
        self.check_streams()
        self.check_pushes()
        self.check_resends()
        self.check_errors()
        return self.report

    def violation(self, invariant: str, detail: str) -> None:
        self.report.violations.append(Violation(invariant, detail))

    def task(self, owner: str, task_id: str) -> StoredTask | None:
        key = (owner, task_id)
        if key not in self._tasks:
            self._tasks[key] = self.store.get(owner, task_id)
        return self._tasks[key]

    # -- the invariants --------------------------------------------------------------------

    def check_settled(self) -> None:
        """Every task a client was answered with is terminal, or input-required when no
        answer to its question was accepted."""
        records = self.evidence.records
        accepted = {(r["owner"], r["task"]) for r in records if r.get("task") and r.get("state")}
        accepted |= {(r["owner"], r["task"]) for r in records if r.get("chain") and r.get("task")}
        answered = {
            (r["owner"], r["to"]) for r in records if r.get("to") and r.get("state") is not None
        }
        self.report.counts["tasks accepted"] = len(accepted)
        for owner, task_id in sorted(accepted):
            stored = self.task(owner, task_id)
            if stored is None:
                self.violation("accepted task settled", f"{owner}/{task_id}: not stored")
                continue
            state = stored.task.status.state
            self.report.counts[f"tasks {state.value}"] += 1
            if state in TERMINAL:
                continue
            if state is TaskState.INPUT_REQUIRED and (owner, task_id) not in answered:
                continue
            self.violation("accepted task settled", f"{owner}/{task_id}: {state.value}")

    def check_stored(self) -> None:
        """Over every owner's stored tasks: artifacts once, a live lease under every live
        task, one task per message that started one."""
        first_messages: dict[tuple[str, str], list[str]] = defaultdict(list)
        for owner in self.owners:
            for stored in self._all(owner):
                task = stored.task
                self.report.counts["tasks stored"] += 1
                self.report.counts["artifacts stored"] += len(task.artifacts)
                ids = Counter(a.artifact_id for a in task.artifacts)
                names = Counter(a.name for a in task.artifacts if a.name is not None)
                twice = [i for i, n in ids.items() if n > 1] + [
                    x for x, n in names.items() if n > 1
                ]
                if twice:
                    self.violation("artifact stored once", f"{owner}/{task.id}: {twice}")
                if task.status.state in LIVE:
                    lease = stored.lease
                    if lease is None or lease.expires is None or lease.expires <= self.now:
                        self.violation(
                            "no live task without a live lease",
                            f"{owner}/{task.id}: {task.status.state.value}, lease {lease}",
                        )
                if task.history:
                    first_messages[(owner, task.history[0].message_id)].append(task.id)
        for (owner, message_id), task_ids in sorted(first_messages.items()):
            if len(task_ids) > 1:
                self.violation(
                    "no duplicate task for a resent message",
                    f"{owner}: message {message_id} started {sorted(task_ids)}",
                )

    def check_streams(self) -> None:
        """Each stream and its resumes (one `chain`) saw event ids rising, and every event of
        the task's log between its first and its last, none missed."""
        chains: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for record in self.evidence.records:
            if record.get("chain"):
                chains[record["chain"]].append(record)
        self.report.counts["streams"] = len(chains)
        for chain, connections in sorted(chains.items()):
            connections.sort(key=lambda r: r["t0"])
            if len(connections) > 1:
                self.report.counts["streams resumed"] += 1
            seqs = [int(e[0]) for c in connections for e in c["events"] if e[0] is not None]
            self.report.counts["stream events"] += len(seqs)
            if any(b <= a for a, b in pairwise(seqs)):
                self.violation("stream saw each event once, in order", f"{chain}: {seqs}")
                continue
            owner, task_id = connections[0]["owner"], connections[-1].get("task")
            if not seqs or task_id is None:
                continue
            logged = {
                e.seq
                for e in self.store.events(owner, task_id, seqs[0] - 1)
                if e.seq <= seqs[-1] and isinstance(e.event, StatusUpdate | ArtifactUpdate)
            }
            missed = sorted(logged - set(seqs))
            if missed:
                self.violation(
                    "stream saw each event once, in order",
                    f"{chain} ({owner}/{task_id}): missed {missed} of {seqs}",
                )

    def check_pushes(self) -> None:
        """Each push config's webhook got every event of its task, in order (each event's
        first arrival), or the config says why not."""
        for record in self.evidence.records:
            if record.get("op") != "push-config":
                continue
            owner, task_id, config_id = record["owner"], record["task"], record["config"]
            self.report.counts["push configs"] += 1
            stored = self.task(owner, task_id)
            config = self.configs.get(owner, task_id, config_id)
            if stored is None or config is None:
                self.violation("push got every event", f"{owner}/{task_id}/{config_id}: not stored")
                continue
            wanted = [
                json.dumps(V1.stream_update(e.event, stored.task), sort_keys=True)
                for e in self.store.events(owner, task_id)
                if isinstance(e.event, StatusUpdate | ArtifactUpdate)
            ]
            got = [
                json.dumps(b, sort_keys=True) for b in self.evidence.hooks.get(record["path"], [])
            ]
            taken, reposted, stray = _arrivals(wanted, got)
            self.report.counts["push events posted"] += len(got)
            self.report.counts["push events re-posted"] += reposted
            if taken == len(wanted) and not stray:
                continue
            if config.last_error is not None:
                self.report.counts["push configs with their failure recorded"] += 1
                continue
            what = f"out of order at post {stray[0]}" if stray else "missed"
            self.violation(
                "push got every event",
                f"{owner}/{task_id}/{config_id}: {what}, {taken} of {len(wanted)} events in order",
            )

    def check_resends(self) -> None:
        """Every send of one message that starts a task was answered with the same task."""
        answers: dict[tuple[str, str], set[str]] = defaultdict(set)
        for record in self.evidence.records:
            if record.get("op") == "SendMessage" and not record.get("to") and record.get("task"):
                answers[(record["owner"], record["mid"])].add(record["task"])
        sends = Counter((r["owner"], r["mid"]) for r in self.evidence.records if r.get("mid"))
        self.report.counts["messages resent"] = sum(1 for n in sends.values() if n > 1)
        for (owner, message_id), task_ids in sorted(answers.items()):
            if len(task_ids) > 1:
                self.violation(
                    "no duplicate task for a resent message",
                    f"{owner}: message {message_id} answered with {sorted(task_ids)}",
                )

    def check_errors(self) -> None:
        """No answer of a 5xx status or a -32603 error outside a fault's window (and GRACE)."""
        self.report.counts["requests"] = len(self.evidence.records)
        for record in self.evidence.records:
            if record.get("transport"):
                self.report.counts["requests unanswered"] += 1
            failed = (record.get("http") or 0) >= 500 or record.get("error") == -32603
            if not failed:
                continue
            if any(
                record["t0"] <= end + GRACE and record.get("t1", record["t0"]) >= start
                for start, end in self.evidence.windows
            ):
                self.report.counts["server errors in fault windows"] += 1
                continue
            self.violation(
                "no 5xx or -32603 outside the faults",
                f"{record['op']} at {record['t0']}-{record.get('t1')} s on {record.get('server')}: "
                f"http {record.get('http')}, error {record.get('error')}",
            )

    def _all(self, owner: str) -> Iterable[StoredTask]:
        token: str | None = None
        while True:
            page = self.store.list(owner, TaskQuery(page_size=100, page_token=token))
            yield from page.tasks
            if not page.next_page_token:
                return
            token = page.next_page_token


def _arrivals(wanted: list[str], got: list[str]) -> tuple[int, int, list[int]]:
    """How far `got` (the posts, in arrival order) went through `wanted` in order, how many
    posts repeated an event taken before (at least once delivery), and which posts were
    neither the next event nor a repeat (out of order)."""
    taken, reposted, stray = 0, 0, []
    for n, body in enumerate(got):
        if taken < len(wanted) and body == wanted[taken]:
            taken += 1
        elif body in wanted[:taken]:
            reposted += 1
        else:
            stray.append(n)
    return taken, reposted, stray
