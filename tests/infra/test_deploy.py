"""`python -m infra deploy|destroy` with a fake gcloud: order, idempotence, dry run, failure."""

from __future__ import annotations

import io
import itertools
import json
import re
import shlex
from pathlib import Path

import pytest

from infra.__main__ import main
from tests.infra.conftest import REAL_ROOT
from tests.infra.fake_gcloud import PROJECT_NUMBER, FakeGcloud

DISABLED = (
    "ERROR: (gcloud.tasks.queues.create) PERMISSION_DENIED: Cloud Tasks API has not been used "
    "in project 1234 before or it is disabled. Enable it by visiting https://console.developers"
    ".google.com/apis/api/cloudtasks.googleapis.com/overview?project=1234\n"
)


def run(repo: Path, *command: str) -> int:
    stage_dir = repo / "build" / "stage"
    return main(["--repo-root", str(repo), "--stage-dir", str(stage_dir), *command])


def position(calls: list[list[str]], *words: str) -> int:
    """Index of the first call whose argv starts with `words` (fails the test if none does)."""
    for index, call in enumerate(calls):
        if call[: len(words)] == list(words):
            return index
    raise AssertionError(f"no call starts with {words}")


def flag(call: list[str], name: str) -> str:
    return next(word.split("=", 1)[1] for word in call if word.startswith(f"--{name}="))


def _assert_each_account_gets_what_it_uses(
    calls: list[list[str]], fake_gcloud: FakeGcloud, functions: tuple[int, int, int]
) -> None:
    """Cloud Build's roles before the first build, enqueuing on the queues used, one log key."""
    deliver, worker, a2a = functions
    granted = {
        (
            flag(call, "member").split(":")[1].split("@")[0],
            flag(call, "role"),
            flag(call, "condition").split(",title=")[0].removeprefix("expression="),
        )
        for call in calls
        if call[:2] == ["projects", "add-iam-policy-binding"]
    }
    database = 'resource.name == "projects/demo-project/databases/(default)"'
    assert granted == {
        # Firestore, on the kit's database only (tests/infra/test_grants.py).
        ("a2a-runtime", "roles/datastore.user", database),
        ("a2a-deliver", "roles/datastore.user", database),
        # Cloud Build's account, before the first build, and the functions built as it: its
        # logs, and the function source buckets only (its image: on the repository).
        ("a2a-build", "roles/logging.logWriter", "None"),
        (
            "a2a-build",
            "roles/storage.objectAdmin",
            'resource.name.startsWith("projects/_/buckets/gcf-v2-sources-")',
        ),
    }
    build_grants = [
        i
        for i, call in enumerate(calls)
        if call[:2] == ["projects", "add-iam-policy-binding"]
        and "a2a-build@" in flag(call, "member")
    ]
    assert max(build_grants) < deliver
    build_account = (
        "projects/demo-project/serviceAccounts/a2a-build@demo-project.iam.gserviceaccount.com"
    )
    assert {flag(calls[i], "build-service-account") for i in (deliver, worker, a2a)} == {
        build_account
    }
    # Enqueuing only on the queues each uses: a2a and worker both, deliver its own again.
    enqueuers = {
        (call[3], flag(call, "member").split(":")[1].split("@")[0])
        for call in calls
        if call[:3] == ["tasks", "queues", "add-iam-policy-binding"]
        and flag(call, "role") == "roles/cloudtasks.enqueuer"
    }
    assert enqueuers == {("work", "a2a-runtime"), ("push", "a2a-runtime"), ("push", "a2a-deliver")}
    # One log owner key for the three: generated once into Secret Manager, read by all.
    (created,) = [call for call in calls if call[:2] == ["secrets", "create"]]
    assert created[2] == "a2a-log-owner-key" and "--data-file=-" in created
    assert json.loads(fake_gcloud.state.read_text())["secret/a2a-log-owner-key"]["size"] == 64
    for i in (deliver, worker, a2a):
        assert flag(calls[i], "set-secrets") == "A2A_LOG_OWNER_KEY=a2a-log-owner-key:latest"
    readers = {
        flag(call, "member").split(":")[1].split("@")[0]
        for call in calls
        if call[:3] == ["secrets", "add-iam-policy-binding", "a2a-log-owner-key"]
    }
    assert readers == {"a2a-runtime", "a2a-deliver"}


