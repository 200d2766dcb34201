"""The Cloud Tasks launcher fills the package's gaps: each test proves one, on the real thing."""

from __future__ import annotations

import io
import itertools
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.api_core.exceptions import AlreadyExists, NotFound
from google.cloud import tasks_v2

from emulator.cloud_tasks import (
    TasksEmulator,
    ensure_tasks_venv,
    installed_version,
    start_tasks_emulator,
)
from emulator.http_target import HttpTarget as Target
from shared.tasks_auth import EmulatorTokens, TokenRefused, bearer

pytestmark = pytest.mark.emulator
SA = "worker@demo-a2a-functions.iam.gserviceaccount.com"


def http_task(url: str, *, name: str = "", delay: float = 0.0, **extra: Any) -> tasks_v2.Task:
    task = tasks_v2.Task(
        name=name,
        http_request=tasks_v2.HttpRequest(
            url=url,
            http_method=tasks_v2.HttpMethod.POST,
            headers={"Content-Type": "application/json"},
            body=b'{"taskId": "t1"}',
            **extra,
        ),
    )
    if delay:
        task.schedule_time = datetime.now(UTC) + timedelta(seconds=delay)
    return task


def test_duplicate_names_answer_already_exists(
    tasks_client: Any, make_queue: Callable[..., str], target: Target, unique: str
) -> None:
    queue = make_queue()
    pending = f"{queue}/tasks/pending-{unique}"
    tasks_client.create_task(parent=queue, task=http_task(target.url("/x"), name=pending, delay=30))
    with pytest.raises(AlreadyExists):
        tasks_client.create_task(parent=queue, task=http_task(target.url("/x"), name=pending))

    # A name stays taken after its task was delivered, as on the real service.
    done = f"{queue}/tasks/done-{unique}"
    path = f"/dedup/{unique}"
    tasks_client.create_task(parent=queue, task=http_task(target.url(path), name=done))
    target.wait_for(path, 1)
    with pytest.raises(AlreadyExists):
        tasks_client.create_task(parent=queue, task=http_task(target.url(path), name=done))
    time.sleep(0.3)
    assert len(target.received(path)) == 1


def test_get_and_delete_task(
    tasks_client: Any, make_queue: Callable[..., str], target: Target, unique: str
) -> None:
    queue = make_queue()
    path = f"/deleted/{unique}"
    name = f"{queue}/tasks/t-{unique}"
    created = tasks_client.create_task(
        parent=queue, task=http_task(target.url(path), name=name, delay=1.0)
    )
    assert created.name == name

    basic = tasks_client.get_task(name=name)
    assert basic.name == name
    assert basic.http_request.url == target.url(path)
    assert basic.http_request.body == b""  # BASIC view omits the payload, like the real API
    assert basic.dispatch_count == 0
    full = tasks_client.get_task(
        request=tasks_v2.GetTaskRequest(name=name, response_view=tasks_v2.Task.View.FULL)
    )
    assert full.http_request.body == b'{"taskId": "t1"}'

    tasks_client.delete_task(name=name)
    with pytest.raises(NotFound):
        tasks_client.get_task(name=name)
    with pytest.raises(NotFound):
        tasks_client.delete_task(name=name)
    with pytest.raises(AlreadyExists):  # a deleted name is reserved too
        tasks_client.create_task(parent=queue, task=http_task(target.url(path), name=name))
    time.sleep(1.3)  # past its schedule time: a deleted task is never delivered
    assert target.received(path) == []


def test_retries_back_off_exponentially_up_to_max_attempts(
    tasks_client: Any, make_queue: Callable[..., str], target: Target, unique: str
) -> None:
    queue = make_queue(
        retry_config=tasks_v2.RetryConfig(
            max_attempts=4,
            min_backoff=timedelta(seconds=0.2),
            max_backoff=timedelta(seconds=10),
            max_doublings=5,
        )
    )
    path = f"/fail/{unique}"
    name = f"{queue}/tasks/t-{unique}"
    tasks_client.create_task(parent=queue, task=http_task(target.url(path), name=name))
    hits = target.wait_for(path, 4)
    gaps = [b.started - a.started for a, b in itertools.pairwise(hits)]
    for gap, expected in zip(gaps, [0.2, 0.4, 0.8], strict=True):
        assert expected * 0.9 <= gap <= expected + 0.3, gaps
    assert [h.headers["X-CloudTasks-TaskRetryCount"] for h in hits] == ["0", "1", "2", "3"]
    assert hits[1].headers["X-CloudTasks-TaskPreviousResponse"] == "500"
    time.sleep(1.9)  # a 5th attempt would come 1.6 s after the 4th
    assert len(target.received(path)) == 4
    with pytest.raises(NotFound):  # given up: gone from the queue
        tasks_client.get_task(name=name)


