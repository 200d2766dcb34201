"""Start-up settings: what the deploy sets is accepted, typos and contradictions are refused."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.plan import WIRING, function_env
from infra.settings import DEFAULT_FILE, load
from infra.settings import SettingsError as DeployError
from shared.settings import (
    _RULES,
    ENVIRONMENT,
    MAX_RETENTION_DAYS,
    MAX_SECONDS,
    Settings,
    SettingsError,
    _Count,
    _Seconds,
)
from tests.conftest import ROOT


@pytest.mark.parametrize("role", sorted(WIRING))
def test_every_variable_the_deploy_sets_is_accepted(role: str) -> None:
    deploy = load(DEFAULT_FILE, {"PROJECT": "my-project"})
    env = function_env(deploy, role)
    env |= {name: f"https://{target}.example" for name, target in WIRING[role].items()}
    settings = Settings.from_env(env)
    assert settings.function_timeout == getattr(deploy.functions, role).timeout
    assert settings.work_max_attempts == deploy.queues.work.attempts()
    assert settings.tasks_service_account == deploy.invoker_email


def test_an_unknown_a2a_variable_is_refused_by_name() -> None:
    with pytest.raises(SettingsError, match="unknown setting A2A_HANDLR"):
        Settings.from_env({"A2A_HANDLR": "functions.handlers.echo"})


def test_a_worker_url_needs_the_firestore_backend_and_a_queue_path() -> None:
    with pytest.raises(SettingsError, match="A2A_BACKEND=firestore"):
        Settings.from_env({"A2A_WORKER_URL": "https://worker.example"})
    queued = {"A2A_WORKER_URL": "https://w.example", "A2A_BACKEND": "firestore"}
    with pytest.raises(SettingsError, match="GOOGLE_CLOUD_PROJECT and A2A_REGION"):
        Settings.from_env(queued)
    queued |= {"GOOGLE_CLOUD_PROJECT": "demo-project", "A2A_REGION": "us-central1"}
    with pytest.raises(SettingsError, match="A2A_TASKS_SERVICE_ACCOUNT"):
        Settings.from_env(queued)


def test_the_blocking_budget_comes_from_the_function_timeout() -> None:
    assert Settings.from_env({"A2A_FUNCTION_TIMEOUT": "300"}).blocking_wait == 270
    assert Settings.from_env({"A2A_FUNCTION_TIMEOUT": "30"}).blocking_wait == 25
    assert Settings.from_env({"A2A_BLOCKING_BUDGET_SECONDS": "2.5"}).blocking_wait == 2.5
    with pytest.raises(SettingsError, match="A2A_LEASE_SECONDS"):
        Settings.from_env({"A2A_LEASE_SECONDS": "0"})


def test_the_settings_need_nothing_but_the_standard_library() -> None:
    """They are read first at every cold start: no pydantic, nothing of ours besides (but
    shared.frozen, the standard library's dataclasses declared for a cheap start)."""
    code = (
        "import json, sys; before = set(sys.modules); from shared.settings import Settings; "
        "Settings.from_env({'A2A_MAX_BATCH': '5', 'A2A_CONSOLE': 'on'}); "
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = json.loads(out.stdout)
    assert {name.split(".")[0] for name in loaded} - set(sys.stdlib_module_names) == {"shared"}
    ours = {name for name in loaded if name.startswith("shared")}
    assert ours == {"shared", "shared.frozen", "shared.settings"}


def test_a_value_given_in_code_is_checked_by_the_same_rules() -> None:
    with pytest.raises(SettingsError, match="A2A_MAX_BATCH: expected a whole number from 1"):
        Settings(max_batch=0)
    with pytest.raises(SettingsError, match="A2A_MAX_BATCH: expected a whole number"):
        Settings(max_batch=True)
    with pytest.raises(SettingsError, match="A2A_BACKEND: expected one of memory, firestore"):
        Settings(backend="mongodb")  # type: ignore[arg-type]
    assert Settings(stream_seconds=2).stream_seconds == 2.0
    assert Settings(push_allowed_hosts=["a"]).push_allowed_hosts == ("a",)  # type: ignore[arg-type]


@pytest.mark.parametrize("handler", [".", "..handlers", "-x", "functions handlers", "1st"])
def test_the_handler_is_a_module_path(handler: str) -> None:
    with pytest.raises(SettingsError, match="A2A_HANDLER: expected a module path"):
        Settings.from_env({"A2A_HANDLER": handler})
    with pytest.raises(DeployError, match="HANDLER"):
        load(DEFAULT_FILE, {"HANDLER": handler})


@pytest.mark.parametrize("queue", ["work/../x", "a b", "q" * 101, "queue_1"])
def test_a_queue_is_a_cloud_tasks_queue_id(queue: str) -> None:
    for variable in ("A2A_WORK_QUEUE", "A2A_PUSH_QUEUE"):
        with pytest.raises(SettingsError, match=f"{variable}: expected a Cloud Tasks queue id"):
            Settings.from_env({variable: queue})
    with pytest.raises(DeployError, match="QUEUES_WORK_NAME"):
        load(DEFAULT_FILE, {"QUEUES_WORK_NAME": queue})


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("GOOGLE_CLOUD_PROJECT", "p"),  # too short to be a project id
        ("GOOGLE_CLOUD_PROJECT", "My-Project"),
        ("GOOGLE_CLOUD_PROJECT", "demo-project/locations/x"),
        ("GOOGLE_CLOUD_PROJECT", "demo-project "),
        ("GOOGLE_CLOUD_PROJECT", "1demo-project"),
        ("GOOGLE_CLOUD_PROJECT", "demo-project-"),
        ("A2A_REGION", "us-central1/queues/other"),
        ("A2A_REGION", "US-CENTRAL1"),
    ],
)
def test_the_project_and_region_are_what_resource_paths_can_hold(variable: str, value: str) -> None:
    with pytest.raises(SettingsError, match=f"{variable}: expected a Google Cloud"):
        Settings.from_env({variable: value})