def test_first_run_creates_everything_in_order(
    fake_gcloud: FakeGcloud, fake_repo: Path, project_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(fake_repo, "deploy") == 0

    calls = fake_gcloud.changes()
    enable = position(calls, "services", "enable")
    assert enable == 0, "APIs come before every other change"
    assert {"cloudtasks.googleapis.com", "firestore.googleapis.com"} <= set(calls[0])
    runtime_sa = position(calls, "iam", "service-accounts", "create", "a2a-runtime")
    invoker_sa = position(calls, "iam", "service-accounts", "create", "a2a-tasks")
    bindings = [i for i, call in enumerate(calls) if call[1].startswith("add-iam-policy-binding")]
    bindings += [i for i, call in enumerate(calls) if call[2:3] == ["add-iam-policy-binding"]]
    assert bindings and min(bindings) > max(runtime_sa, invoker_sa)
    database = position(calls, "firestore", "databases", "create")
    ttl = position(calls, "firestore", "fields", "ttls", "update", "expireAt")
    assert database < ttl
    deliver = position(calls, "functions", "deploy", "deliver")
    worker = position(calls, "functions", "deploy", "worker")
    a2a = position(calls, "functions", "deploy", "a2a")
    assert max(runtime_sa, invoker_sa) < deliver < worker < a2a

    # The wiring: each function is built once, knowing the URLs it calls and its own (the
    # audience of the tokens it checks), all known from the project's number beforehand.
    assert [call[2] for call in calls if call[:2] == ["functions", "deploy"]] == [
        "deliver",
        "worker",
        "a2a",
    ]
    a2a_env = flag(calls[a2a], "set-env-vars")
    url = f"{PROJECT_NUMBER}.us-central1.run.app"
    assert f"A2A_WORKER_URL=https://worker-{url}" in a2a_env
    assert f"A2A_DELIVER_URL=https://deliver-{url}" in a2a_env
    assert f"A2A_PUBLIC_URL=https://a2a-{url}" in a2a_env
    worker_env = flag(calls[worker], "set-env-vars")
    assert f"A2A_DELIVER_URL=https://deliver-{url}" in worker_env
    assert f"A2A_WORKER_URL=https://worker-{url}" in worker_env
    assert f"A2A_DELIVER_URL=https://deliver-{url}" in flag(calls[deliver], "set-env-vars")
    # Never open by default: IAM checks a Google ID token, the agent owns tasks by its e-mail.
    assert "--no-allow-unauthenticated" in calls[a2a]
    assert "A2A_AUTH=google" in a2a_env
    assert "A2A_AUDIENCE=https://us-central1-demo-project.cloudfunctions.net/a2a" in a2a_env
    assert not [call for call in calls if "--member=allUsers" in call]
    assert "--no-allow-unauthenticated" in calls[worker]
    assert "--no-allow-unauthenticated" in calls[deliver]
    assert flag(calls[a2a], "entry-point") == "a2a"
    assert flag(calls[a2a], "runtime") == "python311"
    assert Path(flag(calls[a2a], "source"), "main.py").is_file()

    # Cloud Tasks' identity may invoke worker and deliver, after they exist, and nothing else.
    invoker = "--member=serviceAccount:a2a-tasks@demo-project.iam.gserviceaccount.com"
    invoker_bindings = [
        call[3]
        for call in calls
        if call[:3] == ["run", "services", "add-iam-policy-binding"] and invoker in call
    ]
    assert invoker_bindings == ["deliver", "worker"]
    # Each function runs as an account with only the roles it uses: deliver Firestore, and
    # Cloud Tasks to re-queue a delivery that finds its config busy.
    assert flag(calls[deliver], "service-account").startswith("a2a-deliver@")
    assert flag(calls[worker], "service-account").startswith("a2a-runtime@")
    _assert_each_account_gets_what_it_uses(calls, fake_gcloud, (deliver, worker, a2a))
    acting = {
        flag(call, "member").split(":")[1].split("@")[0]
        for call in calls
        if call[:3] == ["iam", "service-accounts", "add-iam-policy-binding"]
        and flag(call, "role") == "roles/iam.serviceAccountUser"
    }
    assert acting == {"a2a-runtime", "a2a-deliver"}  # their queued tasks carry a2a-tasks' token
    assert position(calls, "run", "services", "add-iam-policy-binding", "worker") > worker
    roles = {flag(call, "role") for call in calls if "add-iam-policy-binding" in call}
    assert roles == {
        "roles/datastore.user",
        "roles/cloudtasks.enqueuer",
        "roles/iam.serviceAccountUser",
        "roles/run.invoker",
        "roles/secretmanager.secretAccessor",
        "roles/logging.logWriter",
        "roles/artifactregistry.writer",
        "roles/storage.objectAdmin",
    }

    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == (
        f"agent card: https://a2a-{url}/.well-known/agent-card.json"
    )
    assert "callers: IAM (roles/run.invoker), A2A_AUTH=google: Authorization: Bearer" in out


def test_the_default_deploy_leaves_the_console_off(
    fake_gcloud: FakeGcloud, fake_repo: Path, project_env: None
) -> None:
    """The browser console is for development: no deployed function serves it unless the
    deploy's [env] says A2A_CONSOLE."""
    assert run(fake_repo, "deploy") == 0
    deploys = [call for call in fake_gcloud.changes() if call[:2] == ["functions", "deploy"]]
    assert len(deploys) == 3  # each function is built once
    for call in deploys:
        assert "A2A_CONSOLE" not in flag(call, "set-env-vars"), call[2]


def test_second_run_changes_nothing_then_only_what_differs(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(fake_repo, "deploy") == 0
    fake_gcloud.clear_log()

    assert run(fake_repo, "deploy") == 0
    assert fake_gcloud.calls(), "the second run still looks at every resource"
    assert fake_gcloud.changes() == []
    assert "up to date" in capsys.readouterr().out

    fake_gcloud.clear_log()
    monkeypatch.setenv("FUNCTIONS_WORKER_MEMORY", "1Gi")
    monkeypatch.setenv("QUEUES_PUSH_MAX_ATTEMPTS", "5")
    # (alone, it changes no attempt: the queue retries for max_retry_duration anyway)
    monkeypatch.setenv("QUEUES_PUSH_MAX_RETRY_DURATION", "0s")
    assert run(fake_repo, "deploy") == 0
    changed = [call[:4] for call in fake_gcloud.changes()]
    assert changed == [
        ["tasks", "queues", "update", "push"],
        ["functions", "deploy", "deliver", "--gen2"],  # it reads the push queue's attempts
        ["functions", "deploy", "worker", "--gen2"],
    ]
    out = capsys.readouterr().out
    assert "max-attempts 30 -> 5" in out
    assert "memory 512Mi -> 1Gi" in out

    # A change in the code redeploys the functions (they all ship the same packages).
    fake_gcloud.clear_log()
    (fake_repo / "shared" / "card.py").write_text('CARD = {"name": "changed"}\n')
    assert run(fake_repo, "deploy") == 0
    assert [call[:3] for call in fake_gcloud.changes()] == [
        ["functions", "deploy", "deliver"],
        ["functions", "deploy", "worker"],
        ["functions", "deploy", "a2a"],
    ]


def test_switching_to_authenticated_removes_public_access(
    fake_gcloud: FakeGcloud, fake_repo: Path, project_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTH", "public")
    monkeypatch.setenv("IDENTITY", "none")
    monkeypatch.setenv("OPEN_TO_EVERYONE", "1")
    assert run(fake_repo, "deploy") == 0
    fake_gcloud.clear_log()
    monkeypatch.setenv("AUTH", "authenticated")
    assert run(fake_repo, "deploy") == 0
    # The function itself is unchanged: who may call it lives in the service's IAM policy.
    changes = fake_gcloud.changes()
    assert [call[:4] for call in changes] == [
        ["run", "services", "remove-iam-policy-binding", "a2a"]
    ]
    assert "--member=allUsers" in changes[0]


def test_dry_run_prints_every_command_and_runs_none(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DRY_RUN", "1")
    assert run(fake_repo, "deploy") == 0
    assert fake_gcloud.calls() == []
    out = capsys.readouterr().out
    commands = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("  ")]
    assert commands[0].startswith("gcloud services list")
    order = [
        "gcloud services enable",
        "gcloud firestore databases create",
        "gcloud tasks queues create work",
        "gcloud iam service-accounts create a2a-runtime",
        "gcloud projects add-iam-policy-binding demo-project",
        "gcloud functions deploy deliver",
        "gcloud functions deploy worker",
        "gcloud functions deploy a2a",
    ]
    found = [next(i for i, c in enumerate(commands) if c.startswith(prefix)) for prefix in order]
    assert found == sorted(found)
    assert "A2A_WORKER_URL='<url of worker>'" in out or "A2A_WORKER_URL=<url of worker>" in out
    assert out.rstrip().endswith("agent card: <url of a2a>/.well-known/agent-card.json")


def test_the_dry_run_prints_every_change_a_first_deploy_makes_and_no_secret(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Issue 26, item 4: a first deploy built each function twice where the dry run said
    # `check:` only; now both list the same changes, in the same order.
    def resource(argv: list[str]) -> list[str]:
        return list(itertools.takewhile(lambda word: not word.startswith("--"), argv))

    monkeypatch.setenv("DRY_RUN", "1")
    assert run(fake_repo, "deploy") == 0
    printed = [
        resource(shlex.split(line.split(":", 1)[1])[1:])
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("  ") and not line.startswith(("  check:", "  #"))
    ]
    monkeypatch.delenv("DRY_RUN")
    assert run(fake_repo, "deploy") == 0
    ran = [resource(call) for call in fake_gcloud.changes()]
    assert printed == ran
    assert [words[:3] for words in ran].count(["functions", "deploy", "a2a"]) == 1
    assert not re.search(r"[0-9a-f]{64}", capsys.readouterr().out), "the key is never shown"


def test_an_earlier_project_wide_enqueuer_role_is_taken_away(
    fake_gcloud: FakeGcloud, fake_repo: Path, project_env: None
) -> None:
    assert run(fake_repo, "deploy") == 0
    state = json.loads(fake_gcloud.state.read_text())
    members = [
        f"serviceAccount:a2a-{name}@demo-project.iam.gserviceaccount.com"
        for name in ("runtime", "deliver")
    ]
    state["policy/projects/demo-project"]["roles/cloudtasks.enqueuer"] = members
    fake_gcloud.state.write_text(json.dumps(state))
    fake_gcloud.clear_log()
    assert run(fake_repo, "deploy") == 0
    revoked = [
        flag(call, "member")
        for call in fake_gcloud.changes()
        if call[:2] == ["projects", "remove-iam-policy-binding"]
        and flag(call, "role") == "roles/cloudtasks.enqueuer"
    ]
    assert revoked == members
    assert len(fake_gcloud.changes()) == 2, "and nothing else changes"


def test_a_log_owner_key_of_the_settings_is_used_and_none_generated(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    toml = (REAL_ROOT / "infra" / "deploy.toml").read_text()
    custom = tmp_path / "deploy.toml"
    custom.write_text(toml.replace("[secrets]\n", '[secrets]\nA2A_LOG_OWNER_KEY = "my-key:3"\n'))
    assert run(fake_repo, "--settings", str(custom), "deploy") == 1  # no such secret yet
    err = capsys.readouterr().err
    assert "[secrets] A2A_LOG_OWNER_KEY names secret my-key, which does not exist" in err
    assert "gcloud secrets create my-key --data-file=- --project=demo-project" in err
    assert not [c for c in fake_gcloud.calls() if "add-iam-policy-binding" in c], "stops first"
    fake_gcloud.clear_log()
    state = json.loads(fake_gcloud.state.read_text())
    state["secret/my-key"] = {"name": "projects/1/secrets/my-key"}
    fake_gcloud.state.write_text(json.dumps(state))
    assert run(fake_repo, "--settings", str(custom), "deploy") == 0
    calls = fake_gcloud.changes()
    assert not [call for call in calls if call[:2] == ["secrets", "create"]]
    deploys = [call for call in calls if call[:2] == ["functions", "deploy"]]
    assert {flag(call, "set-secrets") for call in deploys} == {"A2A_LOG_OWNER_KEY=my-key:3"}


def test_failing_step_stops_the_run_and_says_how_to_fix_it(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(
        "FAKE_GCLOUD_FAIL", json.dumps({"match": "tasks queues create work", "stderr": DISABLED})
    )
    assert run(fake_repo, "deploy") == 1
    err = capsys.readouterr().err
    assert "queue work failed (create, exit 1)" in err
    assert "Cloud Tasks API has not been used" in err
    assert "gcloud services enable cloudtasks.googleapis.com --project=demo-project" in err
    last = fake_gcloud.calls()[-1]
    assert last[:4] == ["tasks", "queues", "create", "work"], "nothing runs after the failure"


def test_missing_project_is_named(
    fake_gcloud: FakeGcloud, fake_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(fake_repo, "deploy") == 1
    assert "make deploy PROJECT=my-project" in capsys.readouterr().err
    assert fake_gcloud.calls() == []


def test_index_file_is_applied_once(
    fake_gcloud: FakeGcloud, fake_repo: Path, project_env: None
) -> None:
    (fake_repo / "infra").mkdir()
    (fake_repo / "infra" / "firestore.indexes.json").write_text(
        json.dumps(
            {
                "indexes": [
                    {
                        "collectionGroup": "tasks",
                        "queryScope": "COLLECTION",
                        "fields": [
                            {"fieldPath": "owner", "order": "ASCENDING"},
                            {"fieldPath": "updatedAt", "order": "DESCENDING"},
                        ],
                    }
                ],
                "fieldOverrides": [
                    {"collectionGroup": "events", "fieldPath": "payload", "indexes": []}
                ],
            }
        )
    )
    assert run(fake_repo, "deploy") == 0
    changes = fake_gcloud.changes()
    created = [
        call for call in changes if call[:4] == ["firestore", "indexes", "composite", "create"]
    ]
    assert len(created) == 1
    assert "--field-config=field-path=updatedAt,order=descending" in created[0]
    assert any("--disable-indexes" in call for call in changes)
    fake_gcloud.clear_log()
    assert run(fake_repo, "deploy") == 0
    assert fake_gcloud.changes() == []


def test_missing_index_file_is_reported_not_fatal(
    fake_gcloud: FakeGcloud, fake_repo: Path, project_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(fake_repo, "deploy") == 0
    out = capsys.readouterr().out
    assert "Firestore indexes: skipped:" in out
    assert "firestore.indexes.json does not exist yet" in out


def test_the_sweep_is_scheduled_on_the_worker_as_the_account_that_may_call_it(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert run(fake_repo, "deploy") == 0
    calls = fake_gcloud.changes()
    job = position(calls, "scheduler", "jobs", "create", "http", "a2a-sweep")
    # After the worker knows its own URL: the audience its token check compares.
    assert job > max(
        i for i, call in enumerate(calls) if call[:3] == ["functions", "deploy", "worker"]
    )
    worker = f"https://worker-{PROJECT_NUMBER}.us-central1.run.app"
    assert flag(calls[job], "uri") == f"{worker}/sweep"
    assert flag(calls[job], "http-method") == "POST"
    assert flag(calls[job], "oidc-token-audience") == worker
    assert flag(calls[job], "oidc-service-account-email") == (
        "a2a-tasks@demo-project.iam.gserviceaccount.com"
    )
    assert flag(calls[job], "schedule") == "* * * * *"
    assert "cloudscheduler.googleapis.com" in calls[0]

    # (A second deploy leaves it be: test_second_run_changes_nothing_then_only_what_differs.)
    fake_gcloud.clear_log()
    monkeypatch.setenv("SWEEP_SCHEDULE", "*/5 * * * *")
    assert run(fake_repo, "deploy") == 0
    (update,) = fake_gcloud.changes()
    assert update[:5] == ["scheduler", "jobs", "update", "http", "a2a-sweep"]
    assert flag(update, "schedule") == "*/5 * * * *"


def test_destroy_asks_then_removes_what_deploy_created(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert run(fake_repo, "deploy") == 0
    fake_gcloud.clear_log()

    monkeypatch.setattr("sys.stdin", io.StringIO("no\n"))
    assert run(fake_repo, "destroy") == 1
    assert fake_gcloud.calls() == []

    monkeypatch.setattr("sys.stdin", io.StringIO("demo-project\n"))
    assert run(fake_repo, "destroy") == 0
    deleted = [call[:3] for call in fake_gcloud.changes() if "delete" in call[:3]]
    assert [words[0] for words in deleted] == (
        ["scheduler"]
        + ["functions"] * 3
        + ["tasks"] * 2
        + ["artifacts"]
        + ["secrets"]
        + ["iam"] * 4
    )
    state = json.loads(fake_gcloud.state.read_text())
    gone = ("job/", "function/", "queue/", "account/", "secret/", "repository/")
    assert not [key for key in state if key.startswith(gone)]
    assert "database/(default)" in state, "the data stays unless --delete-database"

    fake_gcloud.clear_log()
    assert run(fake_repo, "destroy", "--yes") == 0
    assert fake_gcloud.changes() == []


@pytest.mark.parametrize(
    "case",
    [
        ({"AUTH": "public", "IDENTITY": "none"}, "OPEN_TO_EVERYONE=1"),
        ({"AUTH": "public"}, "AUTH=authenticated"),  # google mode is for IAM-checked callers
        ({"IDENTITY": "api-key"}, "A2A_API_KEYS"),
        ({"AUTH": "public", "IDENTITY": "oidc"}, "A2A_OIDC_ISSUER and A2A_OIDC_AUDIENCE"),
    ],
)
@pytest.mark.usefixtures("project_env")
def test_an_open_or_incomplete_identity_is_refused_before_anything_runs(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: tuple[dict[str, str], str],
) -> None:
    variables, named = case
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert run(fake_repo, "deploy") == 1
    assert named in capsys.readouterr().err
    assert fake_gcloud.changes() == []


def test_open_to_everyone_must_be_said_and_then_is_public(
    fake_gcloud: FakeGcloud, fake_repo: Path, project_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTH", "public")
    monkeypatch.setenv("IDENTITY", "none")
    monkeypatch.setenv("OPEN_TO_EVERYONE", "1")
    assert run(fake_repo, "deploy") == 0
    calls = fake_gcloud.changes()
    a2a = position(calls, "functions", "deploy", "a2a")
    assert "--allow-unauthenticated" in calls[a2a]
    assert "A2A_AUTH=none" in flag(calls[a2a], "set-env-vars")


def test_invokers_may_call_an_authenticated_agent(
    fake_gcloud: FakeGcloud, fake_repo: Path, project_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INVOKERS", "user:ann@example.com, group:team@example.com")
    assert run(fake_repo, "deploy") == 0
    members = [
        flag(call, "member")
        for call in fake_gcloud.changes()
        if call[:4] == ["run", "services", "add-iam-policy-binding", "a2a"]
    ]
    assert members == ["user:ann@example.com", "group:team@example.com"]
    monkeypatch.setenv("INVOKERS", "ann@example.com")
    assert run(fake_repo, "deploy") == 1
