"""The ordered steps of `make deploy` and `make destroy`, built from the settings.

Order is what makes one pass enough: APIs before any resource, the project's number before
the functions (each function's deterministic run.app URL names it: infra.resources.Project,
so each is built once, knowing the URLs it enqueues to and its own, the audience of the
tokens it checks, fixed at deploy time rather than read from a request's Host header),
service accounts and their roles before the functions that run or are built as them
(Cloud Build's account too, granted up front), and invoker bindings once their service exists.

Who may call `a2a` is checked before anything runs (infra.settings.Settings.check_access): by
default IAM-authenticated with A2A_AUTH=google; never public with A2A_AUTH=none unless asked.
Each function runs as an account with only the roles it uses, granted where it is used:
a2a and worker (runtime) read and write the kit's Firestore database (an IAM condition holds
the project's grant to it) and enqueue on both queues (and only there) as the invoker
account; deliver uses that database and re-queues a delivery that finds its config busy (the
push queue only, as the invoker account too). Cloud Build's account writes logs, the
function source buckets (a condition again) and the kit's own image repository, nothing
else; an earlier deploy's project-wide grants are taken away. With `[env] A2A_TRACING =
"gcp"` both accounts also write spans to Cloud Trace; a deploy with tracing off (or to
OTLP) takes that role away again, as it takes away the project-wide enqueuer role earlier
versions granted. The three functions
share one A2A_LOG_OWNER_KEY, a secret the first deploy generates.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
from pathlib import Path
from typing import Any

from infra.resources import (
    Apis,
    Binding,
    CompositeIndexes,
    Condition,
    Database,
    FieldOverride,
    Function,
    FunctionSpec,
    GeneratedSecret,
    NamedSecret,
    Notice,
    Project,
    Queue,
    Removal,
    Repository,
    SchedulerJob,
    ServiceAccount,
    Ttl,
    account_policy,
    index_from_file,
    index_kind,
    project_policy,
    queue_policy,
    repository_policy,
    secret_policy,
    service_policy,
)
from infra.settings import QueueSettings, Settings
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
    "secretmanager.googleapis.com",  # the shared A2A_LOG_OWNER_KEY, and [secrets]
)
# The public endpoint last: what it enqueues to serves by the time it takes a request.
DEPLOY_ORDER = ("deliver", "worker", "a2a")
# Environment variable -> role whose URL it carries, per function (its own: its tokens' audience).
WIRING: dict[str, dict[str, str]] = {
    "a2a": {"A2A_WORKER_URL": "worker", "A2A_DELIVER_URL": "deliver", "A2A_PUBLIC_URL": "a2a"},
    "worker": {"A2A_DELIVER_URL": "deliver", "A2A_WORKER_URL": "worker"},
    "deliver": {"A2A_DELIVER_URL": "deliver"},
}
# Firestore: a2a and worker (runtime), and deliver, which reads tasks and configs and records
# deliveries. A database has no IAM policy of its own and IAM reaches no collection: the grant
# is the project's, held by a condition to the kit's database alone (docs/security.md).
DATASTORE_USER = "roles/datastore.user"
ENQUEUER = "roles/cloudtasks.enqueuer"  # on the queues each function enqueues to, no others
# Secrets only `a2a` reads: the callers' key hashes and the card's signing key stay away from
# worker and deliver.
A2A_ONLY_SECRETS = frozenset({"A2A_API_KEYS", "A2A_CARD_SIGNING_KEY"})
LOG_OWNER_KEY = "A2A_LOG_OWNER_KEY"
SECRET_ACCESSOR = "roles/secretmanager.secretAccessor"
# What Cloud Build's account needs to build a function from source (Cloud Run's "build
# service account" page lists these three), each where it is used: the build's logs (written
# to the project), the uploaded source (in the buckets Cloud Functions makes per region,
# gcf-v2-sources-<project number>-<region>), the image (the kit's own repository).
LOG_WRITER = "roles/logging.logWriter"
OBJECT_ADMIN = "roles/storage.objectAdmin"
REGISTRY_WRITER = "roles/artifactregistry.writer"
# Project-level IAM governs this project's buckets only: the prefix is its source buckets.
SOURCES = Condition(
    "function source buckets only", 'resource.name.startsWith("projects/_/buckets/gcf-v2-sources-")'
)
INVOKER = "roles/run.invoker"
# Writes spans to Cloud Trace: held by the functions' accounts only while A2A_TRACING=gcp.
TRACE_AGENT = "roles/cloudtrace.agent"
PUBLIC = "allUsers"


# The glibc malloc arenas a function's process keeps (MALLOC_ARENA_MAX): its allocations are
# made under the GIL but for the C libraries' own threads, so one arena costs no waiting.
MALLOC_ARENAS = "1"


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
        # glibc's malloc arenas: one per thread that allocates, up to 8 per CPU. A turn's
        # request, its loop and its handler's thread each grew their own, which held a big
        # message's freed memory apart (+2 MB for a 900 KB message, tests/test_limits.py).
        "MALLOC_ARENA_MAX": MALLOC_ARENAS,
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
        "THREADS": str(getattr(settings.functions, role).pool_threads),
    } | (
        # Only `deliver` acts on the push queue's last attempt.
        {"A2A_PUSH_MAX_ATTEMPTS": str(settings.queues.push.attempts())} if role == "deliver" else {}
    )


def _last_attempt(queue: QueueSettings) -> str:
    """Why a queue's last attempt is the one it is: Cloud Tasks' rule, with the numbers."""
    return (
        f"queue {queue.name} retries until it has made --max-attempts={queue.max_attempts} "
        f"attempts and --max-retry-duration={queue.max_retry_duration} has passed: at "
        f"--min-backoff={queue.min_backoff} doubled {queue.max_doublings} times up to "
        f"--max-backoff={queue.max_backoff}, its last is attempt {queue.attempts()}, "
        f"{queue.retry_span():g} s after the first"
    )


def derivations(settings: Settings, role: str) -> tuple[str, ...]:
    """Why each value of `function_env` that the deploy derives is what it is: a line each,
    printed under the function's deploy command (values of `[env]` are the user's own)."""
    env = function_env(settings, role)
    function = getattr(settings.functions, role)
    work, push = settings.queues.work, settings.queues.push
    threads = (
        f"functions.{role}.threads"
        if function.threads
        else f"its --concurrency={function.concurrency}, a thread for each request it takes "
        f"at once (functions.{role}.threads unset)"
    )
    why = {
        "A2A_AUDIENCE": "its own cloudfunctions.net URL, known before it is built: the "
        "audience of its callers' Google ID tokens",
        "A2A_WORK_MAX_ATTEMPTS": "the work queue's last attempt, on which the worker fails "
        f"the task itself rather than leave it working; {_last_attempt(work)}",
        "A2A_WORK_RETRY_SECONDS": "seconds from a turn's first attempt to its last, while "
        f"the sweep leaves the turn to the queue; {_last_attempt(work)}",
        "A2A_PUSH_MAX_ATTEMPTS": "the push queue's last attempt, on which deliver records "
        f"the failure on the config; {_last_attempt(push)}",
        "A2A_FUNCTION_TIMEOUT": f"the function's --timeout (functions.{role}.timeout)",
        "A2A_TASKS_SERVICE_ACCOUNT": "the account Cloud Tasks and Cloud Scheduler sign their "
        "OIDC tokens as (invoker_service_account), the only caller the worker and deliver take",
        "THREADS": threads,
    }
    notes = [f"{name}={env[name]}: {text}" for name, text in why.items() if name in env]
    wired = ", ".join(WIRING[role])
    notes.append(
        f"{wired}: the run.app URLs <name>-<project number>.{settings.region}.run.app, known "
        "from the project's number before any function is built"
    )
    return tuple(notes)


def function_secrets(settings: Settings, role: str) -> dict[str, str]:
    """Secret Manager references by variable: the shared log owner key (unless `[secrets]`
    names its own), then `[secrets]`, less what only a2a reads."""
    wanted = {LOG_OWNER_KEY: f"{settings.log_owner_secret}:latest", **settings.all_secrets}
    return {env: ref for env, ref in wanted.items() if role == "a2a" or env not in A2A_ONLY_SECRETS}


def _members(settings: Settings) -> dict[str, str]:
    return {
        "runtime": f"serviceAccount:{settings.runtime_email}",
        "deliver": f"serviceAccount:{settings.deliver_email}",
        "invoker": f"serviceAccount:{settings.invoker_email}",
        "build": f"serviceAccount:{settings.build_email}",
    }


def database_only(settings: Settings) -> Condition:
    """The condition that holds a project's Firestore grant to the kit's database."""
    database = settings.firestore_database
    return Condition(
        f"Firestore database {database} only",
        f'resource.name == "projects/{settings.project}/databases/{database}"',
    )


def grants(settings: Settings) -> list[Binding]:
    """Every role a deploy grants its accounts (or makes sure they lack), on what."""
    project, region = settings.project, settings.region
    member = _members(settings)
    runtime, deliverer, build = member["runtime"], member["deliver"], member["build"]
    work, push = settings.queues.work.name, settings.queues.push.name
    users = ((runtime, ("a2a", "worker")), (deliverer, ("deliver",)))
    whole = project_policy(project)
    return [
        *(
            Binding(project, whole, DATASTORE_USER, m, condition=database_only(settings))
            for m, _ in users
        ),
        # Earlier versions granted it on every database of the project: taken away.
        *(Binding(project, whole, DATASTORE_USER, m, present=False) for m, _ in users),
        # Each account enqueues on the queues its functions use, and nowhere else.
        *(
            Binding(project, queue_policy(queue, region), ENQUEUER, m)
            for m, queues in ((runtime, (work, push)), (deliverer, (push,)))
            for queue in queues
        ),
        # Earlier versions granted it project-wide: taken away.
        *(Binding(project, whole, ENQUEUER, m, present=False) for m, _ in users),
        # Switching tracing off (or to otlp) also takes the role away.
        *(
            Binding(
                project,
                whole,
                TRACE_AGENT,
                m,
                present=any(_traces_to_gcp(settings, role) for role in roles),
            )
            for m, roles in users
        ),
        # The functions create tasks whose OIDC token is minted for the invoker account.
        *(
            Binding(
                project, account_policy(settings.invoker_email), "roles/iam.serviceAccountUser", m
            )
            for m, _ in users
        ),
        *(
            Binding(project, secret_policy(_secret_name(ref)), SECRET_ACCESSOR, m)
            for m, (role, *_) in users
            for ref in sorted(set(function_secrets(settings, role).values()))
        ),
        # Before the first build: a new project's default build account may lack them.
        Binding(project, whole, LOG_WRITER, build),
        Binding(project, whole, OBJECT_ADMIN, build, condition=SOURCES),
        Binding(
            project, repository_policy(settings.artifact_repository, region), REGISTRY_WRITER, build
        ),
        # Earlier versions granted these two project-wide: taken away.
        *(
            Binding(project, whole, role, build, present=False)
            for role in (OBJECT_ADMIN, REGISTRY_WRITER)
        ),
    ]


def deploy_plan(settings: Settings, repo_root: Path, stage_root: Path) -> list[Step]:
    """Every step of a deploy, in an order where each finds what it needs already in place."""
    settings.check_access()
    _refuse_loopback_webhooks(settings)
    project = settings.project
    names = {role: getattr(settings.functions, role).name for role in DEPLOY_ORDER}
    steps: list[Step] = [
        Apis(project, APIS),
        Project(project, settings.region, names),
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
        ServiceAccount(project, settings.build_service_account, "Cloud Build of the functions"),
        Repository(project, settings.region, settings.artifact_repository),
        *_generated_secrets(settings),
        *(
            NamedSecret(project, _secret_name(ref), variable)
            for variable, ref in sorted(settings.secrets.items())
        ),
        *grants(settings),
    ]
    for role in DEPLOY_ORDER:
        function = getattr(settings.functions, role)
        staged = stage(
            repo_root,
            role,
            stage_root / role,
            settings.handler,
            settings.functions.extras,
            agent=settings.agent_folder,
        )
        public = role == "a2a" and settings.auth == "public"
        spec = FunctionSpec(
            role=role,
            settings=function,
            region=settings.region,
            source=str(staged.path),
            source_hash=staged.source_hash,
            service_account=settings.deliver_email if role == "deliver" else settings.runtime_email,
            build_service_account=f"projects/{project}/serviceAccounts/{settings.build_email}",
            docker_repository=settings.docker_repository,
            env=function_env(settings, role),
            wiring=WIRING[role],
            secrets=function_secrets(settings, role),
            public=public,
            notes=derivations(settings, role),
        )
        steps.append(Function(project, spec))
        steps += invokers(settings, role)
    # The sweep, once the worker is there to take it: signed as the account that alone may
    # call the worker (it has roles/run.invoker there), so it needs no grant of its own.
    steps.append(SchedulerJob(project, settings.region, settings.sweep, settings.invoker_email))
    return steps


def invokers(settings: Settings, role: str) -> list[Binding]:
    """Who may call the function `role` (once it exists): Cloud Tasks' account the two queue
    targets; a2a the public or the INVOKERS (and the project's owners)."""
    project = settings.project
    policy = service_policy(getattr(settings.functions, role).name, settings.region)
    if role != "a2a":
        return [Binding(project, policy, INVOKER, _members(settings)["invoker"])]
    public = settings.auth == "public"
    # Switching to "authenticated" must also take away an earlier public binding.
    bindings = [Binding(project, policy, INVOKER, PUBLIC, present=public)]
    if not public:
        bindings += [Binding(project, policy, INVOKER, member) for member in settings.invokers]
    return bindings


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


def _random_key() -> bytes:
    return secrets.token_hex(32).encode()


def _generated_secrets(settings: Settings) -> list[GeneratedSecret]:
    """The secrets the deploy makes once: the log owner key's, unless `[secrets]` names one
    of its own, and with SIGN_CARD=1 the card's signing key. Before the bindings on them and
    the functions that mount them."""
    made = []
    if LOG_OWNER_KEY not in settings.secrets:
        purpose = "a random key for A2A_LOG_OWNER_KEY, shared by the three functions"
        made.append(
            GeneratedSecret(settings.project, settings.log_owner_secret, purpose, _random_key)
        )
    if settings.sign_card:
        what = "a new EC P-256 private key"
        made.append(GeneratedSecret(settings.project, settings.card_signing_secret, what))
    return made


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
    # The repository and its images: the build account's grant there goes with it.
    repository = settings.artifact_repository
    steps.append(
        Removal(
            f"repository {repository} (the functions' images)",
            gcloud(
                project,
                "artifacts",
                "repositories",
                "describe",
                args=(repository,),
                flags=(f"--location={region}",),
                json=True,
            ),
            gcloud(
                project,
                "artifacts",
                "repositories",
                "delete",
                args=(repository,),
                flags=(f"--location={region}",),
            ),
        )
    )
    # The queues' own bindings went with them. The project's: the deploy's, and the trace and
    # project-wide roles too, whatever the settings are now: an earlier deploy may have
    # granted them.
    member = _members(settings)
    whole = project_policy(project)
    steps += [
        Binding(
            project,
            whole,
            DATASTORE_USER,
            member[who],
            present=False,
            condition=database_only(settings),
        )
        for who in ("runtime", "deliver")
    ]
    steps += [
        Binding(project, whole, role, member[who], present=False)
        for who in ("runtime", "deliver")
        for role in (DATASTORE_USER, ENQUEUER, TRACE_AGENT)
    ]
    steps += [
        Binding(project, whole, LOG_WRITER, member["build"], present=False),
        Binding(project, whole, OBJECT_ADMIN, member["build"], present=False, condition=SOURCES),
        *(
            Binding(project, whole, role, member["build"], present=False)
            for role in (OBJECT_ADMIN, REGISTRY_WRITER)
        ),
    ]
    steps += [
        Binding(
            project, secret_policy(_secret_name(ref)), SECRET_ACCESSOR, member[who], present=False
        )
        for who, role in (("runtime", "a2a"), ("deliver", "deliver"))
        for ref in sorted(set(function_secrets(settings, role).values()))
    ]
    # Made by the deploy, so removed with it: owner tags in the logs change after a redeploy,
    # and clients that know the card key's kid lose it.
    made = {
        settings.log_owner_secret: "the log owner key: owner tags change after a redeploy",
        settings.card_signing_secret: "the card's signing key",
    }
    steps += [
        Removal(
            f"secret {secret.name} ({made[secret.name]})",
            gcloud(project, "secrets", "describe", args=(secret.name,), json=True),
            gcloud(project, "secrets", "delete", args=(secret.name,)),
        )
        for secret in _generated_secrets(settings)
    ]
    accounts = (settings.runtime_email, settings.invoker_email, settings.deliver_email)
    for account in (*accounts, settings.build_email):
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
