"""Deploy grants scoped to their resources (issue 36, item 13): no account of the kit holds
Firestore on every database of the project, nor Cloud Build's storage and registry roles on
the whole project; an earlier deploy's broader grants are taken away, and a destroy leaves
none of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.infra.fake_gcloud import FakeGcloud
from tests.infra.test_deploy import flag, position, run

PROJECT_POLICY = "policy/projects/demo-project"
RUNTIME, DELIVER, BUILD = (
    f"serviceAccount:a2a-{name}@demo-project.iam.gserviceaccount.com"
    for name in ("runtime", "deliver", "build")
)
DATABASE = 'resource.name == "projects/demo-project/databases/(default)"'
SOURCES = 'resource.name.startsWith("projects/_/buckets/gcf-v2-sources-")'


def state(fake: FakeGcloud) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(fake.state.read_text())
    return loaded


def holders(policy: dict[str, list[str]]) -> set[tuple[str, str, str]]:
    """(member, role, condition expression or "") of a policy the fake keeps."""
    found = set()
    for key, members in policy.items():
        role, _, rest = key.partition("|")
        expression = rest.partition("|")[2]
        found |= {(member, role, expression) for member in members}
    return found


def test_each_grant_holds_only_where_it_is_used(
    fake_gcloud: FakeGcloud, fake_repo: Path, project_env: None
) -> None:
    assert run(fake_repo, "deploy") == 0
    project = holders(state(fake_gcloud)[PROJECT_POLICY])
    assert project == {
        (RUNTIME, "roles/datastore.user", DATABASE),
        (DELIVER, "roles/datastore.user", DATABASE),
        (BUILD, "roles/logging.logWriter", ""),
        (BUILD, "roles/storage.objectAdmin", SOURCES),
    }
    repository = holders(state(fake_gcloud)["policy/artifacts repositories/a2a-functions"])
    assert repository == {(BUILD, "roles/artifactregistry.writer", "")}

    calls = fake_gcloud.changes()
    made = position(calls, "artifacts", "repositories", "create", "a2a-functions")
    granted = position(calls, "artifacts", "repositories", "add-iam-policy-binding")
    first_build = position(calls, "functions", "deploy")
    assert made < granted < first_build
    assert "--repository-format=docker" in calls[made]
    for call in calls:
        if call[:2] == ["functions", "deploy"]:
            assert flag(call, "docker-repository") == (
                "projects/demo-project/locations/us-central1/repositories/a2a-functions"
            )


def test_an_earlier_deploy_s_project_wide_grants_are_taken_away(
    fake_gcloud: FakeGcloud, fake_repo: Path, project_env: None
) -> None:
    assert run(fake_repo, "deploy") == 0
    broad = state(fake_gcloud)
    policy = broad[PROJECT_POLICY]
    policy["roles/datastore.user"] = [RUNTIME, DELIVER]
    policy["roles/storage.objectAdmin"] = [BUILD]
    policy["roles/artifactregistry.writer"] = [BUILD]
    fake_gcloud.state.write_text(json.dumps(broad))
    fake_gcloud.clear_log()

    assert run(fake_repo, "deploy") == 0
    revoked = {
        (flag(call, "member"), flag(call, "role"), flag(call, "condition"))
        for call in fake_gcloud.changes()
    }
    assert revoked == {
        (RUNTIME, "roles/datastore.user", "None"),
        (DELIVER, "roles/datastore.user", "None"),
        (BUILD, "roles/storage.objectAdmin", "None"),
        (BUILD, "roles/artifactregistry.writer", "None"),
    }, "those four, and nothing else changes"
    assert all(
        call[:2] == ["projects", "remove-iam-policy-binding"] for call in fake_gcloud.changes()
    )
    assert (RUNTIME, "roles/datastore.user", DATABASE) in holders(
        state(fake_gcloud)[PROJECT_POLICY]
    )


def test_the_firestore_grant_names_the_database_of_the_settings(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FIRESTORE_DATABASE", "agents")
    assert run(fake_repo, "deploy") == 0
    conditions = {
        expression
        for member, role, expression in holders(state(fake_gcloud)[PROJECT_POLICY])
        if role == "roles/datastore.user"
    }
    assert conditions == {'resource.name == "projects/demo-project/databases/agents"'}


def test_a_destroy_takes_every_grant_away(
    fake_gcloud: FakeGcloud, fake_repo: Path, project_env: None
) -> None:
    assert run(fake_repo, "deploy") == 0
    assert run(fake_repo, "destroy", "--yes") == 0
    left = state(fake_gcloud)
    assert holders(left[PROJECT_POLICY]) == set()
    assert not [key for key in left if key.startswith(("repository/", "policy/artifacts"))]
