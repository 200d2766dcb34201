"""Start-up settings: what the deploy sets is accepted, typos and contradictions are refused."""

from __future__ import annotations

import pytest

from infra.plan import WIRING, function_env
from infra.settings import DEFAULT_FILE, load
from shared.settings import Settings, SettingsError


@pytest.mark.parametrize("role", sorted(WIRING))
def test_every_variable_the_deploy_sets_is_accepted(role: str) -> None:
    deploy = load(DEFAULT_FILE, {"PROJECT": "my-project"})
    env = function_env(deploy, role)
    env |= {name: f"https://{target}.example" for name, target in WIRING[role].items()}
    settings = Settings.from_env(env)
    assert settings.function_timeout == getattr(deploy.functions, role).timeout
    assert settings.work_max_attempts == deploy.queues.work.attempts()
    assert settings.tasks_service_account == deploy.invoker_email


def test_an_unknown_a2a_variable_is_refused_by_name() -> None:
    with pytest.raises(SettingsError, match="unknown setting A2A_HANDLR"):
        Settings.from_env({"A2A_HANDLR": "functions.handlers.echo"})


def test_a_worker_url_needs_the_firestore_backend_and_a_queue_path() -> None:
    with pytest.raises(SettingsError, match="A2A_BACKEND=firestore"):
        Settings.from_env({"A2A_WORKER_URL": "https://worker.example"})
    queued = {"A2A_WORKER_URL": "https://w.example", "A2A_BACKEND": "firestore"}
    with pytest.raises(SettingsError, match="GOOGLE_CLOUD_PROJECT and A2A_REGION"):
        Settings.from_env(queued)
    queued |= {"GOOGLE_CLOUD_PROJECT": "p", "A2A_REGION": "r"}
    with pytest.raises(SettingsError, match="A2A_TASKS_SERVICE_ACCOUNT"):
        Settings.from_env(queued)


def test_the_blocking_budget_comes_from_the_function_timeout() -> None:
    assert Settings.from_env({"A2A_FUNCTION_TIMEOUT": "300"}).blocking_wait == 270
    assert Settings.from_env({"A2A_FUNCTION_TIMEOUT": "30"}).blocking_wait == 25
    assert Settings.from_env({"A2A_BLOCKING_BUDGET_SECONDS": "2.5"}).blocking_wait == 2.5
    with pytest.raises(SettingsError, match="A2A_LEASE_SECONDS"):
        Settings.from_env({"A2A_LEASE_SECONDS": "0"})
