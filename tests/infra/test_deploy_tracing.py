"""Spans to Cloud Trace need `roles/cloudtrace.agent`: the deploy grants it to the functions'
accounts when (and only when) their settings say `A2A_TRACING=gcp`, and takes it back after
(a Binding with present=False: its revoke is tested with the public binding's, test_deploy.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.plan import TRACE_AGENT, deploy_plan, destroy_plan
from infra.resources import Binding
from infra.settings import Settings
from infra.steps import Step


def trace_bindings(settings: Settings, repo: Path, stage: Path) -> dict[str, bool]:
    """Account name -> whether the deploy plan wants it to hold the Cloud Trace role."""
    return trace_roles(deploy_plan(settings, repo, stage))


def trace_roles(plan: list[Step]) -> dict[str, bool]:
    found = [s for s in plan if isinstance(s, Binding) and s.role == TRACE_AGENT]
    return {s.member.split(":")[1].split("@")[0]: s.present for s in found}


def test_gcp_tracing_grants_both_function_accounts(
    settings: Settings, fake_repo: Path, tmp_path: Path
) -> None:
    traced = settings.model_copy(update={"env": {"A2A_TRACING": "gcp"}})
    assert trace_bindings(traced, fake_repo, tmp_path) == {
        "a2a-runtime": True,
        "a2a-deliver": True,
    }


@pytest.mark.parametrize("env", [{}, {"A2A_TRACING": "off"}, {"A2A_TRACING": "otlp"}])
def test_no_cloud_trace_no_role(
    settings: Settings, fake_repo: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    chosen = settings.model_copy(update={"env": env})
    assert trace_bindings(chosen, fake_repo, tmp_path) == {
        "a2a-runtime": False,
        "a2a-deliver": False,
    }


@pytest.mark.parametrize("tracing", ["gcp", "off"])
def test_destroy_takes_it_away_whatever_tracing_is_now(settings: Settings, tracing: str) -> None:
    # An earlier deploy may have traced to Cloud Trace.
    chosen = settings.model_copy(update={"env": {"A2A_TRACING": tracing}})
    assert trace_roles(destroy_plan(chosen, delete_database=False)) == {
        "a2a-runtime": False,
        "a2a-deliver": False,
    }
