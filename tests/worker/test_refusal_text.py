"""A refused call to the worker or deliver is told the class of the reason only: the account
and audience the target expects go to its log, never into the answer (finding 9 of issue 25)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from emulator.oidc import make_token
from shared.bindings.queue_target import QueueTargetApp
from shared.jobs import Outcome
from shared.ports import Delivery
from shared.tasks_auth import EmulatorTokens
from tests.conftest import SA, served

AUDIENCE = "https://worker-abc-uc.a.run.app/"
SECRET = "s3cret"


def _nothing(payload: dict[str, Any], delivery: Delivery) -> Outcome:
    raise AssertionError("a refused call must not reach the target")


@pytest.mark.parametrize("name", ["worker", "deliver"])
def test_a_refused_call_is_told_the_reason_class_not_what_is_expected(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = QueueTargetApp(name, _nothing, EmulatorTokens(SECRET, SA), url=AUDIENCE, max_attempts=3)
    client = served(app)
    cases = {
        None: "the token is missing",
        f"Bearer {make_token(SA, AUDIENCE, 'another secret')}": "the token is invalid",
        f"Bearer {make_token(SA, AUDIENCE, SECRET, now=time.time() - 7200)}": (
            "the token is invalid"
        ),
        f"Bearer {make_token(SA, 'https://elsewhere.example/', SECRET)}": (
            "the token is for another audience or account"
        ),
        f"Bearer {make_token('mallory@example.com', AUDIENCE, SECRET)}": (
            "the token is for another audience or account"
        ),
    }
    with caplog.at_level(logging.WARNING, logger="a2a.queue_target"):
        for authorization, reason in cases.items():
            headers = {} if authorization is None else {"Authorization": authorization}
            answer = client.post("/", json={"taskId": "t"}, headers=headers)
            assert answer.status_code == 401, reason
            assert answer.json() == {"error": f"only Cloud Tasks may call the {name}: {reason}"}
            assert SA not in answer.text and "worker-abc" not in answer.text
    logged = "\n".join(record.getMessage() for record in caplog.records)
    # The operator still learns what was expected: the log has it.
    assert SA in logged and AUDIENCE.rstrip("/") in logged
