"""The ordered steps of `make deploy` and `make destroy`, built from the settings.

Order is what makes one pass enough: APIs before any resource, service accounts before the
bindings and functions that name them, `deliver` before `worker` before `a2a` so that each is
deployed knowing the URLs it enqueues to, and invoker bindings once their service exists. A
function also learns its own URL, the audience of the tokens it checks, fixed at deploy time
rather than read from a request's Host header: on a first deploy it exists only after its
deploy step, so a last step per function sets it (a redeploy finds it already set).

Who may call `a2a` is checked before anything runs (infra.settings.Settings.check_access): by
default IAM-authenticated with A2A_AUTH=google; never public with A2A_AUTH=none unless asked.
Each function runs as an account with only the roles it uses: a2a and worker (runtime) read
and write Firestore and enqueue Cloud Tasks as the invoker account; deliver uses Firestore and
re-queues a delivery that finds its config busy (Cloud Tasks, as the invoker account too).
With `[env] A2A_TRACING = "gcp"` both accounts also write spans to Cloud Trace; a deploy with
tracing off (or to OTLP) takes that role away again.
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

from infra.resources import (
    Apis,
    Binding,
    CompositeIndexes,
    Database,
    FieldOverride,
    Function,
    FunctionSpec,
    Notice,
    Queue,
    Removal,
    SchedulerJob,
    ServiceAccount,
    Ttl,
    account_policy,
    index_from_file,
    index_kind,
    project_policy,
    secret_policy,
    service_policy,
)
from infra.settings import FunctionSettings, Settings
from infra.stage import stage
from infra.steps import PlanError, Step, gcloud

APIS = (
    "cloudresourcemanager.googleapis.com",
    "iam.googleapis.com",
    "cloudfunctions.googleapis.com",
    "run.googleapis.com",
    "cloudbuild.googleapis.com",
    "artifactregistry.googleapis.com",
    "firestore.googleapis.com",
    "cloudtasks.googleapis.com",
    "cloudscheduler.googleapis.com",  # the sweep's schedule
)
SECRETS_API = "secretmanager.googleapis.com"
# deliver first: worker needs its URL, a2a needs both.
DEPLOY_ORDER = ("deliver", "worker", "a2a")
# Environment variable -> role whose URL it carries, per function (its own: its tokens' audience).
WIRING: dict[str, dict[str, str]] = {
    "a2a": {"A2A_WORKER_URL": "worker", "A2A_DELIVER_URL": "deliver", "A2A_PUBLIC_URL": "a2a"},
    "worker": {"A2A_DELIVER_URL": "deliver", "A2A_WORKER_URL": "worker"},
    "deliver": {"A2A_DELIVER_URL": "deliver"},
}
PROJECT_ROLES = ("roles/datastore.user", "roles/cloudtasks.enqueuer")  # a2a and worker
# Reads tasks and configs, records deliveries; re-queues a delivery that finds its config busy.
DELIVER_ROLES = ("roles/datastore.user", "roles/cloudtasks.enqueuer")
# Secrets only `a2a` reads: the callers' key hashes stay away from worker and deliver.
A2A_ONLY_SECRETS = frozenset({"A2A_API_KEYS"})
INVOKER = "roles/run.invoker"
# Writes spans to Cloud Trace: held by the functions' accounts only while A2A_TRACING=gcp.
TRACE_AGENT = "roles/cloudtrace.agent"
PUBLIC = "allUsers"


def function_env(settings: Settings, role: str) -> dict[str, str]:
    """The settings every function reads at start-up (the wiring URLs come on top).

    The `[env]` table of the settings file comes first, so the deploy's own values win.
    """
    own = (
        {  # only a2a has callers; their Google ID tokens may name its URL known beforehand
            "A2A_AUTH": settings.identity,
            "A2A_AUDIENCE": settings.function_url(role),
        }
        if role == "a2a"
        else {}
    )
    return {
        **settings.env,
        **own,
        "A2A_BACKEND": "firestore",
        "A2A_HANDLER": settings.handler,
        "GOOGLE_CLOUD_PROJECT": settings.project,
        "A2A_REGION": settings.region,
        "A2A_FIRESTORE_DATABASE": settings.firestore_database,
        "A2A_WORK_QUEUE": settings.queues.work.name,
        # The worker fails a task itself on the queue's last attempt, rather than leave it
        # working: the last by both max_attempts and max_retry_duration.
        "A2A_WORK_MAX_ATTEMPTS": str(settings.queues.work.attempts()),
        # A turn the queue may still retry is not recovered: its whole retry schedule.
        "A2A_WORK_RETRY_SECONDS": f"{settings.queues.work.retry_span():g}",
        "A2A_PUSH_QUEUE": settings.queues.push.name,
        "A2A_RETENTION_DAYS": str(settings.retention_days),
        "A2A_FUNCTION_TIMEOUT": str(getattr(settings.functions, role).timeout),
        "A2A_TASKS_SERVICE_ACCOUNT": settings.invoker_email,
        # functions-framework serves with 4 threads per CPU unless told: the function's own
        # (deploy.toml), or one thread per request it accepts at once.
        "THREADS": str(_threads(getattr(settings.functions, role))),
    } | (
        # Only `deliver` acts on the push queue's last attempt.
        {"A2A_PUSH_MAX_ATTEMPTS": str(settings.queues.push.attempts())} if role == "deliver" else {}
    )


def _threads(function: FunctionSettings) -> int:
    return function.threads or function.concurrency


def function_secrets(settings: Settings, role: str) -> dict[str, str]:
    return {
        env: ref
        for env, ref in settings.secrets.items()
        if role == "a2a" or env not in A2A_ONLY_SECRETS
    }


def deploy_plan(settings: Settings, repo_root: Path, stage_root: Path) -> list[Step]:
    """Every step of a deploy, in an order where each finds what it needs already in place."""
    settings.check_access()
    _refuse_loopback_webhooks(settings)
    project = settings.project
    runtime = f"serviceAccount:{settings.runtime_email}"
    deliverer = f"serviceAccount:{settings.deliver_email}"
    invoker = f"serviceAccount:{settings.invoker_email}"
    apis = APIS + ((SECRETS_API,) if settings.secrets else ())
    steps: list[Step] = [
        Apis(project, apis),
        Database(project, settings.firestore_database, settings.location),
        *_index_steps(settings, repo_root / settings.firestore_indexes),
        *(
            Ttl(project, settings.firestore_database, group, settings.ttl_field)
            for group in settings.ttl_collection_groups
        ),
        Queue(project, settings.region, settings.queues.work),
        Queue(project, settings.region, settings.queues.push),
        ServiceAccount(project, settings.runtime_service_account, "function runtime"),
        ServiceAccount(project, settings.invoker_service_account, "Cloud Tasks invoker"),
        ServiceAccount(project, settings.deliver_service_account, "push delivery"),
        *(Binding(project, project_policy(project), role, runtime) for role in PROJECT_ROLES),
        *(Binding(project, project_policy(project), role, deliverer) for role in DELIVER_ROLES),
        # Switching tracing off (or to otlp) also takes the role away.
        *(
            Binding(
                project,
                project_policy(project),
                TRACE_AGENT,
                member,
                present=any(_traces_to_gcp(settings, role) for role in roles),
            )
            for member, roles in ((runtime, ("a2a", "worker")), (deliverer, ("deliver",)))
        ),
        # The functions create tasks whose OIDC token is minted for the invoker account.
        *(
            Binding(
                project,
                account_policy(settings.invoker_email),
                "roles/iam.serviceAccountUser",
                member,
            )
            for member in (runtime, deliverer)
        ),
        *(
            Binding(
                project,
                secret_policy(_secret_name(ref)),
                "roles/secretmanager.secretAccessor",
                member,
            )
            for member, role in ((runtime, "a2a"), (deliverer, "deliver"))
            for ref in sorted(set(function_secrets(settings, role).values()))
        ),
    ]
    functions: list[Function] = []
    for role in DEPLOY_ORDER:
        function = getattr(settings.functions, role)
        staged = stage(
            repo_root, role, stage_root / role, settings.handler, settings.functions.extras
        )
        public = role == "a2a" and settings.auth == "public"
        spec = FunctionSpec(
            role=role,
            settings=function,
            region=settings.region,
            source=str(staged.path),
            source_hash=staged.source_hash,
            service_account=settings.deliver_email if role == "deliver" else settings.runtime_email,
            env=function_env(settings, role),
            wiring=WIRING[role],
            secrets=function_secrets(settings, role),
            public=public,
        )
        functions.append(Function(project, spec))
        steps.append(functions[-1])
        policy = service_policy(function.name, settings.region)
        if role == "a2a":
            # Switching to "authenticated" must also take away an earlier public binding.
            steps.append(Binding(project, policy, INVOKER, PUBLIC, present=public))
            if not public:
                steps += [Binding(project, policy, INVOKER, member) for member in settings.invokers]
        else:
            steps.append(Binding(project, policy, INVOKER, invoker))
    # Each function's own URL, known once it exists (a no-op when a redeploy found it).
    steps += [Function(project, function.spec, own_url=True) for function in functions]
    # The sweep, once the worker is there to take it: signed as the account that alone may
    # call the worker (it has roles/run.invoker there), so it needs no grant of its own.
    steps.append(SchedulerJob(project, settings.region, settings.sweep, settings.invoker_email))
    return steps


def _traces_to_gcp(settings: Settings, role: str) -> bool:
    """Whether the function `role` exports spans to Cloud Trace (shared.observability.tracing)."""
    return function_env(settings, role).get("A2A_TRACING") == "gcp"


def _refuse_loopback_webhooks(settings: Settings) -> None:
    """`make run` and `make dev` allow webhooks on this machine; a deployed function must not:
    there, a loopback URL reaches the function's own instance."""
    hosts = settings.env.get("A2A_PUSH_ALLOWED_HOSTS", "").replace(" ", ",").split(",")
    loopback = [host for host in hosts if host and _is_loopback(host)]
    if loopback:
        raise PlanError(
            f"[env] A2A_PUSH_ALLOWED_HOSTS allows {', '.join(loopback)}: webhooks on a deployed "
            "function's own machine are never allowed (local runs allow them); remove them "
            "from infra/deploy.toml"
        )


