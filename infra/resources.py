"""The steps for each kind of resource `make deploy` owns, from APIs to functions.

Each compares gcloud's description of the resource with the settings in the API's own units, so
that values the API writes back differently ("5s" against "5.000s") do not look like changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infra.settings import FunctionSettings, QueueSettings, SweepSettings, seconds
from infra.steps import Change, Command, Input, Outputs, PlanError, Skipped, Step, gcloud

# gcloud adds this variable to every gen2 function it deploys; it is not ours to compare.
_GCLOUD_ENV = frozenset({"LOG_EXECUTION_ID"})
SOURCE_LABEL = "a2a-source"
# IAM answers "does not exist" for a service account created seconds ago.
_NEW_ACCOUNT = r"does not exist|not found"


@dataclass
class Apis(Step):
    """The Google APIs the kit uses, enabled in one call."""

    project: str
    apis: tuple[str, ...]
    title: str = "APIs"

    def check(self) -> Command:
        return gcloud(self.project, "services", "list", flags=("--enabled",), json=True)

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        enabled = {service.get("config", {}).get("name") for service in found or []}
        missing = tuple(api for api in self.apis if api not in enabled)
        if not missing:
            return []
        command = gcloud(self.project, "services", "enable", args=missing)
        return [Change("enable", command, ", ".join(missing))]


# A Cloud Run service's deterministic URL has one DNS label: "<name>-<project number>".
_DNS_LABEL = 63


def run_url(name: str, project_number: str, region: str) -> str:
    """A function's deterministic URL, known before it exists: Cloud Run gives every service
    whose "<name>-<project number>" fits one DNS label `https://<that>.<region>.run.app`."""
    return f"https://{name}-{project_number}.{region}.run.app"


@dataclass
class Project(Step):
    """The project itself: its number, which makes each function's URL known before the first
    build, so each is built once, knowing the URLs it calls and its own (the audience of the
    tokens it checks)."""

    project: str
    region: str
    functions: dict[str, str]  # role -> function name
    title: str = "project number (the functions' URLs)"

    def check(self) -> Command:
        return gcloud(self.project, "projects", "describe", args=(self.project,), json=True)

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        if found is None and not outputs.dry_run:
            raise PlanError(f"project {self.project} was not found: check PROJECT")
        return []

    def learn(self, found: Any, outputs: Outputs) -> None:
        number = str(found.get("projectNumber", ""))
        if not number.isdigit():
            raise PlanError(f"gcloud describes {self.project} without a project number")
        for role, name in self.functions.items():
            if len(f"{name}-{number}") > _DNS_LABEL:
                raise PlanError(
                    f"function {name}: '{name}-{number}' is longer than {_DNS_LABEL} "
                    "characters, so Cloud Run gives it no URL known in advance; choose a "
                    f"shorter name (FUNCTIONS_{role.upper()}_NAME)"
                )
            outputs.urls[role] = run_url(name, number, self.region)


@dataclass
class Database(Step):
    """The Firestore database, in native mode; created once, never changed."""

    project: str
    database: str
    location: str

    @property
    def title(self) -> str:  # type: ignore[override]
        return f"Firestore database {self.database}"

    def check(self) -> Command:
        flags = (f"--database={self.database}",)
        return gcloud(self.project, "firestore", "databases", "describe", flags=flags, json=True)

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        if found is None:
            flags = (
                f"--database={self.database}",
                f"--location={self.location}",
                "--type=firestore-native",
            )
            command = gcloud(self.project, "firestore", "databases", "create", flags=flags)
            return [Change("create", command, f"native mode in {self.location}")]
        if found.get("type") != "FIRESTORE_NATIVE":
            raise PlanError(
                f"database {self.database} exists in {found.get('type')}, not native mode; "
                "choose another one: make deploy FIRESTORE_DATABASE=a2a"
            )
        return []


@dataclass
class Notice(Step):
    """A step that only reports why it has nothing to do."""

    title: str
    message: str

    def check(self) -> None:
        return None

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        raise Skipped(self.message)


@dataclass(frozen=True)
class CompositeIndex:
    """A composite index as `firestore.indexes.json` writes it, reduced to what identifies it."""

    collection_group: str
    query_scope: str
    fields: tuple[tuple[str, str, str], ...]  # (field path, "order" or "array-config", value)

    @classmethod
    def from_api(cls, index: dict[str, Any], collection_group: str) -> CompositeIndex:
        # Firestore appends __name__ to every composite index; the index file leaves it out.
        fields = [field for field in index.get("fields", []) if field["fieldPath"] != "__name__"]
        return cls(collection_group, index.get("queryScope", "COLLECTION"), _fields(fields))

    def create(self, project: str, database: str) -> Command:
        configs = tuple(
            f"--field-config=field-path={path},{kind}={value.lower()}"
            for path, kind, value in self.fields
        )
        scope = self.query_scope.lower().replace("_", "-")
        flags = (
            f"--database={database}",
            f"--collection-group={self.collection_group}",
            f"--query-scope={scope}",
            *configs,
        )
        return gcloud(project, "firestore", "indexes", "composite", "create", flags=flags)


def index_kind(field: dict[str, Any]) -> tuple[str, str]:
    """("order", "ASCENDING") or ("array-config", "CONTAINS"): how one field is indexed."""
    if "order" in field:
        return "order", str(field["order"]).upper()
    if "arrayConfig" in field:
        return "array-config", str(field["arrayConfig"]).upper()
    raise PlanError(f"index field {field}: only 'order' and 'arrayConfig' are supported")


def _fields(fields: list[dict[str, Any]]) -> tuple[tuple[str, str, str], ...]:
    return tuple((field["fieldPath"], *index_kind(field)) for field in fields)


def index_from_file(entry: dict[str, Any]) -> CompositeIndex:
    """One entry of the `indexes` list of a Firebase-style index file."""
    try:
        return CompositeIndex(
            entry["collectionGroup"],
            entry.get("queryScope", "COLLECTION"),
            _fields(entry["fields"]),
        )
    except (KeyError, TypeError) as error:
        raise PlanError(f"index {entry}: missing or malformed {error}") from error


@dataclass
class CompositeIndexes(Step):
    """The composite indexes of the index file; indexes made by others are left alone."""

    project: str
    database: str
    wanted: tuple[CompositeIndex, ...]
    title: str = "Firestore composite indexes"

    def check(self) -> Command:
        flags = (f"--database={self.database}",)
        return gcloud(
            self.project, "firestore", "indexes", "composite", "list", flags=flags, json=True
        )

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        existing = {
            CompositeIndex.from_api(
                index, index["name"].split("/collectionGroups/")[1].split("/")[0]
            )
            for index in found or []
        }
        return [
            Change("create", index.create(self.project, self.database), index.collection_group)
            for index in self.wanted
            if index not in existing
        ]


def _field_describe(project: str, database: str, group: str, field: str) -> Command:
    flags = (f"--database={database}", f"--collection-group={group}")
    return gcloud(
        project, "firestore", "indexes", "fields", "describe", args=(field,), flags=flags, json=True
    )


@dataclass
class FieldOverride(Step):
    """A single-field index exemption of the index file (`fieldOverrides`)."""

    project: str
    database: str
    group: str
    field: str
    indexes: tuple[tuple[str, str, str], ...]  # (query scope, "order" or "array-config", value)

    @property
    def title(self) -> str:  # type: ignore[override]
        return f"Firestore field {self.group}.{self.field} indexes"

    def check(self) -> Command:
        return _field_describe(self.project, self.database, self.group, self.field)

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        current = {
            (index.get("queryScope", "COLLECTION"), *index_kind(spec))
            for index in (found or {}).get("indexConfig", {}).get("indexes", [])
            for spec in index.get("fields", [])
        }
        config = (found or {}).get("indexConfig", {})
        # A field that still uses its ancestor's (default) indexes has no exemption yet.
        if (
            found is not None
            and not config.get("usesAncestorConfig")
            and current == set(self.indexes)
        ):
            return []
        flags: tuple[str, ...] = tuple(
            f"--index={kind}={value.lower()},query-scope={scope.lower().replace('_', '-')}"
            for scope, kind, value in self.indexes
        ) or ("--disable-indexes",)
        command = gcloud(
            self.project,
            "firestore",
            "indexes",
            "fields",
            "update",
            args=(self.field,),
            flags=(f"--database={self.database}", f"--collection-group={self.group}", *flags),
        )
        return [Change("update", command, "single-field indexes differ")]


@dataclass
class Ttl(Step):
    """The TTL policy that lets Firestore delete expired documents of one collection group."""

    project: str
    database: str
    group: str
    field: str

    @property
    def title(self) -> str:  # type: ignore[override]
        return f"TTL on {self.group}.{self.field}"

    def check(self) -> Command:
        return _field_describe(self.project, self.database, self.group, self.field)

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        state = (found or {}).get("ttlConfig", {}).get("state")
        if state in ("ACTIVE", "CREATING"):
            return []
        flags = (
            f"--database={self.database}",
            f"--collection-group={self.group}",
            "--enable-ttl",
            # Activation takes minutes and needs no waiting: documents expire once it is active.
            "--async",
        )
        command = gcloud(
            self.project, "firestore", "fields", "ttls", "update", args=(self.field,), flags=flags
        )
        return [Change("enable", command, f"state {state or 'none'}")]


def _seconds(value: Any) -> float:
    """A duration gcloud describes (absent: 0)."""
    return seconds(str(value)) if value else 0.0


@dataclass
class Queue(Step):
    """A Cloud Tasks queue and its retry policy and rate limits."""

    project: str
    region: str
    queue: QueueSettings

    @property
    def title(self) -> str:  # type: ignore[override]
        return f"queue {self.queue.name}"

    def check(self) -> Command:
        return gcloud(
            self.project,
            "tasks",
            "queues",
            "describe",
            args=(self.queue.name,),
            flags=(f"--location={self.region}",),
            json=True,
        )

    def _differences(self, found: dict[str, Any]) -> list[str]:
        retry = found.get("retryConfig", {})
        rates = found.get("rateLimits", {})
        q = self.queue
        pairs: list[tuple[str, Any, Any]] = [
            ("max-attempts", int(retry.get("maxAttempts", 0)), q.max_attempts),
            ("min-backoff", _seconds(retry.get("minBackoff")), _seconds(q.min_backoff)),
            ("max-backoff", _seconds(retry.get("maxBackoff")), _seconds(q.max_backoff)),
            ("max-doublings", int(retry.get("maxDoublings", 0)), q.max_doublings),
            (
                "max-retry-duration",
                _seconds(retry.get("maxRetryDuration")),
                _seconds(q.max_retry_duration),
            ),
            (
                "max-dispatches-per-second",
                float(rates.get("maxDispatchesPerSecond", 0)),
                q.max_dispatches_per_second,
            ),
            (
                "max-concurrent-dispatches",
                int(rates.get("maxConcurrentDispatches", 0)),
                q.max_concurrent_dispatches,
            ),
        ]
        return [f"{name} {have} -> {want}" for name, have, want in pairs if have != want]

    def _command(self, verb: str) -> Command:
        q = self.queue
        flags = (
            f"--location={self.region}",
            f"--max-attempts={q.max_attempts}",
            f"--min-backoff={q.min_backoff}",
            f"--max-backoff={q.max_backoff}",
            f"--max-doublings={q.max_doublings}",
            f"--max-retry-duration={q.max_retry_duration}",
            f"--max-dispatches-per-second={q.max_dispatches_per_second}",
            f"--max-concurrent-dispatches={q.max_concurrent_dispatches}",
        )
        return gcloud(self.project, "tasks", "queues", verb, args=(q.name,), flags=flags)

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        if found is None:
            return [Change("create", self._command("create"))]
        differences = self._differences(found)
        if not differences:
            return []
        return [Change("update", self._command("update"), ", ".join(differences))]


@dataclass
class SchedulerJob(Step):
    """The Cloud Scheduler job that POSTs to the worker's /sweep with an OIDC token of the
    Cloud Tasks invoker account, addressed to the worker's URL (the audience it checks)."""

    project: str
    region: str
    sweep: SweepSettings
    service_account: str

    @property
    def title(self) -> str:  # type: ignore[override]
        return f"scheduler job {self.sweep.name}"

    def check(self) -> Command:
        return gcloud(
            self.project,
            "scheduler",
            "jobs",
            "describe",
            args=(self.sweep.name,),
            flags=(f"--location={self.region}",),
            json=True,
        )

    def _wanted(self, outputs: Outputs) -> dict[str, str]:
        worker = outputs.url("worker")
        return {
            "schedule": self.sweep.schedule,
            "uri": f"{worker.rstrip('/')}/sweep",
            "http-method": "POST",
            "oidc-service-account-email": self.service_account,
            "oidc-token-audience": worker,
        }

    def _command(self, verb: str, wanted: dict[str, str]) -> Command:
        flags = (f"--location={self.region}", *(f"--{k}={v}" for k, v in wanted.items()))
        return gcloud(
            self.project, "scheduler", "jobs", verb, "http", args=(self.sweep.name,), flags=flags
        )

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        wanted = self._wanted(outputs)
        if found is None:
            return [Change("create", self._command("create", wanted))]
        target = found.get("httpTarget", {})
        token = target.get("oidcToken", {})
        have = {
            "schedule": found.get("schedule"),
            "uri": target.get("uri"),
            "http-method": target.get("httpMethod"),
            "oidc-service-account-email": token.get("serviceAccountEmail"),
            "oidc-token-audience": token.get("audience"),
        }
        differences = [f"{k} {have[k]} -> {v}" for k, v in wanted.items() if have[k] != v]
        if not differences:
            return []
        return [Change("update", self._command("update", wanted), ", ".join(differences))]


