"""Deployment settings, read once from environment variables and validated.

Every setting is an `A2A_*` variable (Google's own variables keep their names). A bad value
stops start-up with a message naming the variable and what it accepts, and so does an `A2A_*`
variable that is no setting (a typo would otherwise be silently ignored).

`Settings` is a frozen dataclass whose fields each say their variable, default and rule
(`_Rule`: how the variable's text is read, what a value may be): it is built at every cold
start, before the first request, so it needs nothing beyond the standard library. A value
given in code (tests, `make bench`) is checked by the same rules as one read from the
environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import field, fields
from typing import TYPE_CHECKING, Any, Literal, get_args
from urllib.parse import urlsplit

from shared.frozen import frozen

if TYPE_CHECKING:
    from shared.limits import Limits

# The largest message or artifact update a Firestore event document takes, with its envelope
# (shared.store.firestore refuses larger parts and events).
MAX_FIRESTORE_EVENT = 900_000

# What the embedded store may hold (A2A_MEMORY_MAX_BYTES): what its records of tasks (their
# events serialized) and of messages really take in the process. 32 MiB fits a 256 MiB
# function with room for requests: about 18,000 short tasks (~1.8 KiB each).
MEMORY_MAX_BYTES = 32 * 1024 * 1024

# The requests one Cloud Run instance takes at once at most (its concurrency's limit, which
# the deployed `a2a` uses: infra/deploy.toml). A stream waiting for its next event holds no
# thread, and ~40 KiB (embedded) or ~155 KiB (Firestore: its task's listener) of memory
# (`make bench BENCH_ARGS="--only streams"`: 512 MiB holds ~2,700 on Firestore), so an
# instance's streams are bounded by this, not by memory nor THREADS: A2A_MAX_STREAMS is this
# less THREADS by default (deployed: 1000 - 80 = 920, ~230 MiB on Firestore), so that an
# instance full of streams still takes THREADS other requests.
INSTANCE_REQUESTS = 1000

# An owner's share of an instance's streams by default (A2A_MAX_STREAMS_PER_OWNER): a
# quarter, so four owners streaming at once each get all of theirs (deployed: 230 of 920), and
# at least two on a small instance (a client often holds a send's stream and a subscription:
# the console does).
OWNER_STREAM_SHARE = 4

# Every duration is at most a month: no wait here means more (the work queue retries a turn
# for about an hour), and timers and dates overflow on far larger values.
MAX_SECONDS = 31 * 86400
# Every count and size: the largest whole number any JSON reader holds exactly.
MAX_COUNT = 2**53 - 1
# Tasks are kept ten years at most: an expiry date must stay a date.
MAX_RETENTION_DAYS = 3650

Backend = Literal["memory", "firestore"]
Auth = Literal["none", "api-key", "google", "oidc"]
CardStyle = Literal["hybrid", "v1"]
StreamTail = Literal["listener", "polling"]
LogFormat = Literal["auto", "json", "text"]
Tracing = Literal["off", "gcp", "otlp"]


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the variable."""


class _Rule:
    """What one setting accepts: `read` takes its variable's text, `check` a value (read, or
    given in code) and returns the value kept; both raise ValueError saying what it accepts.
    The base rule is text, as the variable holds it."""

    def __init__(self, *, optional: bool = False) -> None:
        self.optional = optional  # None (unset) is a value

    def read(self, text: str) -> object:
        return text

    def check(self, value: object) -> object:
        if value is None and self.optional:
            return None
        return self.checked(value)

    def checked(self, value: object) -> object:
        if not isinstance(value, str):
            raise ValueError("expected text")
        return value


class _Pattern(_Rule):
    def __init__(self, pattern: str, accepts: str, *, optional: bool = False) -> None:
        super().__init__(optional=optional)
        self.pattern, self.accepts = pattern, accepts

    def checked(self, value: object) -> object:
        if not isinstance(value, str) or not re.fullmatch(self.pattern, value):
            raise ValueError(f"expected {self.accepts}")
        return value


