"""TaskQueue adapters: Cloud Tasks (`cloud_tasks`) and the embedded thread pool (`inline`).

Both take the same payloads under the same size limit, so what works on `make run` works
deployed.
"""

from __future__ import annotations

import json
from typing import Any

from shared.ports import TaskTooLarge

# Cloud Tasks refuses a task above 100 KB; the emulator does not, so the project checks.
MAX_TASK_BYTES = 100 * 1024


def encode(name: str, payload: dict[str, Any]) -> bytes:
    """The payload as the JSON body a target receives. Raises TaskTooLarge over the limit."""
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    if len(body) > MAX_TASK_BYTES:
        raise TaskTooLarge(
            f"queue entry {name}: the payload has {len(body)} bytes and Cloud Tasks takes at "
            f"most {MAX_TASK_BYTES}; keep data in the task store and send its id"
        )
    return body