@dataclass
class ServiceAccount(Step):
    """A service account of the kit, created if missing."""

    project: str
    name: str
    purpose: str

    @property
    def title(self) -> str:  # type: ignore[override]
        return f"service account {self.name}"

    def check(self) -> Command:
        email = f"{self.name}@{self.project}.iam.gserviceaccount.com"
        return gcloud(self.project, "iam", "service-accounts", "describe", args=(email,), json=True)

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        if found is not None:
            return []
        flags = (f"--display-name=a2a-functions {self.purpose}",)
        command = gcloud(
            self.project, "iam", "service-accounts", "create", args=(self.name,), flags=flags
        )
        return [Change("create", command, self.purpose)]


@dataclass(frozen=True)
class PolicyTarget:
    """A resource with an IAM policy, and how gcloud reads and edits it."""

    label: str
    group: tuple[str, ...]
    resource: str
    flags: tuple[str, ...] = ()
    # Project bindings need an explicit "no condition", or gcloud asks for one.
    binding_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Condition:
    """An IAM condition on a binding: the grant holds only for the resources `expression`
    (CEL) matches. `title` names it in the policy (no commas: gcloud's list separator)."""

    title: str
    expression: str

    @property
    def flag(self) -> str:
        return f"--condition=expression={self.expression},title={self.title}"