class _Choice(_Rule):
    def __init__(self, options: object) -> None:
        super().__init__()
        self.options: tuple[str, ...] = get_args(options)

    def checked(self, value: object) -> object:
        if value not in self.options:
            raise ValueError(f"expected one of {', '.join(self.options)}")
        return value


_WORDS = dict.fromkeys(("1", "true", "t", "yes", "y", "on"), True) | dict.fromkeys(
    ("0", "false", "f", "no", "n", "off"), False
)


class _Flag(_Rule):
    def read(self, text: str) -> object:
        return _WORDS.get(text.lower(), text)

    def checked(self, value: object) -> object:
        if not isinstance(value, bool):
            raise ValueError("expected true or false (or 1/0, yes/no, on/off)")
        return value


def _number(text: str) -> object:
    """A decimal number's text -> int or float; other text (other digits than ASCII's, words)
    is returned as it is, for `check` to refuse."""
    if not text.isascii():
        return text
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


class _Count(_Rule):
    """A whole number from `low` to `high` (a float with no fraction counts: "10.0")."""

    def __init__(self, low: int, high: int = MAX_COUNT, *, optional: bool = False) -> None:
        super().__init__(optional=optional)
        self.low, self.high = low, high

    def read(self, text: str) -> object:
        return _number(text)

    def checked(self, value: object) -> object:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not self.low <= value <= self.high
        ):
            raise ValueError(f"expected a whole number from {self.low} to {self.high}")
        return value


class _Seconds(_Rule):
    """A finite number of seconds, above 0 (or from 0, with `zero`), at most MAX_SECONDS."""

    def __init__(self, *, zero: bool = False, optional: bool = False) -> None:
        super().__init__(optional=optional)
        self.zero = zero
        self.accepts = f"seconds {'from' if zero else 'above'} 0, at most {MAX_SECONDS}"

    def read(self, text: str) -> object:
        return _number(text)

    def checked(self, value: object) -> object:
        # NaN is refused by the comparisons (all false), infinity by the bound.
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not ((value >= 0 if self.zero else value > 0) and value <= MAX_SECONDS)
        ):
            raise ValueError(f"expected a number of {self.accepts}")
        return float(value)


def _items(text: str) -> tuple[str, ...]:
    """A list's text: items separated by commas or spaces."""
    return tuple(item.strip() for item in text.replace(" ", ",").split(",") if item.strip())


class _Names(_Rule):
    def read(self, text: str) -> object:
        return _items(text)

    def checked(self, value: object) -> object:
        if not isinstance(value, tuple | list) or not all(isinstance(v, str) for v in value):
            raise ValueError("expected names separated by commas or spaces")
        return tuple(value)


class _Ports(_Rule):
    def read(self, text: str) -> object:
        return tuple(_number(item) for item in _items(text))

    def checked(self, value: object) -> object:
        if not isinstance(value, tuple | list) or not all(
            type(v) is int and 1 <= v <= 65535 for v in value
        ):
            raise ValueError("expected port numbers (1 to 65535) separated by commas or spaces")
        return tuple(value)


class _ApiKeys(_Rule):
    """`owner:sha256:<hex>,...` -> {sha256:<hex>: owner} (shared.identity.api_key.parse, whose
    errors never repeat the value: it may be a key pasted by mistake)."""

    def read(self, text: str) -> object:
        from shared.identity.api_key import parse

        return parse(text)

    def checked(self, value: object) -> object:
        if not isinstance(value, dict):
            raise ValueError("expected owner:sha256:<64 hex digits>[,...]")
        if value:  # none (the default) needs no parser: its import is a cold start's
            from shared.identity.api_key import parse

            parse(",".join(f"{owner}:{digest}" for digest, owner in value.items()))
        return value


class _Url(_Rule):
    """An absolute http(s) URL with a host, in printable ASCII (the card publishes it, and
    requests and tokens are addressed to it: one that does not parse would fail them all)."""

    def checked(self, value: object) -> object:
        accepts = "an http:// or https:// URL with a host, in printable ASCII without spaces"
        if not isinstance(value, str) or not value.isascii() or not value.isprintable():
            raise ValueError(f"expected {accepts}")
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a port out of range
        except ValueError:
            raise ValueError(f"expected {accepts}") from None
        if " " in value or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected {accepts}")
        return value


