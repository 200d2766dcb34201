"""`make deploy SIGN_CARD=1`: the card's signing key made once into Secret Manager (on
gcloud's stdin, never on a command line), mounted on a2a alone, kept by a redeploy, removed by
destroy; and a deploy that also names its own key is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.plan import deploy_plan, destroy_plan
from infra.resources import GeneratedSecret
from infra.settings import Settings
from infra.steps import Outputs, Step
from shared.card_signing import CardSigner
from tests.infra.fake_gcloud import FakeGcloud
from tests.infra.test_deploy import flag, position, run

SECRET = "a2a-card-signing-key"


def test_sign_card_makes_the_key_once_and_mounts_it_on_a2a_only(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIGN_CARD", "1")
    assert run(fake_repo, "deploy") == 0
    calls = fake_gcloud.changes()
    create = position(calls, "secrets", "create", SECRET)
    assert "--data-file=-" in calls[create]
    assert not any("PRIVATE KEY" in word for call in calls for word in call)  # stdin only
    key = json.loads(fake_gcloud.state.read_text())[f"secret/{SECRET}"]["value"]
    kid = CardSigner(key).key.kid  # a usable key: the a2a function loads it just so
    assert kid
    enable = position(calls, "services", "enable")
    assert "secretmanager.googleapis.com" in calls[enable]
    a2a = position(calls, "functions", "deploy", "a2a")
    assert create < a2a
    log_key = "A2A_LOG_OWNER_KEY=a2a-log-owner-key:latest"  # the three share it
    assert flag(calls[a2a], "set-secrets") == f"A2A_CARD_SIGNING_KEY={SECRET}:latest,{log_key}"
    for role in ("worker", "deliver"):
        deployed = calls[position(calls, "functions", "deploy", role)]
        assert flag(deployed, "set-secrets") == log_key  # never the card's key
    grant = [
        call
        for call in calls
        if call[:3] == ["secrets", "add-iam-policy-binding", SECRET]
        and flag(call, "role") == "roles/secretmanager.secretAccessor"
    ]
    assert [flag(call, "member").split("@")[0] for call in grant] == ["serviceAccount:a2a-runtime"]


def test_a_redeploy_keeps_the_key_and_destroy_removes_it(
    settings: Settings, fake_repo: Path
) -> None:
    signed = settings.model_copy(update={"sign_card": True})
    steps = deploy_plan(signed, fake_repo, fake_repo / "build" / "stage")
    [step] = [step for step in steps if isinstance(step, GeneratedSecret) and step.name == SECRET]
    assert step.changes({"name": f"projects/p/secrets/{SECRET}"}, Outputs()) == []  # kept
    assert f"secret {SECRET} (the card's signing key)" in titles(
        destroy_plan(signed, delete_database=False)
    )
    assert not [
        title for title in titles(destroy_plan(settings, delete_database=False)) if SECRET in title
    ]


def titles(steps: list[Step]) -> list[str]:
    return [step.title for step in steps]


def test_the_dry_run_prints_the_create_with_no_key(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SIGN_CARD", "1")
    monkeypatch.setenv("DRY_RUN", "1")
    assert run(fake_repo, "deploy") == 0
    assert fake_gcloud.calls() == []
    out = capsys.readouterr().out
    assert (
        f"gcloud secrets create {SECRET} --data-file=- --replication-policy=automatic "
        "--project=demo-project --quiet < (a new EC P-256 private key)"
    ) in out
    assert "PRIVATE KEY-----" not in out
    capsys.readouterr()
    monkeypatch.delenv("SIGN_CARD")
    assert run(fake_repo, "deploy") == 0
    assert SECRET not in capsys.readouterr().out  # without SIGN_CARD, no key


def test_sign_card_beside_a_key_of_ones_own_is_refused(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = fake_repo.parent / "deploy.toml"
    defaults = (Path(__file__).parents[2] / "infra" / "deploy.toml").read_text()
    settings.write_text(
        defaults.replace("[secrets]\n", '[secrets]\nA2A_CARD_SIGNING_KEY = "mine:1"\n')
    )
    monkeypatch.setenv("SIGN_CARD", "1")
    assert run(fake_repo, "--settings", str(settings), "deploy") == 1
    assert "SIGN_CARD=1" in capsys.readouterr().err
    assert fake_gcloud.calls() == []
