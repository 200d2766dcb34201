"""The A2A operations on canonical types, for one caller (the owner), by concept.

Each operation takes its request from shared.requests, for one owner: another owner's tasks
and push configs answer exactly as missing ones do. Nothing here knows a wire format: the
wire codecs (the operation table) decode calls into those requests and encode what comes
back. An error names the request attribute at fault (`task_id`, `push_config.url`); the codec
that decoded the request puts the caller's wire field there.

The parts, each over the same ports (`base.Ports`, wired by shared.app) and set by one
`base.ServiceSettings`:
- `sending.py`: send (blocking, background) and stream a message, with the one loop that
  answers a resend;
- `resends.py`: the record of resent messages (`message_key`, the first send, its answer);
- `tasks.py`: get, list, cancel, subscribe, and the seeds' message listing;
- `push_configs.py`: push notification config set, get, list, delete.
"""

from __future__ import annotations

from shared.service.base import Ports, ServiceSettings
from shared.service.push_configs import PushConfigs
from shared.service.resends import Resends
from shared.service.sending import Sending
from shared.service.tasks import Tasks

_DEFAULTS = ServiceSettings()


class A2AService:
    """The operations, by part: `sending`, `tasks`, `push`; `ports` is what they work over.
    The wire reads two things of it besides: the handler module (its extensions, which a
    request activates) and the limits a message is decoded under."""

    def __init__(self, ports: Ports, settings: ServiceSettings = _DEFAULTS) -> None:
        self.ports = ports
        self.handler = ports.handler
        self.limits = settings.limits  # what one message and a task's history may hold
        self.tasks = Tasks(ports)
        self.push = PushConfigs(ports, settings)
        self.sending = Sending(ports, settings, self.push, Resends(ports))