@pytest.mark.parametrize(
    ("project", "region"),
    [("demo-a2a-functions", "local"), ("example.com:my-project", "europe-west1")],
)
def test_real_project_ids_and_regions_are_kept(project: str, region: str) -> None:
    settings = Settings.from_env({"GOOGLE_CLOUD_PROJECT": project, "A2A_REGION": region})
    assert (settings.project, settings.region) == (project, region)


def test_every_problem_is_named_at_once() -> None:
    env = {"A2A_MAX_BATCH": "many", "A2A_CONSOLE": "maybe", "A2A_LEASE_SECONDS": "nan"}
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(env)
    assert all(f"{variable}: expected" in str(refused.value) for variable in env)


def test_secrets_stay_out_of_repr_and_errors() -> None:
    settings = Settings(push_signing_key="PEM-SECRET", log_owner_key="OWNER-SECRET")
    assert "SECRET" not in repr(settings)
    with pytest.raises(SettingsError, match="A2A_API_KEYS") as refused:
        Settings.from_env({"A2A_API_KEYS": "alice:my-plaintext-key"})
    assert "my-plaintext-key" not in str(refused.value)


# Hostile values: whatever text a variable holds, start-up either goes on with a value its
# rule accepts or stops naming the variable; nothing else escapes (an OverflowError from a
# huge number, a TypeError, a NaN or an infinity kept as a duration).
FIELD = {variable: name for name, variable in ENVIRONMENT.items()}
COUNTS = {v: r for f, v in ENVIRONMENT.items() if isinstance(r := _RULES[f], _Count)}
SECONDS = {v: r for f, v in ENVIRONMENT.items() if isinstance(r := _RULES[f], _Seconds)}


def in_code(variable: str, value: object) -> Settings:
    """Settings with `variable`'s field given `value` in code."""
    values: dict[str, Any] = {FIELD[variable]: value}
    return Settings(**values)


NUMBER_TEXT = st.one_of(
    st.text(),
    st.integers().map(str),
    st.floats().map(repr),
    st.sampled_from(["1e400", "-0", "9" * 5000, "1_000", "\u0661", " 7 ", "0x10", "10.0"]),
)


@given(st.sampled_from(sorted(FIELD)), NUMBER_TEXT)
def test_any_text_in_any_variable_is_a_value_or_an_error_naming_it(
    variable: str, text: str
) -> None:
    try:
        settings = Settings.from_env({variable: text})
    except SettingsError as error:
        assert variable in str(error)
    else:  # what was kept is a value the rules keep as it is
        kept = getattr(settings, FIELD[variable])
        assert getattr(in_code(variable, kept), FIELD[variable]) == kept


@given(st.sampled_from(sorted(COUNTS)), st.integers(min_value=-(2**70), max_value=2**70))
def test_a_count_is_kept_exactly_within_its_bounds(variable: str, number: int) -> None:
    rule = COUNTS[variable]
    makers: tuple[Callable[[], Settings], ...] = (
        lambda: Settings.from_env({variable: str(number)}),
        lambda: in_code(variable, number),
    )
    for make in makers:
        if rule.low <= number <= rule.high:
            assert getattr(make(), FIELD[variable]) == number
        else:
            with pytest.raises(SettingsError, match=f"{variable}: expected a whole number from"):
                make()


