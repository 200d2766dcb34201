"""What the dry runs show (issue 37, item 6): the destroy's lists every delete and revoke it
would run, under a heading that says so; the deploy's says in one comment line why each value
it derives is what it is."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from infra.plan import function_env
from infra.settings import DEFAULT_FILE, load
from tests.infra.conftest import PROJECT
from tests.infra.fake_gcloud import FakeGcloud
from tests.infra.test_deploy import run

DERIVED = {
    "A2A_WORK_MAX_ATTEMPTS",
    "A2A_WORK_RETRY_SECONDS",
    "A2A_FUNCTION_TIMEOUT",
    "A2A_TASKS_SERVICE_ACCOUNT",
    "THREADS",
}


def printed(out: str, verbs: tuple[str, ...]) -> list[str]:
    return [
        line.split(":", 1)[1].strip()
        for line in out.splitlines()
        if line.startswith(tuple(f"  {verb}:" for verb in verbs))
    ]


def test_the_destroy_dry_run_lists_every_delete_it_would_run(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(fake_repo, "deploy") == 0
    capsys.readouterr()
    fake_gcloud.clear_log()
    monkeypatch.setenv("DRY_RUN", "1")
    assert run(fake_repo, "destroy", "--delete-database") == 0
    out = capsys.readouterr().out
    assert fake_gcloud.calls() == [], "a dry run runs nothing, not even a check"
    heading = out.splitlines()[0]
    assert "every command a destroy runs" in heading and "first deploy" not in heading
    steps = re.findall(r"^\[\d+/(\d+)\]", out, re.MULTILINE)
    removals = printed(out, ("delete", "revoke"))
    assert len(removals) == int(steps[0]), "one delete or revoke a step"
    assert "gcloud functions delete a2a --region=us-central1" in out
    assert "gcloud firestore databases delete '--database=(default)'" in out
    assert out.rstrip().endswith("dry run: nothing removed")

    # What a destroy of that deploy really runs is among what its dry run listed.
    monkeypatch.delenv("DRY_RUN")
    assert run(fake_repo, "destroy", "--yes", "--delete-database") == 0
    ran = [shlex.join(["gcloud", *call]) for call in fake_gcloud.changes()]
    assert ran and set(ran) <= set(removals)
    # (It also lists the revokes a deploy of other settings needs: tracing's, older roles.)
    assert len(ran) < len(removals)


def notes(out: str, function: str) -> dict[str, str]:
    """The comment lines under `function`'s deploy command: variable -> why."""
    lines = out.splitlines()
    start = next(
        i for i, line in enumerate(lines) if f"gcloud functions deploy {function} " in line
    )
    found: dict[str, str] = {}
    for line in lines[start + 1 :]:
        if not line.startswith("  # "):
            break
        name, _, why = line[4:].partition(": ")
        found[name] = why
    return found


def test_the_deploy_plan_says_why_each_derived_value_is_what_it_is(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DRY_RUN", "1")
    assert run(fake_repo, "deploy") == 0
    out = capsys.readouterr().out
    settings = load(DEFAULT_FILE, {"PROJECT": PROJECT})
    for function, own in (
        ("deliver", {"A2A_PUSH_MAX_ATTEMPTS"}),
        ("worker", set()),
        ("a2a", {"A2A_AUDIENCE"}),
    ):
        why = notes(out, function)
        env = function_env(settings, function)
        valued = {name.split("=", 1)[0]: name.split("=", 1)[1] for name in why if "=" in name}
        assert set(valued) == DERIVED | own, function
        assert all(env[name] == value for name, value in valued.items()), "the values deployed"
        (wired,) = [name for name in why if "=" not in name]
        assert "project number" in why[wired]
    deliver = notes(out, "deliver")
    # The figures an operator could not place: 19 beside --max-attempts=10, 34 beside 30.
    assert "--max-attempts=10" in deliver["A2A_WORK_MAX_ATTEMPTS=19"]
    assert "--max-retry-duration=3600s" in deliver["A2A_WORK_MAX_ATTEMPTS=19"]
    assert "its last is attempt 19" in deliver["A2A_WORK_MAX_ATTEMPTS=19"]
    assert "--max-attempts=30" in deliver["A2A_PUSH_MAX_ATTEMPTS=34"]
    assert "its last is attempt 34" in deliver["A2A_PUSH_MAX_ATTEMPTS=34"]
    assert "functions.a2a.threads" in notes(out, "a2a")["THREADS=80"]