def test_queue_shows_real_defaults(tasks_client: Any, make_queue: Callable[..., str]) -> None:
    queue = tasks_client.get_queue(name=make_queue())
    assert queue.retry_config.max_attempts == 100
    assert queue.retry_config.min_backoff == timedelta(seconds=0.1)
    assert queue.retry_config.max_backoff == timedelta(seconds=3600)
    assert queue.retry_config.max_doublings == 16
    assert queue.rate_limits.max_concurrent_dispatches == 1000


def test_backoff_rule_matches_the_documented_example(tasks_emulator: TasksEmulator) -> None:
    # Cloud Tasks' docs: min 10 s, max 300 s, 3 doublings -> 10, 20, 40, 80, 160, 240, 300.
    # backoff() lives in the launcher, which imports only inside the tasks venv.
    code = (
        "from datetime import timedelta as d\n"
        "from google.cloud.tasks_v2 import Queue\n"
        "from emulator.tasks_launcher import backoff\n"
        "q = Queue(retry_config={'min_backoff': d(seconds=10), 'max_backoff': d(seconds=300),"
        " 'max_doublings': 3})\n"
        "print([backoff(q, n) for n in range(1, 9)])\n"
    )
    python = tasks_emulator.log_path.parent / "tasks-venv" / "bin" / "python"
    out = subprocess.run(
        [str(python), "-W", "ignore", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[10.0, 20.0, 40.0, 80.0, 160.0, 240.0, 300.0, 300.0]"


def test_slow_tasks_are_dispatched_concurrently(
    tasks_client: Any, make_queue: Callable[..., str], target: Target, unique: str
) -> None:
    queue = make_queue()
    path = f"/slow/1.0/{unique}"
    for _ in range(2):
        tasks_client.create_task(parent=queue, task=http_task(target.url(path)))
    first, second = target.wait_for(path, 2)
    assert abs(second.started - first.started) < 0.5  # the second did not wait for the first


def test_max_concurrent_dispatches_is_honoured(
    tasks_client: Any, make_queue: Callable[..., str], target: Target, unique: str
) -> None:
    queue = make_queue(rate_limits=tasks_v2.RateLimits(max_concurrent_dispatches=1))
    path = f"/slow/0.6/{unique}"
    for _ in range(2):
        tasks_client.create_task(parent=queue, task=http_task(target.url(path)))
    first, second = sorted(target.wait_for(path, 2), key=lambda hit: hit.started)
    assert second.started >= first.ended - 0.05


def test_oidc_token_becomes_a_verifiable_bearer_header(
    tasks_client: Any,
    tasks_emulator: TasksEmulator,
    make_queue: Callable[..., str],
    target: Target,
    unique: str,
) -> None:
    queue = make_queue()
    path = f"/auth/{unique}"
    oidc = tasks_v2.OidcToken(service_account_email=SA, audience="https://worker.example")
    tasks_client.create_task(parent=queue, task=http_task(target.url(path), oidc_token=oidc))
    tasks_client.create_task(
        parent=queue,
        task=http_task(target.url(path + "/default-aud"), oidc_token={"service_account_email": SA}),
    )
    tasks_client.create_task(parent=queue, task=http_task(target.url(path + "/none")))
    hits = {hit.path: hit for hit in target.wait_for(path, 3)}

    token = bearer(hits[path].headers["Authorization"])
    assert tasks_emulator.secret
    claims = EmulatorTokens(tasks_emulator.secret, SA).verify(token, "https://worker.example")
    assert claims["sub"] == SA
    with pytest.raises(TokenRefused):
        EmulatorTokens("another secret", SA).verify(token, "https://worker.example")
    default = bearer(hits[path + "/default-aud"].headers["Authorization"])
    default_audience = target.url(path + "/default-aud")
    claims = EmulatorTokens(tasks_emulator.secret, SA).verify(default, default_audience)
    assert claims["aud"] == default_audience
    assert "Authorization" not in hits[path + "/none"].headers
    # The task's own headers pass through untouched, beside Cloud Tasks' own.
    assert hits[path].headers["Content-Type"] == "application/json"
    assert hits[path].headers["X-CloudTasks-QueueName"] == queue.rsplit("/", 1)[-1]


def test_venv_setup_is_idempotent(tasks_emulator: TasksEmulator) -> None:
    assert installed_version() == "0.6.2"
    said = io.StringIO()
    ensure_tasks_venv(out=said)  # already there: nothing to do, nothing to say
    assert said.getvalue() == ""


def test_start_and_stop_by_pid(tmp_path: Any) -> None:
    emu = start_tasks_emulator(log_dir=tmp_path)
    assert emu.alive() and emu.is_ready()
    emu.stop()
    assert not emu.alive()
    assert not emu.is_ready()
