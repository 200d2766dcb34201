"""Deployed functions never allow webhooks on their own machine (local runs do: `make run`,
`make dev`): the deploy sets no allowed host, and refuses an [env] that allows loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.plan import deploy_plan
from infra.resources import Function
from infra.settings import Settings
from infra.steps import PlanError


def test_the_deployed_functions_allow_no_private_webhook_host(
    settings: Settings, fake_repo: Path, tmp_path: Path
) -> None:
    functions = [s for s in deploy_plan(settings, fake_repo, tmp_path) if isinstance(s, Function)]
    assert {f.spec.role for f in functions} == {"a2a", "worker", "deliver"}
    for function in functions:
        assert "A2A_PUSH_ALLOWED_HOSTS" not in function.spec.env, function.spec.role


@pytest.mark.parametrize(
    "hosts", ["localhost", "hooks.example, 127.0.0.1", "[::1]", "127.8.0.1", "app.localhost"]
)
def test_loopback_webhook_hosts_are_refused_before_anything_runs(
    settings: Settings, fake_repo: Path, tmp_path: Path, hosts: str
) -> None:
    chosen = settings.model_copy(update={"env": {"A2A_PUSH_ALLOWED_HOSTS": hosts}})
    with pytest.raises(PlanError, match=r"A2A_PUSH_ALLOWED_HOSTS allows .*never allowed"):
        deploy_plan(chosen, fake_repo, tmp_path)


def test_other_allowed_hosts_are_deployed(
    settings: Settings, fake_repo: Path, tmp_path: Path
) -> None:
    chosen = settings.model_copy(update={"env": {"A2A_PUSH_ALLOWED_HOSTS": "hooks.internal"}})
    functions = [s for s in deploy_plan(chosen, fake_repo, tmp_path) if isinstance(s, Function)]
    assert all(f.spec.env["A2A_PUSH_ALLOWED_HOSTS"] == "hooks.internal" for f in functions)
