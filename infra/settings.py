"""Deploy settings: `infra/deploy.toml`, overridden by environment (make) variables, validated.

A variable is named after the setting's path, upper-cased and joined by "_" (`functions.a2a.memory`
is FUNCTIONS_A2A_MEMORY), so `make deploy FUNCTIONS_A2A_MEMORY=1Gi` needs no code to exist.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

DEFAULT_FILE = Path(__file__).with_name("deploy.toml")

_SECONDS = re.compile(r"^\d+(\.\d+)?s$")
_SECRET_REF = re.compile(r"^[A-Za-z0-9_-]+:(latest|\d+)$")
_EXTRA = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")  # a PEP 685 extra name


class SettingsError(Exception):
    """The settings file or an override is invalid; the message names the variable."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FunctionSettings(_Strict):
    """One Cloud Function (gen2): its name and the resources of its Cloud Run service."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,62}$")
    memory: str = Field(pattern=r"^\d+(Mi|Gi)$")
    cpu: str = Field(pattern=r"^\d+(\.\d+)?$")
    timeout: int = Field(ge=1, le=3600)
    concurrency: int = Field(ge=1, le=1000)
    # The function's pool of threads (THREADS); unset: its concurrency, a thread for each
    # request it takes at once (a worker's turn holds one for its length).
    threads: int | None = Field(default=None, ge=1, le=1000)
    min_instances: int = Field(ge=0)
    max_instances: int = Field(ge=1)

    @property
    def pool_threads(self) -> int:
        """THREADS as deployed: `threads`, else `concurrency`."""
        return self.threads or self.concurrency


class QueueSettings(_Strict):
    """One Cloud Tasks queue and its retry policy, in the units of `gcloud tasks queues`."""

    name: str = Field(pattern=r"^[A-Za-z0-9-]{1,100}$")
    max_attempts: int = Field(ge=-1)
    min_backoff: str
    max_backoff: str
    max_doublings: int = Field(ge=0)
    max_retry_duration: str
    max_dispatches_per_second: float = Field(gt=0)
    max_concurrent_dispatches: int = Field(ge=1)

    @field_validator("min_backoff", "max_backoff", "max_retry_duration")
    @classmethod
    def _seconds(cls, value: str) -> str:
        if not _SECONDS.match(value):
            raise ValueError(f"expected seconds such as '10s' or '0.5s', got {value!r}")
        return value

    def retry_span(self) -> float:
        """Seconds from a task's first attempt to its last, by Cloud Tasks' rule (below)."""
        return self._schedule()[1]

    def attempts(self) -> int:
        """How many attempts a task gets, by Cloud Tasks' rule: more than max_attempts when
        max_retry_duration has not passed by then (the function acting on the last attempt
        must know which one it is)."""
        return self._schedule()[0]

    def _schedule(self) -> tuple[int, float]:
        """(attempts, seconds from the first to the last) by Cloud Tasks' rule: each retry
        waits min_backoff doubled up to max_doublings times, then growing by that last
        doubled step, at most max_backoff; retries stop once the task has had max_attempts
        attempts *and* max_retry_duration has passed (-1 and 0s: no limit). Raises
        SettingsError for a queue that never stops retrying."""
        low, high = seconds(self.min_backoff), seconds(self.max_backoff)
        duration = seconds(self.max_retry_duration)
        if self.max_attempts == -1 and duration <= 0:
            raise SettingsError(
                f"queues {self.name!r} retries forever (max_attempts = -1 and "
                "max_retry_duration = '0s'): a task it holds would never be given up, nor "
                "recovered; set max_attempts or max_retry_duration in infra/deploy.toml"
            )
        span, attempts = 0.0, 1
        while not (
            (self.max_attempts == -1 or attempts >= self.max_attempts)
            and (duration <= 0 or span >= duration)
        ):
            n = attempts - 1
            step = low * 2 ** min(n, self.max_doublings)
            if n > self.max_doublings:
                step += (n - self.max_doublings) * low * 2**self.max_doublings
            if min(step, high) <= 0:
                # No backoff: attempts follow each other until then, how many is unknown; the
                # last one the function can count on is max_attempts' (it then fails early).
                return max(self.max_attempts, attempts), max(span, duration)
            if step >= high:  # every retry from here waits max_backoff
                left = max(self.max_attempts - attempts, math.ceil((duration - span) / high), 0)
                return attempts + left, span + left * high
            span += step
            attempts += 1
        return attempts, span


class FunctionSet(_Strict):
    """The three functions, by role: the public endpoint and the two Cloud Tasks targets."""

    a2a: FunctionSettings
    worker: FunctionSettings
    deliver: FunctionSettings
    # Optional extras of pyproject.toml deployed with the functions (their requirements
    # pinned into requirements.txt, infra.stage): "otel" for A2A_TRACING, "adk" for ADK agents.
    extras: tuple[str, ...] = ()

    @field_validator("extras")
    @classmethod
    def _extra_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _EXTRA.match(name):
                raise ValueError(f"{name!r}: an extra's name, such as otel")
        return value


class QueueSet(_Strict):
    """The two queues: background runs for `worker`, push deliveries for `deliver`."""

    work: QueueSettings
    push: QueueSettings


class SweepSettings(_Strict):
    """The Cloud Scheduler job that calls the worker's `POST /sweep` (shared.sweep)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,500}$")
    schedule: str = Field(min_length=9)  # unix-cron, in UTC


