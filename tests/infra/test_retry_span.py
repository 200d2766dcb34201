"""The work queue's retry span: computed from the queue `make deploy` creates, handed to the
functions as A2A_WORK_RETRY_SECONDS, so recovery never starts while the queue still retries."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.plan import WIRING, function_env
from infra.settings import DEFAULT_FILE, QueueSettings, SettingsError, load
from shared.settings import Settings
from shared.settings import SettingsError as StartupError


def queue(attempts: int, low: str, high: str, doublings: int, duration: str) -> QueueSettings:
    return QueueSettings(
        name="work",
        max_attempts=attempts,
        min_backoff=low,
        max_backoff=high,
        max_doublings=doublings,
        max_retry_duration=duration,
        max_dispatches_per_second=1,
        max_concurrent_dispatches=1,
    )


def test_the_span_follows_cloud_tasks_backoff_rule() -> None:
    # Cloud Tasks' own example (RetryConfig.max_doublings): 10 s doubled three times, then
    # growing by 80 s, at most 300 s: retries after 10, 20, 40, 80, 160, 240, 300, 300 s.
    assert queue(9, "10s", "300s", 3, "0s").retry_span() == 1150
    assert queue(1, "10s", "300s", 3, "0s").retry_span() == 0  # one attempt, no retry


def test_a_retry_duration_longer_than_the_attempts_keeps_the_queue_retrying() -> None:
    # Both limits must be reached: after 3 attempts (15 s) it retries every 10 s until 60 s.
    assert queue(3, "5s", "10s", 1, "60s").retry_span() == 65
    assert queue(-1, "5s", "10s", 1, "60s").retry_span() == 65  # -1: the duration alone
    assert queue(3, "0s", "0s", 0, "60s").retry_span() == 60  # back to back until then


def test_a_queue_that_retries_forever_is_refused_by_name() -> None:
    with pytest.raises(SettingsError, match=r"queues 'work' retries forever.*infra/deploy\.toml"):
        queue(-1, "5s", "10s", 1, "0s").retry_span()


@given(
    attempts=st.integers(1, 40),
    low=st.integers(0, 600),
    high=st.integers(0, 3600),
    doublings=st.integers(0, 16),
    duration=st.integers(0, 86400),
)
def test_the_span_covers_every_attempt_and_the_whole_retry_duration(
    attempts: int, low: int, high: int, doublings: int, duration: int
) -> None:
    span = queue(attempts, f"{low}s", f"{high}s", doublings, f"{duration}s").retry_span()
    assert span >= duration
    assert span <= max(duration + high, (attempts - 1) * high)  # never a step above the cap


@pytest.mark.parametrize("role", sorted(WIRING))
def test_the_functions_recover_turns_after_the_deployed_queue_gives_up(role: str) -> None:
    short = {"QUEUES_WORK_MAX_ATTEMPTS": "3", "QUEUES_WORK_MAX_RETRY_DURATION": "0s"}
    for overrides in ({}, short):
        deploy = load(DEFAULT_FILE, {"PROJECT": "my-project", **overrides})
        env = function_env(deploy, role)
        env |= {name: f"https://{target}.example" for name, target in WIRING[role].items()}
        span = Settings.from_env(env).work_retry_seconds
        assert span == deploy.queues.work.retry_span()
    assert span == 15  # 3 attempts: retries after 5 and 10 s


def test_the_default_is_the_deploy_files_queue() -> None:
    """Without the variables (a function deployed by hand), a turn still waits out the queue
    deploy.toml describes, and the last attempts are the queues': change one, change the
    other."""
    deploy = load(DEFAULT_FILE)
    assert Settings().work_retry_seconds == deploy.queues.work.retry_span()
    assert Settings().work_max_attempts == deploy.queues.work.attempts()
    assert Settings().push_max_attempts == deploy.queues.push.attempts()


def test_a_retry_duration_that_outlasts_max_attempts_adds_attempts() -> None:
    # Cloud Tasks' example: 9 attempts in 1150 s; with an hour to go, 300 s apart until then.
    assert queue(9, "10s", "300s", 3, "0s").attempts() == 9
    assert queue(9, "10s", "300s", 3, "3600s").attempts() == 9 + 9  # 1150 + 9 x 300 >= 3600
    assert queue(3, "5s", "10s", 1, "60s").attempts() == 8  # 5, 10, then 10 s until 65 s
    # As deployed: the worker's last attempt is the 19th, not max_attempts' 10th.
    work = load(DEFAULT_FILE).queues.work
    assert (work.max_attempts, work.attempts()) == (10, 19)


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "1e12", "soon"])
def test_a_bad_retry_span_stops_start_up_naming_the_variable(value: str) -> None:
    with pytest.raises(StartupError, match="A2A_WORK_RETRY_SECONDS"):
        Settings.from_env({"A2A_WORK_RETRY_SECONDS": value})


def test_the_deployed_a2a_holds_its_streams_within_its_concurrency() -> None:
    """Streams and turns hold no thread while they wait: `a2a` takes Cloud Run's most
    requests at once on a pool of its own THREADS, and its streams leave THREADS of them for
    other requests; the worker, whose queued turns wait without one too, has fewer threads
    than its concurrency (a function without `threads` has one per request)."""
    deploy = load(DEFAULT_FILE, {"PROJECT": "my-project"})
    functions = deploy.functions
    env = function_env(deploy, "a2a") | {
        n: f"https://{t}.example" for n, t in WIRING["a2a"].items()
    }
    settings = Settings.from_env(env)
    assert (functions.a2a.concurrency, settings.threads) == (1000, 80)
    assert settings.stream_limit == functions.a2a.concurrency - settings.threads
    worker = functions.worker
    assert function_env(deploy, "worker")["THREADS"] == str(worker.threads)
    assert worker.threads is not None and worker.threads < worker.concurrency
    assert function_env(deploy, "deliver")["THREADS"] == str(functions.deliver.concurrency)
    lowered = load(DEFAULT_FILE, {"PROJECT": "my-project", "FUNCTIONS_A2A_THREADS": "40"})
    assert function_env(lowered, "a2a")["THREADS"] == "40"