def project_policy(project: str) -> PolicyTarget:
    return PolicyTarget(f"project {project}", ("projects",), project, (), ("--condition=None",))


def account_policy(email: str) -> PolicyTarget:
    return PolicyTarget(
        f"service account {email.split('@', maxsplit=1)[0]}", ("iam", "service-accounts"), email
    )


def service_policy(name: str, region: str) -> PolicyTarget:
    # A gen2 function's invoker is a Cloud Run invoker on the service of the same name.
    return PolicyTarget(f"function {name}", ("run", "services"), name, (f"--region={region}",))


def secret_policy(secret: str) -> PolicyTarget:
    return PolicyTarget(f"secret {secret}", ("secrets",), secret)


def new_signing_key() -> bytes:
    """A new EC P-256 private key (ES256), PKCS#8 PEM: made in memory, handed to gcloud on its
    standard input, never written to disk."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass
class GeneratedSecret(Step):
    """A Secret Manager secret whose first version the deploy makes (a new signing key, a
    random key), once: an existing secret is never read, printed or changed, so its value
    (a signing key's `kid` that clients know, the owner tags in the logs) stays."""

    project: str
    name: str
    what: str  # what the value is, as a printed plan names it
    make: Callable[[], bytes] = field(default=new_signing_key, repr=False)

    @property
    def title(self) -> str:  # type: ignore[override]
        return f"secret {self.name}"

    def check(self) -> Command:
        return gcloud(self.project, "secrets", "describe", args=(self.name,), json=True)

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        if found is not None:
            return []
        command = gcloud(
            self.project,
            "secrets",
            "create",
            args=(self.name,),
            flags=("--data-file=-", "--replication-policy=automatic"),
            stdin=Input(self.what, self.make),
        )
        return [Change("create", command, self.what)]


@dataclass
class NamedSecret(Step):
    """A secret that `[secrets]` names and the user makes: the deploy only checks that it is
    there, before granting on it (IAM would answer "not found" to each retry of the grant)."""

    project: str
    name: str
    variable: str

    @property
    def title(self) -> str:  # type: ignore[override]
        return f"secret {self.name} ({self.variable})"

    def check(self) -> Command:
        return gcloud(self.project, "secrets", "describe", args=(self.name,), json=True)

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        if found is None and not outputs.dry_run:
            raise PlanError(
                f"[secrets] {self.variable} names secret {self.name}, which does not exist in "
                f"{self.project}: make it with `printf %s VALUE | gcloud secrets create "
                f"{self.name} --data-file=- --project={self.project}`, or take "
                f"{self.variable} out of [secrets]"
            )
        return []


def repository_policy(repository: str, region: str) -> PolicyTarget:
    return PolicyTarget(
        f"repository {repository}",
        ("artifacts", "repositories"),
        repository,
        (f"--location={region}",),
    )


def queue_policy(queue: str, region: str) -> PolicyTarget:
    return PolicyTarget(f"queue {queue}", ("tasks", "queues"), queue, (f"--location={region}",))


@dataclass
class Binding(Step):
    """One role for one member on one resource, held under `condition` if there is one;
    `present=False` makes sure it is absent."""

    project: str
    target: PolicyTarget
    role: str
    member: str
    present: bool = True
    condition: Condition | None = None

    def existing(self) -> Any:
        bound: dict[str, Any] = {"role": self.role, "members": [self.member]}
        if self.condition is not None:
            bound["condition"] = {
                "title": self.condition.title,
                "expression": self.condition.expression,
            }
        return {"bindings": [bound]}

    @property
    def title(self) -> str:  # type: ignore[override]
        relation = "has" if self.present else "lacks"
        only = f" ({self.condition.title})" if self.condition else ""
        return f"{self.member} {relation} {self.role} on {self.target.label}{only}"

    def check(self) -> Command:
        return gcloud(
            self.project,
            *self.target.group,
            "get-iam-policy",
            args=(self.target.resource,),
            flags=self.target.flags,
            json=True,
        )

    def _matches(self, binding: dict[str, Any]) -> bool:
        if binding.get("role") != self.role or self.member not in binding.get("members", []):
            return False
        if self.condition is None:
            return "condition" not in binding
        return bool(binding.get("condition", {}).get("expression") == self.condition.expression)

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        bound = any(self._matches(binding) for binding in (found or {}).get("bindings", []))
        if bound == self.present:
            return []
        verb = "add" if self.present else "remove"
        condition = (self.condition.flag,) if self.condition else self.target.binding_flags
        command = gcloud(
            self.project,
            *self.target.group,
            f"{verb}-iam-policy-binding",
            args=(self.target.resource,),
            flags=(
                *self.target.flags,
                f"--member={self.member}",
                f"--role={self.role}",
                *condition,
            ),
        )
        return [Change("grant" if self.present else "revoke", command, retry_if=_NEW_ACCOUNT)]


@dataclass
class Repository(Step):
    """The Artifact Registry repository the functions' images are pushed to: the kit's own,
    so the build account may write there and nowhere else."""

    project: str
    region: str
    name: str

    @property
    def title(self) -> str:  # type: ignore[override]
        return f"repository {self.name}"

    def check(self) -> Command:
        return gcloud(
            self.project,
            "artifacts",
            "repositories",
            "describe",
            args=(self.name,),
            flags=(f"--location={self.region}",),
            json=True,
        )

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        if found is not None:
            return []
        flags = (
            f"--location={self.region}",
            "--repository-format=docker",
            "--description=a2a-functions: the functions' images",
        )
        command = gcloud(
            self.project, "artifacts", "repositories", "create", args=(self.name,), flags=flags
        )
        return [Change("create", command, "the functions' images, built by the build account")]


@dataclass(frozen=True)
class FunctionSpec:
    """Everything a function is deployed with, except the URLs it learns from other functions."""

    role: str
    settings: FunctionSettings
    region: str
    source: str
    source_hash: str
    service_account: str
    # The account Cloud Build builds it as: projects/<project>/serviceAccounts/<e-mail>.
    build_service_account: str
    # Where its image goes: projects/<project>/locations/<region>/repositories/<name>.
    docker_repository: str
    env: dict[str, str]
    # Environment variable -> role whose URL it carries (the wiring between the functions).
    wiring: dict[str, str]
    secrets: dict[str, str]
    public: bool
    # Why each derived value of `env` is what it is: a line each, printed with the deploy.
    notes: tuple[str, ...] = ()


def _env_flag(name: str, values: dict[str, str]) -> str:
    pairs = [f"{key}={value}" for key, value in sorted(values.items())]
    if any("," in pair for pair in pairs):
        # gcloud's escape for lists whose items contain commas: a custom delimiter.
        return f"{name}=^|^" + "|".join(pairs)
    return f"{name}=" + ",".join(pairs)


@dataclass
class Function(Step):
    """A gen2 function on python311, deployed from its staging folder: built once, knowing
    every URL it is wired with (infra.resources.Project learnt them before)."""

    project: str
    spec: FunctionSpec

    @property
    def title(self) -> str:  # type: ignore[override]
        return f"function {self.spec.settings.name}"

    def check(self) -> Command:
        return gcloud(
            self.project,
            "functions",
            "describe",
            args=(self.spec.settings.name,),
            flags=(f"--region={self.spec.region}", "--v2"),
            json=True,
        )

    def env(self, outputs: Outputs) -> dict[str, str]:
        # Its own URL not over a value of the settings' [env] (a custom domain in front of it).
        wired = {
            name: outputs.url(role)
            for name, role in self.spec.wiring.items()
            if role != self.spec.role or name not in self.spec.env
        }
        return {**self.spec.env, **wired}

    def _differences(self, found: dict[str, Any], env: dict[str, str]) -> list[str]:
        spec, fs = self.spec, self.spec.settings
        build = found.get("buildConfig", {})
        service = found.get("serviceConfig", {})
        have_env = {
            key: value
            for key, value in service.get("environmentVariables", {}).items()
            if key not in _GCLOUD_ENV
        }
        have_secrets = {
            item["key"]: f"{item['secret']}:{item['version']}"
            for item in service.get("secretEnvironmentVariables", [])
        }
        pairs: list[tuple[str, Any, Any]] = [
            ("state", found.get("state"), "ACTIVE"),
            ("runtime", build.get("runtime"), "python311"),
            ("entry point", build.get("entryPoint"), spec.role),
            ("memory", service.get("availableMemory"), fs.memory),
            ("cpu", service.get("availableCpu"), fs.cpu),
            ("timeout", service.get("timeoutSeconds"), fs.timeout),
            ("concurrency", service.get("maxInstanceRequestConcurrency"), fs.concurrency),
            ("min instances", service.get("minInstanceCount", 0), fs.min_instances),
            ("max instances", service.get("maxInstanceCount"), fs.max_instances),
            ("service account", service.get("serviceAccountEmail"), spec.service_account),
            ("build account", build.get("serviceAccount"), spec.build_service_account),
            ("image repository", build.get("dockerRepository"), spec.docker_repository),
            ("source", found.get("labels", {}).get(SOURCE_LABEL), spec.source_hash),
        ]
        differences = [f"{name} {have} -> {want}" for name, have, want in pairs if have != want]
        if have_env != env:
            keys = sorted(
                key for key in have_env.keys() | env.keys() if have_env.get(key) != env.get(key)
            )
            differences.append("environment " + ", ".join(keys))
        if have_secrets != spec.secrets:
            differences.append("secrets")
        return differences

    def _deploy(self, env: dict[str, str]) -> Command:
        spec, fs = self.spec, self.spec.settings
        flags = [
            "--gen2",
            f"--region={spec.region}",
            "--runtime=python311",
            f"--source={spec.source}",
            f"--entry-point={spec.role}",
            "--trigger-http",
            "--allow-unauthenticated" if spec.public else "--no-allow-unauthenticated",
            f"--service-account={spec.service_account}",
            f"--build-service-account={spec.build_service_account}",
            f"--docker-repository={spec.docker_repository}",
            f"--memory={fs.memory}",
            f"--cpu={fs.cpu}",
            f"--timeout={fs.timeout}s",
            f"--concurrency={fs.concurrency}",
            f"--min-instances={fs.min_instances}",
            f"--max-instances={fs.max_instances}",
            _env_flag("--set-env-vars", env),
            f"--update-labels={SOURCE_LABEL}={spec.source_hash}",
        ]
        flags.append(
            _env_flag("--set-secrets", spec.secrets) if spec.secrets else "--clear-secrets"
        )
        return gcloud(self.project, "functions", "deploy", args=(fs.name,), flags=tuple(flags))

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        env = self.env(outputs)
        notes = self.spec.notes
        if found is None:
            why = "builds and deploys, takes minutes"
            return [Change("create", self._deploy(env), why, notes=notes)]
        differences = self._differences(found, env)
        if not differences:
            return []
        return [Change("update", self._deploy(env), ", ".join(differences), notes=notes)]


@dataclass
class Removal(Step):
    """`make destroy`: delete a resource if it exists."""

    title: str
    describe: Command
    delete: Command

    def check(self) -> Command:
        return self.describe

    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        return [] if found is None else [Change("delete", self.delete)]
