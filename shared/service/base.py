"""What every part of the service stands on: the ports it works over (`Ports`), what it is
set to (`ServiceSettings`), and what the parts do with the ports alike: read the owner's
task, its turn recovered first when whatever ran or queued it vanished (`Ports.stored`,
`Ports.settle`); follow the task in its log, recovering its turn at each keep-alive tick
(`Ports.follow`); hand a queued turn to the work queue (`Ports.enqueue`); and show a task as
its reader asked (`view`).
"""

from __future__ import annotations

from dataclasses import field, fields, replace

from shared import streaming
from shared.agent import HandlerModule
from shared.clock import SYSTEM, Clock
from shared.engine import Engine
from shared.errors import A2AError, TaskNotFoundError
from shared.frozen import frozen
from shared.limits import DEFAULT_LIMITS, Limits, model_bytes
from shared.model import Message, Task
from shared.ports import PushConfigStore, StoredTask, TaskStore
from shared.push_url import ALLOWED_PORTS
from shared.settings import Settings
from shared.turn_queue import QueueUnavailable, TurnQueue


class TurnNotQueuedError(A2AError):
    """The task is stored but the work queue did not take its turn (an outage longer than
    the enqueue's retries): retryable, and the task id says which task to read."""

    code = -32000  # JSON-RPC's server-error range: not one of A2A's
    default_message = "The task is stored, but its work is not queued yet"
    reason = "UNAVAILABLE"
    http_status = 503
    grpc_status = "UNAVAILABLE"


# The JSON bytes of history one task carries in an answer (GetTask, a send's task, each of
# ListTasks'): its most recent messages within them, and never fewer than the newest. A2A 1.0
# (§3.2.4, and the proto's historyLength) leaves an unset historyLength's amount to the
# server and lets it return fewer messages than a value asks ("MAY apply a lower limit"):
# without a bound a 16 MiB history (A2A_MAX_HISTORY_BYTES) made a 274-byte GetTask answer
# 15.85 MB. 1 MiB holds any message (A2A_MAX_MESSAGE_BYTES: 900,000) and every history the
# seeds show; the seeds' messages/list reads a conversation whole.
ANSWER_HISTORY_BYTES = 1024 * 1024


def view(
    task: Task, history_length: int | None, *, artifacts: bool = True, size: int | None = None
) -> Task:
    """The task as a reader asked for it: the last `history_length` messages (None: all)
    within ANSWER_HISTORY_BYTES. `size`: the stored task's bytes (`StoredTask.size`), when
    known; within the budget, no message is measured."""
    history = task.history
    if history_length is not None and len(history) > history_length:
        history = history[len(history) - history_length :]
    # The newest message is kept whatever its size: a history of one has nothing to measure.
    if len(history) > 1 and (size is None or size > ANSWER_HISTORY_BYTES):
        history = _recent(history, ANSWER_HISTORY_BYTES)
    if history is task.history and (artifacts or not task.artifacts):
        return task
    return replace(task, history=history, artifacts=task.artifacts if artifacts else ())


def _recent(history: tuple[Message, ...], budget: int) -> tuple[Message, ...]:
    """The most recent messages whose JSON fits `budget` bytes, the newest whatever its size;
    measured newest first, until the budget is spent."""
    spent = 0
    for index in range(len(history) - 1, -1, -1):
        spent += model_bytes(history[index])
        if spent > budget and index < len(history) - 1:
            return history[index + 1 :]
    return history


@frozen
class ServiceSettings:
    """What the service's parts are set to: a function's settings of the same names (whose
    defaults these are, `from_settings`), or, in tests, values of their own (a commit interval
    of 0)."""

    commit_interval: float = 1.0
    # The window a turn's events are committed in, whether or not anyone listens: progress
    # reaches streams, GetTask and webhooks within it (shared.runtime).
    stream_commit_interval: float = 0.05
    # How long an inline turn's silence takes to be noticed (it renews its lease a few times
    # within).
    lease_seconds: float = 30.0
    deduplicate_messages: bool = True  # a resent message gets its first send's task
    # How long a blocking send waits for a background turn before it answers the task as it
    # stands.
    blocking_wait: float = 270.0
    # How many live tasks an owner may have when a send starts one more in the background.
    max_live_tasks_per_owner: int = 1000
    # How many push configs one task may have (each event of the task is one POST per config).
    max_push_configs_per_task: int = 10
    # Webhook hosts allowed although they resolve to non-public addresses, and the ports.
    push_allowed_hosts: tuple[str, ...] = ()
    push_allowed_ports: tuple[int, ...] = ALLOWED_PORTS
    limits: Limits = DEFAULT_LIMITS  # what one message and a task's history may hold

    @classmethod
    def from_settings(cls, settings: Settings) -> ServiceSettings:
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)})


@frozen
class Ports:
    """The ports every part of the service works over (shared.app wires them)."""

    store: TaskStore
    handler: HandlerModule
    # Takes background turns to the worker (Cloud Tasks, or in process on the embedded
    # backend) and recovers those whose owner vanished.
    turns: TurnQueue
    # Push notifications are offered only with a store for their configs.
    push_configs: PushConfigStore | None = None
    clock: Clock = SYSTEM
    # Runs the turns of this process (shared.app builds one per process: a test gets its own).
    engine: Engine = field(default_factory=lambda: Engine(sync_turns=8))

    def stored(self, owner: str, task_id: str) -> StoredTask:
        """The owner's task (settled), or TaskNotFound naming `task_id`."""
        stored = self.store.get(owner, task_id)
        if stored is None:
            raise TaskNotFoundError(f"no task {task_id}", field="task_id")
        return self.settle(stored)

    def settle(self, stored: StoredTask) -> StoredTask:
        """The task, its turn recovered first when whatever ran or queued it vanished."""
        return self.turns.settle(stored)

    def follow(
        self,
        owner: str,
        stored: StoredTask,
        after_seq: int | None,
        policy: streaming.StreamPolicy,
    ) -> streaming.Stream:
        """The frames of the task followed in its log (after `after_seq`, when resuming);
        at each keep-alive tick (nothing happened for a while) the task's turn is recovered
        if its owner vanished, so the stream goes on to the re-run or the failure instead of
        only ticking."""
        frames = streaming.follow(self.store, owner, stored, after_seq, policy)
        try:
            for frame in frames:
                if frame is None:
                    current = self.store.get(owner, stored.task.id)
                    if current is not None:
                        self.settle(current)
                yield frame
        finally:
            frames.close()

    def enqueue(self, queued: StoredTask) -> None:
        """Hand the queued turn to the work queue; TurnNotQueuedError when it did not take
        it (the turn waits in the outbox, and the client's retry finds the task)."""
        try:
            self.turns.enqueue(queued)
        except QueueUnavailable:
            raise TurnNotQueuedError(
                f"task {queued.task.id} is stored, but the work queue did not take its turn; "
                "it is enqueued again within a minute. Read the task (GetTask, tasks/get) or "
                "send the same message again (it is recognised and gets this task)",
                metadata={"taskId": queued.task.id},
            ) from None