class _Issuer(_Url):
    def checked(self, value: object) -> object:
        value = str(super().checked(value))
        if value.startswith("https://"):
            return value
        host = value.removeprefix("http://").split("/")[0].rsplit(":", 1)[0]
        if value.startswith("http://") and host in ("127.0.0.1", "localhost", "[::1]"):
            return value  # an issuer on this machine, in development
        raise ValueError("the issuer must be an https:// URL (as in its tokens' iss claim)")


class _PrivateKey(_Rule):
    """A PEM private key, given as itself or as the path of a file holding it (a secret
    mounted as a file); kept as the PEM text. Whether the key is usable is shared.signing_keys'
    to say (cryptography is no import of the settings). Errors never repeat the value."""

    def checked(self, value: object) -> object:
        accepts = (
            "a PEM private key (-----BEGIN PRIVATE KEY-----...), or the path of a file holding one"
        )
        if not isinstance(value, str):
            raise ValueError(f"expected {accepts}")
        text = value
        if not value.lstrip().startswith("-----BEGIN"):
            if "\n" in value or len(value) > 4096:
                raise ValueError(f"expected {accepts}")
            try:
                with open(value, encoding="utf-8") as file:
                    text = file.read(64 * 1024)
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(
                    f"expected {accepts}; the file it names cannot be read "
                    f"({exc.strerror if isinstance(exc, OSError) else exc})"
                ) from None
        if not re.search(r"-----BEGIN [A-Z ]*PRIVATE KEY-----", text):
            raise ValueError(f"expected {accepts}; that holds no PEM private key")
        return text


_TEXT = _Rule()
_OPTIONAL = _Rule(optional=True)
_URL = _Url(optional=True)
# A Cloud Tasks queue's id, as infra/settings.py's QueueSettings.name.
_QUEUE = _Pattern(r"[A-Za-z0-9-]{1,100}", "a Cloud Tasks queue id: 1 to 100 letters, digits or -")
# A project id (or a legacy domain-scoped one, example.com:my-project) and a region: both go
# into resource paths (projects/P/locations/R/queues/Q), where a typo would otherwise fail
# only at the first call of the API, with an error that names neither setting.
_PROJECT = _Pattern(
    r"(?:[a-z0-9][a-z0-9.-]{0,62}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]",
    "a Google Cloud project id: 6 to 30 lowercase letters, digits or -, starting with a "
    "letter (`gcloud projects list` shows them)",
    optional=True,
)
_REGION = _Pattern(
    r"[a-z][a-z0-9-]{0,62}",
    "a Google Cloud region such as us-central1: lowercase letters, digits or -",
    optional=True,
)


def _setting(
    variable: str,
    default: object,
    rule: _Rule = _TEXT,
    *,
    secret: bool = False,
) -> Any:
    """A field of Settings: its environment variable, default and rule (a secret stays out of
    repr). A callable default is a factory."""
    extra = {"variable": variable, "rule": rule}
    if callable(default):
        return field(default_factory=default, repr=not secret, metadata=extra)
    return field(default=default, repr=not secret, metadata=extra)


def _threads() -> int:
    return (os.cpu_count() or 1) * 4