def _is_loopback(host: str) -> bool:
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _secret_name(reference: str) -> str:
    return reference.split(":", 1)[0]


def _index_steps(settings: Settings, path: Path) -> list[Step]:
    project, database = settings.project, settings.firestore_database
    if not path.is_file():
        return [
            Notice(
                "Firestore indexes",
                f"{path} does not exist yet (the Firestore store owns it): no composite indexes "
                "applied; queries that need one fail until it exists and make deploy runs again",
            )
        ]
    try:
        content: dict[str, Any] = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise PlanError(f"{path} is not valid JSON: {error}") from error
    steps: list[Step] = [
        CompositeIndexes(
            project, database, tuple(index_from_file(entry) for entry in content.get("indexes", []))
        )
    ]
    for override in content.get("fieldOverrides", []):
        group, field = override["collectionGroup"], override["fieldPath"]
        indexes = tuple(
            (index.get("queryScope", "COLLECTION"), *index_kind(index))
            for index in override.get("indexes", [])
        )
        steps.append(FieldOverride(project, database, group, field, indexes))
        if override.get("ttl") and group not in settings.ttl_collection_groups:
            steps.append(Ttl(project, database, group, field))
    return steps


def destroy_plan(settings: Settings, *, delete_database: bool) -> list[Step]:
    """The deploy in reverse: functions first, so nothing runs while the rest goes away."""
    project, region = settings.project, settings.region
    runtime = f"serviceAccount:{settings.runtime_email}"
    # The schedule first: it would call a worker that is going away.
    steps: list[Step] = [
        Removal(
            f"scheduler job {settings.sweep.name}",
            gcloud(
                project,
                "scheduler",
                "jobs",
                "describe",
                args=(settings.sweep.name,),
                flags=(f"--location={region}",),
                json=True,
            ),
            gcloud(
                project,
                "scheduler",
                "jobs",
                "delete",
                args=(settings.sweep.name,),
                flags=(f"--location={region}",),
            ),
        )
    ]
    for role in reversed(DEPLOY_ORDER):
        name = getattr(settings.functions, role).name
        flags = (f"--region={region}",)
        steps.append(
            Removal(
                f"function {name}",
                gcloud(
                    project,
                    "functions",
                    "describe",
                    args=(name,),
                    flags=(*flags, "--v2"),
                    json=True,
                ),
                gcloud(project, "functions", "delete", args=(name,), flags=flags),
            )
        )
    for queue in (settings.queues.work, settings.queues.push):
        flags = (f"--location={region}",)
        steps.append(
            Removal(
                f"queue {queue.name}",
                gcloud(
                    project,
                    "tasks",
                    "queues",
                    "describe",
                    args=(queue.name,),
                    flags=flags,
                    json=True,
                ),
                gcloud(project, "tasks", "queues", "delete", args=(queue.name,), flags=flags),
            )
        )
    deliverer = f"serviceAccount:{settings.deliver_email}"
    # The trace role too, whatever tracing is now: an earlier deploy may have granted it.
    steps += [
        Binding(project, project_policy(project), role, runtime, present=False)
        for role in (*PROJECT_ROLES, TRACE_AGENT)
    ]
    steps += [
        Binding(project, project_policy(project), role, deliverer, present=False)
        for role in (*DELIVER_ROLES, TRACE_AGENT)
    ]
    steps += [
        Binding(
            project,
            secret_policy(_secret_name(ref)),
            "roles/secretmanager.secretAccessor",
            member,
            present=False,
        )
        for member, role in ((runtime, "a2a"), (deliverer, "deliver"))
        for ref in sorted(set(function_secrets(settings, role).values()))
    ]
    for account in (settings.runtime_email, settings.invoker_email, settings.deliver_email):
        steps.append(
            Removal(
                f"service account {account.split('@')[0]}",
                gcloud(project, "iam", "service-accounts", "describe", args=(account,), json=True),
                gcloud(project, "iam", "service-accounts", "delete", args=(account,)),
            )
        )
    if delete_database:
        flags = (f"--database={settings.firestore_database}",)
        steps.append(
            Removal(
                f"Firestore database {settings.firestore_database} and all its data",
                gcloud(project, "firestore", "databases", "describe", flags=flags, json=True),
                gcloud(project, "firestore", "databases", "delete", flags=flags),
            )
        )
    return steps