@given(
    st.sampled_from(sorted(SECONDS)),
    st.floats() | st.integers(min_value=-(10**400), max_value=10**400),
)
def test_seconds_are_finite_and_at_most_a_month(variable: str, number: float) -> None:
    low_ok = number >= 0 if SECONDS[variable].zero else number > 0
    makers: tuple[Callable[[], Settings], ...] = (
        lambda: Settings.from_env({variable: repr(number)}),
        lambda: in_code(variable, number),
    )
    for make in makers:
        if low_ok and number <= MAX_SECONDS:  # NaN fails both comparisons
            assert getattr(make(), FIELD[variable]) == float(number)
        else:
            with pytest.raises(SettingsError, match=f"{variable}: expected a number of seconds"):
                make()


@given(st.lists(st.integers(min_value=-(2**20), max_value=2**20), min_size=1, max_size=5))
def test_webhook_ports_are_port_numbers(ports: list[int]) -> None:
    env = {"A2A_PUSH_ALLOWED_PORTS": ", ".join(map(str, ports))}
    if all(1 <= port <= 65535 for port in ports):
        assert Settings.from_env(env).push_allowed_ports == tuple(ports)
    else:
        with pytest.raises(SettingsError, match="A2A_PUSH_ALLOWED_PORTS: expected port numbers"):
            Settings.from_env(env)


NAME = st.text(st.characters(blacklist_characters=", ", blacklist_categories=["Z", "Cc"]))


@given(st.lists(NAME.filter(bool), max_size=5), st.sampled_from([",", " ", ", ", " ,  "]))
def test_a_list_is_its_names_whatever_separates_them(names: list[str], separator: str) -> None:
    env = {"A2A_PUSH_ALLOWED_HOSTS": separator.join(names), "A2A_AUDIENCE": ",".join(names)}
    settings = Settings.from_env(env)
    assert settings.push_allowed_hosts == settings.audience == tuple(names)


URLS = [*sorted(v for v in FIELD if v.endswith("_URL")), "A2A_OIDC_ISSUER"]
URL_TEXT = st.one_of(
    st.text(),
    st.text().map(lambda t: "https://" + t),
    st.text().map(lambda t: "http://host" + t),
    st.sampled_from(["http://[::1", "https://h:99999/", "https://h/a b", "ftp://h", "//h/p"]),
)


@given(st.sampled_from(URLS), URL_TEXT)
def test_a_url_is_kept_only_when_every_request_can_use_it(variable: str, url: str) -> None:
    """A URL that does not parse (`http://[::1`) once passed start-up and failed every request."""
    try:
        kept = getattr(in_code(variable, url), FIELD[variable])
    except SettingsError as error:
        assert f"{variable}: " in str(error)
        return
    parts = urlsplit(kept)
    assert parts.scheme in ("http", "https") and parts.hostname
    assert parts.port is None or 0 <= parts.port <= 65535
    assert kept.isascii() and kept.isprintable() and " " not in kept


def test_an_oidc_issuer_is_an_https_url_or_this_machine() -> None:
    assert Settings.from_env({"A2A_OIDC_ISSUER": "https://idp.example"}).oidc_issuer
    for local in ("http://127.0.0.1:9000/idp", "http://localhost/x", "http://[::1]:8080"):
        assert Settings.from_env({"A2A_OIDC_ISSUER": local}).oidc_issuer == local
    for remote in ("http://idp.example", "http://localhost.evil.example/", "http://localhost@x"):
        with pytest.raises(SettingsError, match="A2A_OIDC_ISSUER: the issuer must be an https://"):
            Settings.from_env({"A2A_OIDC_ISSUER": remote})


def test_the_deploy_and_the_functions_agree_on_the_retention_bound() -> None:
    days = str(MAX_RETENTION_DAYS)
    assert load(DEFAULT_FILE, {"RETENTION_DAYS": days}).retention_days == MAX_RETENTION_DAYS
    assert Settings.from_env({"A2A_RETENTION_DAYS": days}).retention_days == MAX_RETENTION_DAYS
    with pytest.raises(DeployError, match="RETENTION_DAYS"):
        load(DEFAULT_FILE, {"RETENTION_DAYS": str(MAX_RETENTION_DAYS + 1)})
    with pytest.raises(SettingsError, match="A2A_RETENTION_DAYS"):
        Settings.from_env({"A2A_RETENTION_DAYS": str(MAX_RETENTION_DAYS + 1)})
