"""The record of resent messages: a message's key, the task its first send went to, and the
answer a resend gets.

A resent message (same owner, messageId and content: `message_key`) gets the task its first
send went to, unchanged; the same messageId with other content is a new message, and so is
the same message once the client has moved on in its task (spoke again there, or canceled
it: it had the answer, so this is no retry). Nothing is read to find out: a message that
starts a task gives it an id derived from its key (`MessageKey.task_id`), and every message is
recorded in the write that stores it, so the store refuses a resend's write
(DuplicateMessage, naming the first task); only then is that task read
(`Resends.after_duplicate`; the one loop that sends again is shared.service.sending's). A
resend that starts a task is so recognised after its handler ran (that run's output is
dropped), and one the client moved on from runs again as a new message. A message the task
now refuses (ended since) is looked up before it is refused (`Resends.recorded`).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from shared import json_text, model_json
from shared.model import Role, Task, TaskState
from shared.ports import MessageKey, StoredTask
from shared.requests import SendRequest
from shared.service.base import Ports, view

# message_key's canonical text: keys sorted, compact, ASCII, NaN as NaN, as json.dumps wrote it
# for every digest stored since (a task id derives from one).
_canonical = json_text.encoder(sort_keys=True)


def message_key(request: SendRequest) -> MessageKey:
    """The sent message as de-duplication knows it: its messageId and a SHA-256 of its
    content and address (role, parts, metadata, references, extensions, taskId, contextId)
    and of the push config sent with it.

    Read from the canonical request, so one message sent in any dialect has one digest; the
    cost is one pass over a message `limits.py` bounded already. A server-side id is no part
    of it: a resend names the same task and context as the first send did.
    """
    message = request.message
    push = request.push_config
    content = {
        "role": message.role.value,
        "parts": [model_json.to_dict(part) for part in message.parts],
        # Absent and empty say the same: dialects differ in which one they decode to.
        "metadata": message.metadata or {},
        "referenceTaskIds": list(message.reference_task_ids),
        "extensions": list(message.extensions),
        "taskId": request.task_id,
        "contextId": request.context_id or request.session_id,
        "push": None
        if push is None
        else {
            "id": push.id,
            "url": push.url,
            "token": push.token,
            "authentication": push.authentication
            and {
                "schemes": list(push.authentication.schemes),
                "credentials": push.authentication.credentials,
            },
        },
    }
    canonical = _canonical(content)
    return MessageKey(message.message_id, hashlib.sha256(canonical.encode()).hexdigest())


def _answers(task: Task, message_id: str) -> bool:
    """Whether the task answers a resend of this message: the message is in its history and
    the client has not acted in the task since (spoken again there, or canceled it). It had
    the first send's answer then, so a send of the same key is no retry but a client reusing
    its messageId (the A2A TCK does): a new message. (Not in its history: a task the client
    made under the key's own id itself, v0.1's create-if-missing, is no send of it.)"""
    if task.status.state is TaskState.CANCELED:
        return False
    sent = False
    for message in task.history:
        if message.role is Role.USER:
            if message.message_id == message_id:
                sent = True
            elif sent:
                return False
    return sent


class Resends:
    """The first send of a resent message, found and answered."""

    def __init__(self, ports: Ports) -> None:
        self._ports = ports

    def after_duplicate(
        self, owner: str, key: MessageKey | None, task_id: str
    ) -> StoredTask | MessageKey:
        """After the store refused the message as recorded with `task_id`: the task to
        answer the resend with, or, when the client moved on from it (or it is gone), the key
        to send the message again under, as a new message replacing the record."""
        # Only a recorded message is a duplicate, and a key that replaces its record is not
        # refused (shared.ports.MessageKey): the second send under it is the last.
        assert key is not None and key.replaces is None
        first = self._first_send(owner, key, task_id)
        return first if first is not None else replace(key, replaces=task_id)

    def _first_send(self, owner: str, key: MessageKey, task_id: str) -> StoredTask | None:
        """The task the message's first send went to (`task_id`, as recorded), unless the
        client moved on from it or it is gone: None, the message is a new one."""
        store = self._ports.store
        earlier = store.get(owner, task_id)
        if earlier is not None and _answers(earlier.task, key.message_id):
            return earlier
        if task_id == key.task_id(owner):
            # The key's own task was moved on from: a later send may have been recorded
            # (replacing no record of it: the task is its record).
            later = store.find_message(owner, key)
            if later is not None and later != task_id:
                return self._first_send(owner, key, later)
        return None

    def recorded(self, owner: str, key: MessageKey | None) -> StoredTask | None:
        """The task the message went to, when it was sent before and the client has not
        moved on from it (a look-up: only for a message about to be refused)."""
        if key is None or key.replaces is not None:
            return None
        found = self._ports.store.find_message(owner, key)
        return None if found is None else self._first_send(owner, key, found)

    def answer(self, stored: StoredTask, request: SendRequest) -> Task:
        """A resent message gets the task its first send went to, unchanged."""
        lease = stored.lease
        if (
            lease is not None
            and not lease.holder
            and stored.task.status.state is TaskState.SUBMITTED
        ):
            # Still queued: the first request may have died before it enqueued the turn.
            # The entry's name is the turn's, so this adds nothing if it did enqueue. (A
            # lease stored before leases named their message is the resent message's.)
            message_id = lease.message_id or request.message.message_id
            self._ports.enqueue(replace(stored, lease=replace(lease, message_id=message_id)))
        return view(stored.task, request.history_length)