# Not slotted: one instance per process, and slots would make the class twice at each start.
@frozen(kw_only=True)
class Settings:
    """Every setting of a function, checked (each field's variable, default and rule are its
    `_setting`); `from_env` reads them from the environment at start-up."""

    # A module path, as infra/settings.py's HANDLER (a relative one, ".x", cannot be imported).
    handler: str = _setting(
        "A2A_HANDLER",
        "functions.handlers.sample",
        _Pattern(r"[A-Za-z_][\w.]*", "a module path such as functions.handlers.echo"),
    )
    backend: Backend = _setting("A2A_BACKEND", "memory", _Choice(Backend))
    public_url: str | None = _setting("A2A_PUBLIC_URL", None, _URL)
    agent_name: str | None = _setting("A2A_AGENT_NAME", None, _OPTIONAL)
    agent_description: str | None = _setting("A2A_AGENT_DESCRIPTION", None, _OPTIONAL)
    agent_version: str | None = _setting("A2A_AGENT_VERSION", None, _OPTIONAL)
    provider_organization: str | None = _setting("A2A_PROVIDER_ORGANIZATION", None, _OPTIONAL)
    provider_url: str | None = _setting("A2A_PROVIDER_URL", None, _URL)
    documentation_url: str | None = _setting("A2A_DOCUMENTATION_URL", None, _URL)
    # Who may call (shared.identity): none (local development: one owner for all), api-key,
    # google (Google-signed ID tokens) or oidc (any OpenID Connect issuer).
    auth: Auth = _setting("A2A_AUTH", "none", _Choice(Auth))
    # sha256:<hex> -> owner, from `owner:sha256:<hex>,...`; hashes only, and kept out of repr.
    api_keys: dict[str, str] = _setting("A2A_API_KEYS", dict, _ApiKeys(), secret=True)
    api_key_header: str = _setting(
        "A2A_API_KEY_HEADER",
        "X-API-Key",
        _Pattern(r"[A-Za-z0-9-]{1,64}", "an HTTP header's name: 1 to 64 letters, digits or -"),
    )
    # What Google ID tokens may be addressed to (google mode), besides A2A_PUBLIC_URL.
    audience: tuple[str, ...] = _setting("A2A_AUDIENCE", (), _Names())
    oidc_issuer: str | None = _setting("A2A_OIDC_ISSUER", None, _Issuer(optional=True))
    oidc_audience: str | None = _setting("A2A_OIDC_AUDIENCE", None, _OPTIONAL)
    oidc_owner_claim: str = _setting(
        "A2A_OIDC_OWNER_CLAIM", "sub", _Pattern(r"(?s).+", "a claim's name")
    )
    oidc_required_scopes: tuple[str, ...] = _setting("A2A_OIDC_REQUIRED_SCOPES", (), _Names())
    max_body_bytes: int = _setting("A2A_MAX_BODY_BYTES", 10 * 1024 * 1024, _Count(1024))
    # A body's rest (after what came with its head) arrives within this, or the request is
    # refused with 408 (by the functions' front): a slow sender holds neither memory nor a thread
    # for long.
    body_read_seconds: float = _setting("A2A_BODY_READ_SECONDS", 10, _Seconds())
    # The body bytes all requests in flight may hold at once; over it a request is refused
    # with 503 and Retry-After (unset: six bodies at the limit and 4 MiB, 64 MiB with the
    # defaults: a 512 MiB function parses them at ~4x their size). Set it at least
    # A2A_MAX_BODY_BYTES, or a body between the two is never read.
    max_buffered_bytes: int | None = _setting(
        "A2A_MAX_BUFFERED_BYTES", None, _Count(1024, optional=True)
    )
    # One owner's share of those bytes, its bodies and answers together (unset: a quarter of
    # A2A_MAX_BUFFERED_BYTES, 16 MiB with the defaults, and at least one body at the limit):
    # one owner's requests cannot take the room of the others'.
    max_owner_buffered_bytes: int | None = _setting(
        "A2A_MAX_OWNER_BUFFERED_BYTES", None, _Count(1024, optional=True)
    )
    # A request's head (its request line and header lines): over either, HTTP 431 and the
    # connection closes, before anything of it is handed to the app. 32 KiB is nginx's default
    # (4 buffers of 8 KiB), 100 lines gunicorn's and Apache's; an ID token is 1-4 KiB.
    max_head_bytes: int = _setting("A2A_MAX_HEAD_BYTES", 32 * 1024, _Count(1024))
    max_head_lines: int = _setting("A2A_MAX_HEAD_LINES", 100, _Count(10))
    # A connection's head is whole within this of its first byte (or of the connection's
    # opening): else it is closed (408 when some of the head came), so idle and half-sent
    # heads hold no connection; as A2A_BODY_READ_SECONDS, a head is one round trip.
    head_read_seconds: float = _setting("A2A_HEAD_READ_SECONDS", 10, _Seconds())
    # A client that takes none of an answer's next piece within this is cut off: an answer
    # waits for its reader (it is written piece by piece as the socket takes it), not forever.
    answer_write_seconds: float = _setting("A2A_ANSWER_WRITE_SECONDS", 30, _Seconds())
    # What one request may carry (shared.limits; docs/settings.md, Limits). The defaults fit a
    # 512 MiB function serving several requests at once: a request grows it by ~4x its body
    # plus a few MiB.
    max_batch: int = _setting("A2A_MAX_BATCH", 20, _Count(1))  # JSON-RPC requests in one batch
    max_parts: int = _setting("A2A_MAX_PARTS", 100, _Count(1))  # parts in one message or artifact
    # JSON of one metadata object.
    max_metadata_bytes: int = _setting("A2A_MAX_METADATA_BYTES", 64 * 1024, _Count(2))
    # JSON of one message, or of one artifact update (a chunk): at most MAX_FIRESTORE_EVENT on
    # the Firestore backend, whose event documents hold 1 MiB.
    max_message_bytes: int = _setting("A2A_MAX_MESSAGE_BYTES", 900_000, _Count(1024))
    # JSON of one artifact.
    max_artifact_bytes: int = _setting("A2A_MAX_ARTIFACT_BYTES", 4 * 1024 * 1024, _Count(1024))
    # A task's history: a send that would take it past either limit is refused (the task
    # stays as it was); the client starts a new task in the same context.
    max_history_messages: int = _setting("A2A_MAX_HISTORY_MESSAGES", 500, _Count(2))
    max_history_bytes: int = _setting("A2A_MAX_HISTORY_BYTES", 16 * 1024 * 1024, _Count(1024))
    commit_interval: float = _setting("A2A_COMMIT_INTERVAL_SECONDS", 1.0, _Seconds())
    card_max_age: int = _setting("A2A_CARD_MAX_AGE_SECONDS", 300, _Count(0, MAX_SECONDS))
    # hybrid: v1.0 and v0.3 fields side by side (every client finds its own); v1: the strict
    # v1.0 card, for validators with a closed schema (the A2A TCK).
    card_style: CardStyle = _setting("A2A_CARD_STYLE", "hybrid", _Choice(CardStyle))
    # A resent message (same messageId and content) gets the first send's task; the same
    # messageId with other content, or after the client moved on, is a new message.
    deduplicate_messages: bool = _setting("A2A_DEDUPLICATE_MESSAGES", True, _Flag())
    push_notifications: bool = _setting("A2A_PUSH_NOTIFICATIONS", True, _Flag())
    # Streamed sends and subscriptions (SSE); off, they are refused (UnsupportedOperationError)
    # and the card says so: an open stream holds a function instance for its whole duration.
    streaming: bool = _setting("A2A_STREAMING", True, _Flag())
    # With A2A_DELIVER_URL set, notifications go to that `deliver` function through the Cloud
    # Tasks queue `push`; without it, to a thread pool in this process.
    deliver_url: str | None = _setting("A2A_DELIVER_URL", None, _URL)
    push_queue: str = _setting("A2A_PUSH_QUEUE", "push", _QUEUE)
    # The push queue's attempts, by max_attempts and max_retry_duration both (`make deploy`
    # sets it: infra.settings.QueueSettings.attempts); the default is the deploy.toml queue's.
    push_max_attempts: int = _setting("A2A_PUSH_MAX_ATTEMPTS", 34, _Count(1))
    # Push configs one task may have: each event of the task is one POST per config.
    max_push_configs_per_task: int = _setting("A2A_MAX_PUSH_CONFIGS_PER_TASK", 10, _Count(1))
    # Tasks one owner may have live (not terminal: submitted, working, input- or
    # auth-required, counted in the store on every instance) when a send starts another in
    # the background (non-blocking, or to a long-running handler); past it that send is
    # refused. A blocking send that ends in the request is not checked (it pays no read).
    max_live_tasks_per_owner: int = _setting("A2A_MAX_LIVE_TASKS_PER_OWNER", 1000, _Count(1))
    # Push configs one owner may have, on all its tasks (kept as long as their task).
    max_push_configs_per_owner: int = _setting("A2A_MAX_PUSH_CONFIGS_PER_OWNER", 1000, _Count(1))
    # POSTs one instance makes to one owner's webhooks in a minute, failed ones too; past it
    # the rest waits (queued again for when the minute has room), nothing is dropped.
    max_push_deliveries_per_owner_per_minute: int = _setting(
        "A2A_MAX_PUSH_DELIVERIES_PER_OWNER_PER_MINUTE", 600, _Count(1)
    )
    # Webhook hosts allowed even though they resolve to non-public addresses (tests, dev).
    push_allowed_hosts: tuple[str, ...] = _setting("A2A_PUSH_ALLOWED_HOSTS", (), _Names())
    # Webhook ports; others (an internal admin port on a public address) are refused.
    push_allowed_ports: tuple[int, ...] = _setting("A2A_PUSH_ALLOWED_PORTS", (80, 443), _Ports())
    # PEM private key (EC P-256 or RSA) that signs notifications; from Secret Manager in prod.
    push_signing_key: str | None = _setting("A2A_PUSH_SIGNING_KEY", None, _OPTIONAL, secret=True)
    # The key that signs the agent card (A2A 1.0 §8.4, shared.card_signing): a PEM private key
    # (EC P-256 or RSA), or the path of a file holding one; from Secret Manager in prod.
    card_signing_key: str | None = _setting(
        "A2A_CARD_SIGNING_KEY", None, _PrivateKey(optional=True), secret=True
    )
    project: str | None = _setting("GOOGLE_CLOUD_PROJECT", None, _PROJECT)
    firestore_database: str = _setting("A2A_FIRESTORE_DATABASE", "(default)")
    retention_days: int = _setting("A2A_RETENTION_DAYS", 30, _Count(1, MAX_RETENTION_DAYS))
    # The embedded store's bound: past it, the owner holding the most bytes loses its least
    # recently written tasks, terminal ones first (after A2A_RETENTION_DAYS, anyone's are
    # forgotten): their readers get "task not found".
    memory_max_bytes: int = _setting("A2A_MEMORY_MAX_BYTES", MEMORY_MAX_BYTES, _Count(1024 * 1024))
    # Background work. With A2A_WORKER_URL set, turns go to that `worker` function through
    # the Cloud Tasks queue `work`; without it, to a thread pool in this process.
    region: str | None = _setting("A2A_REGION", None, _REGION)
    work_queue: str = _setting("A2A_WORK_QUEUE", "work", _QUEUE)
    # The work queue's attempts, as push_max_attempts is the push queue's.
    work_max_attempts: int = _setting("A2A_WORK_MAX_ATTEMPTS", 19, _Count(1))
    # Seconds the Cloud Tasks work queue goes on retrying a turn, first attempt to last: a
    # turn it holds is recovered only after that. `make deploy` sets it from the queue's retry
    # config (infra.settings.QueueSettings.retry_span); the default is the deploy.toml queue's.
    work_retry_seconds: float = _setting("A2A_WORK_RETRY_SECONDS", 3855, _Seconds(zero=True))
    worker_url: str | None = _setting("A2A_WORKER_URL", None, _URL)
    # Whose OIDC tokens the worker accepts.
    tasks_service_account: str | None = _setting("A2A_TASKS_SERVICE_ACCOUNT", None, _OPTIONAL)
    # Seconds, of the function serving this.
    function_timeout: int = _setting("A2A_FUNCTION_TIMEOUT", 300, _Count(1, MAX_SECONDS))
    # None: from function_timeout.
    blocking_budget: float | None = _setting(
        "A2A_BLOCKING_BUDGET_SECONDS", None, _Seconds(optional=True)
    )
    # A silent worker is presumed dead after this.
    lease_seconds: float = _setting("A2A_LEASE_SECONDS", 30, _Seconds())
    # The Cloud Tasks emulator (tests, `make emulators`): the worker checks its HS256 tokens
    # with the shared secret instead of Google's signatures.
    tasks_emulator_host: str | None = _setting("CLOUD_TASKS_EMULATOR_HOST", None, _OPTIONAL)
    tasks_emulator_secret: str | None = _setting("CLOUD_TASKS_EMULATOR_SECRET", None, _OPTIONAL)

    # How long one stream stays open at most; unset: 10 s short of the function's timeout.
    # The client resubscribes with Last-Event-ID and loses nothing.
    stream_seconds: float | None = _setting("A2A_STREAM_SECONDS", None, _Seconds(optional=True))
    # A comment line after this many silent seconds keeps proxies from closing the stream.
    stream_keepalive: float = _setting("A2A_STREAM_KEEPALIVE_SECONDS", 15, _Seconds())
    # A stream on a task that waits for input (input- or auth-required) ends after this many
    # seconds without news; the client resubscribes to wait on.
    stream_idle: float = _setting("A2A_STREAM_IDLE_SECONDS", 15, _Seconds())
    # Streams one instance holds at once (each holds a connection, and a thread only while it
    # makes a frame); unset: INSTANCE_REQUESTS less THREADS.
    max_streams: int | None = _setting("A2A_MAX_STREAMS", None, _Count(1, optional=True))
    # Streams one owner holds at once on an instance; unset: an OWNER_STREAM_SHARE of the
    # instance's limit (at least two, or the limit), so that that many owners each get
    # theirs whatever the others hold (A2A_AUTH=none: the instance's, every caller being one
    # owner).
    max_owner_streams: int | None = _setting(
        "A2A_MAX_STREAMS_PER_OWNER", None, _Count(1, optional=True)
    )
    # How a stream follows a task another process runs: a Firestore listener (falling back
    # to polling when it can't be had), or polling with backoff. The embedded store ignores it.
    stream_tail: StreamTail = _setting("A2A_STREAM_TAIL", "listener", _Choice(StreamTail))
    # A turn's first window (in the request, on the in-process queue or in the worker): its
    # first events are committed together within this many seconds, each later window twice
    # the one before up to A2A_COMMIT_INTERVAL_SECONDS, whether or not anyone listens (a
    # streamed send's own stream sends each event at once, before its commit; GetTask, a
    # webhook and another instance's stream see it a window later at most).
    stream_commit_interval: float = _setting("A2A_STREAM_COMMIT_INTERVAL_SECONDS", 0.05, _Seconds())
    # functions-framework's own THREADS variable (its default is 4 per CPU): the function's
    # pool, which runs its requests and makes its streams' frames; a stream waiting for its
    # next event holds no thread (shared/bindings/asgi.py).
    threads: int = _setting("THREADS", _threads, _Count(1))
    # Turns of a sync handler running at once on an instance: each holds a thread of a pool of
    # its own for its whole length (an async handler's turn holds none: shared.engine), apart
    # from THREADS, so that sync turns never keep a request that runs no handler waiting.
    # 32: a turn blocked on a model's answer costs a thread's stack and little CPU; past
    # that, more turns of one instance wait for a thread (without holding the request's).
    sync_turns: int = _setting("A2A_SYNC_TURNS", 32, _Count(1))
    # The browser console at /console (shared/bindings/console.py): static files over the
    # agent's own API, for development (`make run` turns it on); deployed agents leave it off.
    console: bool = _setting("A2A_CONSOLE", False, _Flag())
    # Logs (shared.observability): auto is JSON for Cloud Logging on Cloud Functions
    # (K_SERVICE set), human-readable elsewhere; json or text forces either.
    log_format: LogFormat = _setting("A2A_LOG_FORMAT", "auto", _Choice(LogFormat))
    # The key of the owner tags logs carry (an HMAC of the owner): the same on every function
    # to follow one caller across instances; unset, a random key per process.
    log_owner_key: str | None = _setting("A2A_LOG_OWNER_KEY", None, _OPTIONAL, secret=True)
    # OpenTelemetry spans (the otel extra): gcp exports to Cloud Trace, otlp to
    # OTEL_EXPORTER_OTLP_ENDPOINT; off loads nothing of OpenTelemetry.
    tracing: Tracing = _setting("A2A_TRACING", "off", _Choice(Tracing))

    def __post_init__(self) -> None:
        """Every field by its rule, every problem named by its variable at once."""
        problems = []
        for name, rule in _RULES.items():
            try:
                value = rule.check(getattr(self, name))
            except ValueError as exc:
                problems.append(f"{ENVIRONMENT[name]}: {exc}")
            else:
                object.__setattr__(self, name, value)  # the kept form: a tuple, a float
        if problems:
            raise SettingsError(f"invalid settings: {'; '.join(problems)}")

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
    def buffered_limit(self) -> int:
        """The body bytes all requests in flight may hold (A2A_MAX_BUFFERED_BYTES)."""
        if self.max_buffered_bytes is not None:
            return self.max_buffered_bytes
        return 6 * self.max_body_bytes + 4 * 1024 * 1024

    @property
    def owner_buffered_limit(self) -> int:
        """One owner's share of `buffered_limit` (A2A_MAX_OWNER_BUFFERED_BYTES)."""
        if self.max_owner_buffered_bytes is not None:
            return self.max_owner_buffered_bytes
        return max(self.buffered_limit // 4, self.max_body_bytes + 1)

    @property
    def stream_limit(self) -> int:
        return self.max_streams or max(INSTANCE_REQUESTS - self.threads, 1)

    @property
    def google_audiences(self) -> tuple[str, ...]:
        """The audiences Google ID tokens may have (A2A_AUTH=google): fixed at deploy time."""
        return self.audience + ((self.public_url,) if self.public_url else ())

    @property
    def limits(self) -> Limits:
        # Imported here: the settings are read first at every start, with the standard
        # library alone (tests/test_settings.py).
        from shared.limits import Limits

        return Limits(
            parts=self.max_parts,
            metadata_bytes=self.max_metadata_bytes,
            message_bytes=self.max_message_bytes,
            artifact_bytes=self.max_artifact_bytes,
            history_messages=self.max_history_messages,
            history_bytes=self.max_history_bytes,
        )

    @property
    def memory_push_bytes(self) -> int:
        """The embedded push config store's share of A2A_MEMORY_MAX_BYTES (the task store has
        the rest): an eighth with push notifications on (~3,000 configs at their largest,
        their URLs and secrets at the limits; ~10 times that of usual ones), none off."""
        return self.memory_max_bytes // 8 if self.push_notifications else 0

    @property
    def owner_stream_limit(self) -> int:
        if self.max_owner_streams is not None:
            return min(self.max_owner_streams, self.stream_limit)
        if self.auth == "none":
            return self.stream_limit
        return max(self.stream_limit // OWNER_STREAM_SHARE, min(2, self.stream_limit))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        environ = os.environ if environ is None else environ
        known = ENVIRONMENT.values()
        unknown = sorted(k for k in environ if k.startswith("A2A_") and k not in known)
        if unknown:
            raise SettingsError(
                f"unknown setting {', '.join(unknown)}: no A2A_* variable of that name exists "
                "(docs/settings.md lists them); fix its spelling or remove it"
            )
        values: dict[str, Any] = {}
        problems = []
        for name, variable in ENVIRONMENT.items():
            if text := environ.get(variable, ""):  # empty is unset
                try:
                    values[name] = _RULES[name].read(text)
                except ValueError as exc:
                    problems.append(f"{variable}: {exc}")
        if problems:
            raise SettingsError(f"invalid settings: {'; '.join(problems)}")
        settings = cls(**values)
        _check_identity(settings)
        if settings.card_signing_key and not settings.public_url:
            # Without it the card's URL is the request's Host or X-Forwarded-Host: the agent's
            # key would vouch for any origin a caller names (a card signed for
            # agent.evil.example, verifying against this agent's JWKS).
            raise SettingsError(
                "A2A_CARD_SIGNING_KEY needs A2A_PUBLIC_URL: a card is signed only for the URL "
                "the agent is published at (make deploy sets it to the function's URL; "
                "locally, e.g. A2A_PUBLIC_URL=http://localhost:8080)"
            )
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


# Field name -> environment variable, and -> its rule.
ENVIRONMENT: dict[str, str] = {f.name: f.metadata["variable"] for f in fields(Settings)}
_RULES: dict[str, _Rule] = {f.name: f.metadata["rule"] for f in fields(Settings)}


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