class Settings(_Strict):
    """Everything `make deploy` needs to know about the target project."""

    # Empty is allowed so that `stage` works without a project; deploy and destroy require one.
    project: str = Field(pattern=r"^([a-z][a-z0-9-]{4,28}[a-z0-9])?$")
    region: str = Field(min_length=1)
    handler: str = Field(pattern=r"^[A-Za-z_][\w.]*$")
    # An agent kept in a folder of its own (docs/agents.md): its package ships with the
    # functions, its requirements with theirs; HANDLER defaults to the package.
    agent: str = ""
    auth: Literal["public", "authenticated"]
    identity: Literal["none", "api-key", "google", "oidc"]
    open_to_everyone: bool = False
    # IAM members granted roles/run.invoker on a2a when it is authenticated ("user:...",
    # "serviceAccount:...", "group:...", "domain:..."); the project's owners may always call.
    invokers: tuple[str, ...] = ()
    retention_days: int = Field(ge=1, le=3650)  # as A2A_RETENTION_DAYS (shared.settings)
    runtime_service_account: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
    deliver_service_account: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
    invoker_service_account: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
    # Cloud Build builds the functions as this account, granted its roles before the first
    # build (a new project's default build account may lack them).
    build_service_account: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
    # The Artifact Registry repository (docker, in the region) the functions' images go to:
    # the deploy makes it, and the build account may write there only.
    artifact_repository: str = Field(
        default="a2a-functions", pattern=r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$"
    )
    # The Secret Manager secret holding A2A_LOG_OWNER_KEY for all three functions (one owner,
    # one log tag everywhere): generated once by the first deploy, unless [secrets] sets it.
    log_owner_secret: str = Field(pattern=r"^[A-Za-z0-9_-]{1,255}$")
    firestore_database: str
    firestore_location: str
    firestore_indexes: str
    ttl_collection_groups: tuple[str, ...]
    ttl_field: str
    functions: FunctionSet
    queues: QueueSet
    sweep: SweepSettings
    # Sign the agent card (A2A_CARD_SIGNING_KEY, shared.card_signing): the deploy makes an EC
    # P-256 key into this Secret Manager secret once, if it is missing, and mounts it on a2a.
    sign_card: bool = False
    card_signing_secret: str = Field(
        default="a2a-card-signing-key", pattern=r"^[A-Za-z0-9_-]{1,255}$"
    )
    secrets: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("invokers")
    @classmethod
    def _members(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for member in value:
            kind, _, name = member.partition(":")
            if kind not in ("user", "serviceAccount", "group", "domain") or not name:
                raise ValueError(f"{member!r}: expected user:, serviceAccount:, group: or domain:")
        return value

    @field_validator("secrets")
    @classmethod
    def _secret_refs(cls, value: dict[str, str]) -> dict[str, str]:
        for env, ref in value.items():
            if not _SECRET_REF.match(ref):
                raise ValueError(f"{env} = {ref!r}: expected 'secret-name:version'")
        return value

    @property
    def all_secrets(self) -> dict[str, str]:
        """[secrets], with the card's signing key when SIGN_CARD makes it."""
        if not self.sign_card:
            return self.secrets
        return {**self.secrets, "A2A_CARD_SIGNING_KEY": f"{self.card_signing_secret}:latest"}

    @property
    def agent_folder(self) -> Path | None:
        """The agent folder, `~` expanded, absolute; None when the handler is the kit's."""
        return Path(self.agent).expanduser().absolute() if self.agent else None

    @property
    def docker_repository(self) -> str:
        """The repository as `gcloud functions deploy --docker-repository` names it."""
        return (
            f"projects/{self.project}/locations/{self.region}/repositories/"
            f"{self.artifact_repository}"
        )

    @property
    def location(self) -> str:
        """Where the Firestore database lives."""
        return self.firestore_location or self.region

    def email(self, account: str) -> str:
        """The e-mail of one of the kit's service accounts in the target project."""
        return f"{account}@{self.project}.iam.gserviceaccount.com"

    @property
    def runtime_email(self) -> str:
        return self.email(self.runtime_service_account)

    @property
    def invoker_email(self) -> str:
        return self.email(self.invoker_service_account)

    def function_url(self, role: str) -> str:
        """A gen2 function's cloudfunctions.net URL, known before it exists (its run.app URL
        is learnt once it is deployed)."""
        name = getattr(self.functions, role).name
        return f"https://{self.region}-{self.project}.cloudfunctions.net/{name}"

    @property
    def deliver_email(self) -> str:
        return self.email(self.deliver_service_account)

    @property
    def build_email(self) -> str:
        return self.email(self.build_service_account)

    def check_access(self) -> None:
        """Who may call the agent, checked before anything is deployed: never open to the
        internet by default, and each identity mode with what it needs."""
        if self.auth == "public" and self.identity == "none" and not self.open_to_everyone:
            raise SettingsError(
                "AUTH=public with IDENTITY=none lets anyone who finds the URL read, list and "
                "cancel every task: use IDENTITY=api-key or IDENTITY=oidc for a public agent, "
                "AUTH=authenticated (IAM) with IDENTITY=google, or, if the agent really is for "
                "everyone, say so with OPEN_TO_EVERYONE=1"
            )
        if self.auth == "public" and self.identity == "google":
            raise SettingsError(
                "IDENTITY=google checks the Google ID tokens IAM lets through: deploy it with "
                "AUTH=authenticated (and grant roles/run.invoker to your callers); a public "
                "agent uses IDENTITY=api-key or IDENTITY=oidc"
            )
        configured = self.env.keys() | self.secrets.keys()
        if self.sign_card and "A2A_CARD_SIGNING_KEY" in configured:
            raise SettingsError(
                "SIGN_CARD=1 makes and mounts the card's signing key itself, and "
                "infra/deploy.toml sets A2A_CARD_SIGNING_KEY too: keep one (your own key in "
                "[secrets], or SIGN_CARD=1)"
            )
        needs = {
            "api-key": ("A2A_API_KEYS",),
            "oidc": ("A2A_OIDC_ISSUER", "A2A_OIDC_AUDIENCE"),
        }.get(self.identity, ())
        missing = [name for name in needs if name not in configured]
        if missing:
            raise SettingsError(
                f"IDENTITY={self.identity} needs {' and '.join(missing)} in infra/deploy.toml "
                "([secrets] for A2A_API_KEYS, whose value is key hashes from `python -m "
                "shared.identity new-key OWNER`; [env] for the others)"
            )


def seconds(value: str) -> float:
    """A duration of the settings file in seconds: '300s' -> 300.0."""
    return float(value.removesuffix("s"))


def variable_name(path: tuple[str, ...]) -> str:
    """The environment variable that overrides the setting at `path`."""
    return "_".join(path).upper()


def load(path: Path = DEFAULT_FILE, environ: Mapping[str, str] | None = None) -> Settings:
    """Read `path`, apply overrides from `environ` (empty values count as unset), validate."""
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise SettingsError(f"cannot read {path}: {error}") from error
    overridden = _apply_overrides(raw, environ or {}, ())
    agent = str(overridden.get("agent") or "").rstrip("/")
    if agent and not (environ or {}).get("HANDLER"):
        # The folder's package is the handler unless HANDLER names a module in it.
        overridden["handler"] = Path(agent).name
    try:
        settings = Settings.model_validate(overridden)
    except ValidationError as error:
        raise SettingsError(_explain(error)) from error
    return settings


def _apply_overrides(
    table: dict[str, Any], environ: Mapping[str, str], prefix: tuple[str, ...]
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in table.items():
        path = (*prefix, key)
        # `secrets` and `env` map variable names to values: their keys are data, not settings.
        if isinstance(value, dict) and path not in (("secrets",), ("env",)):
            result[key] = _apply_overrides(value, environ, path)
            continue
        override = environ.get(variable_name(path), "")
        if not override or isinstance(value, dict):
            result[key] = value
        elif isinstance(value, list):
            result[key] = [item.strip() for item in override.split(",") if item.strip()]
        else:
            # pydantic converts the string to the field's type and reports it by variable name.
            result[key] = override
    return result


def _explain(error: ValidationError) -> str:
    lines = ["invalid deploy settings:"]
    for problem in error.errors():
        path = tuple(str(part) for part in problem["loc"])
        lines.append(f"  {variable_name(path)} ({'.'.join(path)}): {problem['msg']}")
    return "\n".join(lines)
