"""Deployment settings, read once from environment variables and validated.

Every setting is an `A2A_*` variable (Google's own variables keep their names). A bad value
stops start-up with a message naming the variable and what it accepts, and so does an `A2A_*`
variable that is no setting (a typo would otherwise be silently ignored).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared.limits import Limits

# Field name -> environment variable.
ENVIRONMENT = {
    "handler": "A2A_HANDLER",
    "backend": "A2A_BACKEND",
    "public_url": "A2A_PUBLIC_URL",
    "agent_name": "A2A_AGENT_NAME",
    "agent_description": "A2A_AGENT_DESCRIPTION",
    "agent_version": "A2A_AGENT_VERSION",
    "provider_organization": "A2A_PROVIDER_ORGANIZATION",
    "provider_url": "A2A_PROVIDER_URL",
    "documentation_url": "A2A_DOCUMENTATION_URL",
    "auth": "A2A_AUTH",
    "api_keys": "A2A_API_KEYS",
    "api_key_header": "A2A_API_KEY_HEADER",
    "audience": "A2A_AUDIENCE",
    "oidc_issuer": "A2A_OIDC_ISSUER",
    "oidc_audience": "A2A_OIDC_AUDIENCE",
    "oidc_owner_claim": "A2A_OIDC_OWNER_CLAIM",
    "oidc_required_scopes": "A2A_OIDC_REQUIRED_SCOPES",
    "max_body_bytes": "A2A_MAX_BODY_BYTES",
    "max_batch": "A2A_MAX_BATCH",
    "max_parts": "A2A_MAX_PARTS",
    "max_metadata_bytes": "A2A_MAX_METADATA_BYTES",
    "max_message_bytes": "A2A_MAX_MESSAGE_BYTES",
    "max_artifact_bytes": "A2A_MAX_ARTIFACT_BYTES",
    "max_history_messages": "A2A_MAX_HISTORY_MESSAGES",
    "max_history_bytes": "A2A_MAX_HISTORY_BYTES",
    "commit_interval": "A2A_COMMIT_INTERVAL_SECONDS",
    "card_max_age": "A2A_CARD_MAX_AGE_SECONDS",
    "card_style": "A2A_CARD_STYLE",
    "deduplicate_messages": "A2A_DEDUPLICATE_MESSAGES",
    "push_notifications": "A2A_PUSH_NOTIFICATIONS",
    "streaming": "A2A_STREAMING",
    "push_allowed_hosts": "A2A_PUSH_ALLOWED_HOSTS",
    "push_allowed_ports": "A2A_PUSH_ALLOWED_PORTS",
    "push_signing_key": "A2A_PUSH_SIGNING_KEY",
    "project": "GOOGLE_CLOUD_PROJECT",
    "firestore_database": "A2A_FIRESTORE_DATABASE",
    "retention_days": "A2A_RETENTION_DAYS",
    "memory_max_bytes": "A2A_MEMORY_MAX_BYTES",
    "region": "A2A_REGION",
    "work_queue": "A2A_WORK_QUEUE",
    "work_max_attempts": "A2A_WORK_MAX_ATTEMPTS",
    "work_retry_seconds": "A2A_WORK_RETRY_SECONDS",
    "worker_url": "A2A_WORKER_URL",
    "tasks_service_account": "A2A_TASKS_SERVICE_ACCOUNT",
    "function_timeout": "A2A_FUNCTION_TIMEOUT",
    "blocking_budget": "A2A_BLOCKING_BUDGET_SECONDS",
    "lease_seconds": "A2A_LEASE_SECONDS",
    "tasks_emulator_host": "CLOUD_TASKS_EMULATOR_HOST",
    "tasks_emulator_secret": "CLOUD_TASKS_EMULATOR_SECRET",
    "stream_seconds": "A2A_STREAM_SECONDS",
    "stream_keepalive": "A2A_STREAM_KEEPALIVE_SECONDS",
    "stream_idle": "A2A_STREAM_IDLE_SECONDS",
    "max_streams": "A2A_MAX_STREAMS",
    "max_owner_streams": "A2A_MAX_STREAMS_PER_OWNER",
    "stream_tail": "A2A_STREAM_TAIL",
    "stream_commit_interval": "A2A_STREAM_COMMIT_INTERVAL_SECONDS",
    "threads": "THREADS",
    "deliver_url": "A2A_DELIVER_URL",
    "push_queue": "A2A_PUSH_QUEUE",
    "push_max_attempts": "A2A_PUSH_MAX_ATTEMPTS",
    "max_push_configs_per_task": "A2A_MAX_PUSH_CONFIGS_PER_TASK",
    "console": "A2A_CONSOLE",
    "log_format": "A2A_LOG_FORMAT",
    "log_owner_key": "A2A_LOG_OWNER_KEY",
    "tracing": "A2A_TRACING",
}


# The largest message or artifact update a Firestore event document takes, with its envelope
# (shared.store.firestore refuses larger parts and events).
MAX_FIRESTORE_EVENT = 900_000

# What the embedded store may hold (A2A_MEMORY_MAX_BYTES): its tasks and events serialized,
# and a fixed allowance per task for its keys. 32 MiB fits a 256 MiB function with room for
# requests, about 10,000 short tasks.
MEMORY_MAX_BYTES = 32 * 1024 * 1024


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the variable."""


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    handler: str = "functions.handlers.sample"
    backend: Literal["memory", "firestore"] = "memory"
    public_url: str | None = None
    agent_name: str | None = None
    agent_description: str | None = None
    agent_version: str | None = None
    provider_organization: str | None = None
    provider_url: str | None = None
    documentation_url: str | None = None
    # Who may call (shared.identity): none (local development: one owner for all), api-key,
    # google (Google-signed ID tokens) or oidc (any OpenID Connect issuer).
    auth: Literal["none", "api-key", "google", "oidc"] = "none"
    # sha256:<hex> -> owner, from `owner:sha256:<hex>,...`; hashes only, and kept out of repr.
    api_keys: dict[str, str] = Field(default_factory=dict, repr=False)
    api_key_header: str = Field(default="X-API-Key", pattern=r"^[A-Za-z0-9-]{1,64}$")
    # What Google ID tokens may be addressed to (google mode), besides A2A_PUBLIC_URL.
    audience: tuple[str, ...] = ()
    oidc_issuer: str | None = None
    oidc_audience: str | None = None
    oidc_owner_claim: str = Field(default="sub", min_length=1)
    oidc_required_scopes: tuple[str, ...] = ()
    max_body_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    # What one request may carry (shared.limits; README, Limits). The defaults fit a 512 MiB
    # function serving several requests at once: a request grows it by ~4x its body plus a few MiB.
    max_batch: int = Field(default=20, ge=1)  # JSON-RPC requests in one batch
    max_parts: int = Field(default=100, ge=1)  # parts in one message or artifact
    max_metadata_bytes: int = Field(default=64 * 1024, ge=2)  # JSON of one metadata object
    # JSON of one message, or of one artifact update (a chunk): at most MAX_FIRESTORE_EVENT on
    # the Firestore backend, whose event documents hold 1 MiB.
    max_message_bytes: int = Field(default=900_000, ge=1024)
    max_artifact_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)  # JSON of one artifact
    # A task's history: a send that would take it past either limit is refused (the task
    # stays as it was); the client starts a new task in the same context.
    max_history_messages: int = Field(default=500, ge=2)
    max_history_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    commit_interval: float = Field(default=0.25, gt=0)
    card_max_age: int = Field(default=300, ge=0)
    # hybrid: v1.0 and v0.3 fields side by side (every client finds its own); v1: the strict
    # v1.0 card, for validators with a closed schema (the A2A TCK).
    card_style: Literal["hybrid", "v1"] = "hybrid"
    # A resent message (same messageId and content) gets the first send's task; the same
    # messageId with other content, or after the client moved on, is a new message.
    deduplicate_messages: bool = True
    push_notifications: bool = True
    # Streamed sends and subscriptions (SSE); off, they are refused (UnsupportedOperationError)
    # and the card says so: an open stream holds a function instance for its whole duration.
    streaming: bool = True
    # With A2A_DELIVER_URL set, notifications go to that `deliver` function through the Cloud
    # Tasks queue `push`; without it, to a thread pool in this process.
    deliver_url: str | None = None
    push_queue: str = "push"
    # The push queue's attempts, by max_attempts and max_retry_duration both (`make deploy`
    # sets it: infra.settings.QueueSettings.attempts); the default is the deploy.toml queue's.
    push_max_attempts: int = Field(default=34, ge=1)
    # Push configs one task may have: each event of the task is one POST per config.
    max_push_configs_per_task: int = Field(default=10, ge=1)
    # Webhook hosts allowed even though they resolve to non-public addresses (tests, dev).
    push_allowed_hosts: tuple[str, ...] = ()
    # Webhook ports; others (an internal admin port on a public address) are refused.
    push_allowed_ports: tuple[int, ...] = (80, 443)
    # PEM private key (EC P-256 or RSA) that signs notifications; from Secret Manager in prod.
    push_signing_key: str | None = Field(default=None, repr=False)
    project: str | None = None
    firestore_database: str = "(default)"
    retention_days: int = Field(default=30, ge=1)
    # The embedded store's bound: past it, the least recently written tasks are forgotten
    # (as they are after A2A_RETENTION_DAYS): their readers get "task not found".
    memory_max_bytes: int = Field(default=MEMORY_MAX_BYTES, ge=1024 * 1024)
    # Background work. With A2A_WORKER_URL set, turns go to that `worker` function through
    # the Cloud Tasks queue `work`; without it, to a thread pool in this process.
    region: str | None = None
    work_queue: str = "work"
    # The work queue's attempts, as push_max_attempts is the push queue's.
    work_max_attempts: int = Field(default=19, ge=1)
    # Seconds the Cloud Tasks work queue goes on retrying a turn, first attempt to last: a
    # turn it holds is recovered only after that. `make deploy` sets it from the queue's retry
    # config (infra.settings.QueueSettings.retry_span); the default is the deploy.toml queue's.
    work_retry_seconds: float = Field(default=3855, ge=0, le=31 * 86400, allow_inf_nan=False)
    worker_url: str | None = None
    tasks_service_account: str | None = None  # whose OIDC tokens the worker accepts
    function_timeout: int = Field(default=300, ge=1)  # seconds, of the function serving this
    blocking_budget: float | None = Field(default=None, gt=0)  # None: from function_timeout
    lease_seconds: float = Field(default=30, gt=0)  # a silent worker is presumed dead after this
    # The Cloud Tasks emulator (tests, `make emulators`): the worker checks its HS256 tokens
    # with the shared secret instead of Google's signatures.
    tasks_emulator_host: str | None = None
    tasks_emulator_secret: str | None = None

    # How long one stream stays open at most; unset: 10 s short of the function's timeout.
    # The client resubscribes with Last-Event-ID and loses nothing.
    stream_seconds: float | None = Field(default=None, gt=0)
    # A comment line after this many silent seconds keeps proxies from closing the stream.
    stream_keepalive: float = Field(default=15, gt=0)
    # A stream on a task that waits for input (input- or auth-required) ends after this many
    # seconds without news; the client resubscribes to wait on.
    stream_idle: float = Field(default=15, gt=0)
    # Streams one instance holds at once (each holds a server thread); unset: THREADS less
    # two, so that other requests still find a thread.
    max_streams: int | None = Field(default=None, ge=1)
    # Streams one owner holds at once on an instance; unset: one less than the instance's
    # limit (at least one), so that one caller can never take every stream.
    max_owner_streams: int | None = Field(default=None, ge=1)
    # How a stream follows a task another process runs: a Firestore listener (falling back
    # to polling when it can't be had), or polling with backoff. The embedded store ignores it.
    stream_tail: Literal["listener", "polling"] = "listener"
    # A streamed send commits its events together within this many seconds (each frame goes
    # out once committed, so this is also how late a frame may be): a burst of events costs
    # one Firestore write batch rather than one per event.
    stream_commit_interval: float = Field(default=0.05, gt=0)
    # functions-framework's own THREADS variable (its default is 4 per CPU): the server's
    # threads, read here only to size the stream limit.
    threads: int = Field(default_factory=lambda: (os.cpu_count() or 1) * 4, ge=1)
    # The browser console at /console (shared/bindings/console.py): static files over the
    # agent's own API, for development (`make run` turns it on); deployed agents leave it off.
    console: bool = False
    # Logs (shared.observability): auto is JSON for Cloud Logging on Cloud Functions
    # (K_SERVICE set), human-readable elsewhere; json or text forces either.
    log_format: Literal["auto", "json", "text"] = "auto"
    # The key of the owner tags logs carry (an HMAC of the owner): the same on every function
    # to follow one caller across instances; unset, a random key per process.
    log_owner_key: str | None = Field(default=None, repr=False)
    # OpenTelemetry spans (the otel extra): gcp exports to Cloud Trace, otlp to
    # OTEL_EXPORTER_OTLP_ENDPOINT; off loads nothing of OpenTelemetry.
    tracing: Literal["off", "gcp", "otlp"] = "off"

    @property
    def blocking_wait(self) -> float:
        """How long a blocking send waits for a background turn: the budget, or the function's
        timeout less a margin to answer in (10 %, at least 5 s)."""
        if self.blocking_budget is not None:
            return self.blocking_budget
        return max(1.0, self.function_timeout - max(5.0, self.function_timeout * 0.1))

    @property
    def heartbeat(self) -> float:
        """How often a worker renews its lease: three chances before it expires."""
        return self.lease_seconds / 3

    @property
    def stream_duration(self) -> float:
        if self.stream_seconds is not None:
            return self.stream_seconds
        return float(max(self.function_timeout - 10, 1))

    @property
    def stream_limit(self) -> int:
        return self.max_streams or max(self.threads - 2, 1)

    @property
    def google_audiences(self) -> tuple[str, ...]:
        """The audiences Google ID tokens may have (A2A_AUTH=google): fixed at deploy time."""
        return self.audience + ((self.public_url,) if self.public_url else ())

    @property
    def limits(self) -> Limits:
        return Limits(
            parts=self.max_parts,
            metadata_bytes=self.max_metadata_bytes,
            message_bytes=self.max_message_bytes,
            artifact_bytes=self.max_artifact_bytes,
            history_messages=self.max_history_messages,
            history_bytes=self.max_history_bytes,
        )

    @property
    def owner_stream_limit(self) -> int:
        return min(self.max_owner_streams or max(self.stream_limit - 1, 1), self.stream_limit)

    @field_validator("api_keys", mode="before")
    @classmethod
    def _parse_keys(cls, value: object) -> object:
        """`owner:sha256:<hex>,...` -> {sha256:<hex>: owner}."""
        from shared.identity.api_key import parse

        if isinstance(value, str):
            return parse(value)
        if isinstance(value, dict):
            parse(",".join(f"{owner}:{digest}" for digest, owner in value.items()))
        return value

    @field_validator("oidc_issuer")
    @classmethod
    def _issuer_url(cls, value: str | None) -> str | None:
        if value is None or value.startswith("https://"):
            return value
        host = value.removeprefix("http://").split("/")[0].rsplit(":", 1)[0]
        if value.startswith("http://") and host in ("127.0.0.1", "localhost", "[::1]"):
            return value  # an issuer on this machine, in development
        raise ValueError("the issuer must be an https:// URL (as in its tokens' iss claim)")

    @field_validator(
        "push_allowed_hosts",
        "push_allowed_ports",
        "oidc_required_scopes",
        "audience",
        mode="before",
    )
    @classmethod
    def _parse_list(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(h.strip() for h in value.replace(" ", ",").split(",") if h.strip())
        return value

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        environ = os.environ if environ is None else environ
        known = set(ENVIRONMENT.values())
        unknown = sorted(k for k in environ if k.startswith("A2A_") and k not in known)
        if unknown:
            raise SettingsError(
                f"unknown setting {', '.join(unknown)}: no A2A_* variable of that name exists "
                "(README, Settings, lists them); fix its spelling or remove it"
            )
        values = {f: environ[v] for f, v in ENVIRONMENT.items() if environ.get(v, "") != ""}
        try:
            settings = cls(**values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{ENVIRONMENT.get(str(e['loc'][0]), e['loc'][0])}: {e['msg']}"
                for e in exc.errors()
            )
            raise SettingsError(f"invalid settings: {problems}") from None
        _check_identity(settings)
        if settings.tasks_emulator_host and environ.get("K_SERVICE"):
            raise SettingsError(
                "CLOUD_TASKS_EMULATOR_HOST is set on Cloud Run (K_SERVICE is set): the worker "
                "would accept tokens signed with a shared secret instead of Google's; unset it"
            )
        if settings.backend == "firestore" and settings.max_message_bytes > MAX_FIRESTORE_EVENT:
            raise SettingsError(
                f"A2A_MAX_MESSAGE_BYTES is at most {MAX_FIRESTORE_EVENT} with "
                "A2A_BACKEND=firestore: one message or artifact update is one event document, "
                "and Firestore documents hold 1 MiB (send larger content as a file part by URL)"
            )
        if settings.worker_url is not None:
            if settings.backend != "firestore":
                raise SettingsError(
                    "A2A_WORKER_URL needs A2A_BACKEND=firestore: a worker in another process "
                    "cannot see the memory backend's tasks (unset it to run work in process)"
                )
            missing = [
                ENVIRONMENT[f] for f in ("project", "region") if getattr(settings, f) is None
            ]
            if missing:
                raise SettingsError(
                    f"A2A_WORKER_URL needs {' and '.join(missing)} to name the Cloud Tasks "
                    f"queue projects/<project>/locations/<region>/queues/{settings.work_queue}"
                )
            if settings.tasks_service_account is None:
                raise SettingsError(
                    "A2A_WORKER_URL needs A2A_TASKS_SERVICE_ACCOUNT: the service account "
                    "e-mail Cloud Tasks signs its OIDC token to the worker as"
                )
        return settings


def _check_identity(settings: Settings) -> None:
    """Each identity mode's own settings are there (shared.identity)."""
    if settings.auth == "api-key" and not settings.api_keys:
        raise SettingsError(
            "A2A_AUTH=api-key needs A2A_API_KEYS=owner:sha256:<hex>[,...]; make an entry with "
            "`python -m shared.identity new-key OWNER`"
        )
    if settings.auth == "google" and not settings.google_audiences:
        raise SettingsError(
            "A2A_AUTH=google needs A2A_AUDIENCE (or A2A_PUBLIC_URL): the URL callers mint "
            "their ID tokens for (make deploy sets it to the function's URL)"
        )
    if settings.auth == "oidc":
        missing = [
            ENVIRONMENT[f] for f in ("oidc_issuer", "oidc_audience") if not getattr(settings, f)
        ]
        if missing:
            raise SettingsError(
                f"A2A_AUTH=oidc needs {' and '.join(missing)}: the issuer's URL (its tokens' "
                "iss) and the audience its tokens are minted for (their aud)"
            )
