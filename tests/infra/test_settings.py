"""Deploy settings: overrides by variable name, errors that name the variable; failure hints."""

from __future__ import annotations

import pytest

from infra.runner import diagnose
from infra.settings import DEFAULT_FILE, SettingsError, load


def test_every_setting_is_overridden_by_its_variable() -> None:
    settings = load(
        DEFAULT_FILE,
        {
            "PROJECT": "my-project",
            "REGION": "europe-west1",
            "HANDLER": "functions.handlers.echo",
            "FUNCTIONS_A2A_MIN_INSTANCES": "1",
            "QUEUES_WORK_MIN_BACKOFF": "2s",
            "TTL_COLLECTION_GROUPS": "tasks, events",
            "AUTH": "",  # empty, as make passes an unset variable: the file's value stays
        },
    )
    assert settings.region == settings.location == "europe-west1"
    assert settings.handler == "functions.handlers.echo"
    assert settings.functions.a2a.min_instances == 1
    assert settings.queues.work.min_backoff == "2s"
    assert settings.ttl_collection_groups == ("tasks", "events")
    assert (settings.auth, settings.identity) == ("authenticated", "google")


@pytest.mark.parametrize(
    ("variable", "value"),
    [("AUTH", "open"), ("QUEUES_PUSH_MAX_BACKOFF", "1h"), ("FUNCTIONS_WORKER_MEMORY", "1GB")],
)
def test_a_bad_value_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        load(DEFAULT_FILE, {"PROJECT": "my-project", variable: value})


@pytest.mark.parametrize(
    ("stderr", "advice"),
    [
        (
            "ERROR: FAILED_PRECONDITION: Billing account for project '1234' is not found.",
            "gcloud billing projects link p1",
        ),
        (
            "PERMISSION_DENIED: Cloud Run Admin API has not been used in project 1234 before or it "
            "is disabled. Enable it by visiting https://console.developers.google.com/apis/api/"
            "run.googleapis.com/overview",
            "gcloud services enable run.googleapis.com --project=p1",
        ),
        (
            "ERROR: (gcloud.iam.service-accounts.create) PERMISSION_DENIED: Permission "
            "'iam.serviceAccounts.create' denied on resource (or it may not exist).",
            "(iam.serviceAccounts.create)",
        ),
        ("ERROR: You do not currently have an active account selected.", "gcloud auth login"),
    ],
)
def test_failures_come_with_what_to_run(stderr: str, advice: str) -> None:
    assert advice in (diagnose(stderr, "p1") or "")
