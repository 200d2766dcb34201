"""`make dev`'s wiring (emulator/dev.py): each function's environment is the deploy's, with
local URLs, and makes valid settings; the developer's variables win but never over the
wiring. The whole run is tested from a fresh clone in tests/system/test_make_dev.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator._process import REPO_ROOT
from emulator.dev import changes, function_envs, local_url
from infra.plan import WIRING, function_env
from infra.settings import Settings as Deploy
from infra.settings import load
from shared.settings import Settings

PORTS = {"a2a": 8080, "worker": 8081, "deliver": 8082}
EMULATORS = {
    "FIRESTORE_EMULATOR_HOST": "127.0.0.1:8085",
    "CLOUD_TASKS_EMULATOR_HOST": "127.0.0.1:9022",
    "CLOUD_TASKS_EMULATOR_SECRET": "s3cret",
    "GOOGLE_CLOUD_PROJECT": "demo-a2a-functions",
}


@pytest.fixture
def deploy() -> Deploy:
    return load(environ={"PROJECT": "demo-a2a-functions"})


def test_each_function_is_wired_as_deployed_with_local_urls(deploy: Deploy) -> None:
    envs = function_envs(deploy, PORTS, EMULATORS, {})
    for role, env in envs.items():
        deployed = function_env(deploy, role)
        for name in ("A2A_WORK_QUEUE", "A2A_PUSH_QUEUE", "A2A_TASKS_SERVICE_ACCOUNT", "THREADS"):
            assert env[name] == deployed[name], (role, name)
        for variable, target in WIRING[role].items():
            assert env[variable] == local_url(target, PORTS[target])
        assert env["A2A_BACKEND"] == "firestore"
        assert env["PYTHONPATH"] == str(REPO_ROOT)
        assert "A2A_AUTH" not in env and "A2A_AUDIENCE" not in env  # no caller identity asked
        assert env["A2A_PUSH_ALLOWED_HOSTS"] == "localhost,127.0.0.1"
        # What each function would read at start-up is a valid configuration.
        settings = Settings.from_env(env)
        assert settings.tasks_emulator_secret == "s3cret"
    assert envs["a2a"]["A2A_WORKER_URL"] == "http://127.0.0.1:8081/"
    assert envs["a2a"]["A2A_PUBLIC_URL"] == "http://localhost:8080/"
    assert envs["a2a"]["A2A_CONSOLE"] == "true"
    assert "A2A_CONSOLE" not in envs["worker"] and "A2A_CONSOLE" not in envs["deliver"]


def test_the_developers_settings_win_but_not_over_the_wiring(deploy: Deploy) -> None:
    mine = {
        "A2A_AUTH": "api-key",
        "A2A_API_KEYS": "ann:sha256:" + "0" * 64,
        "A2A_PUSH_ALLOWED_HOSTS": "",
        "A2A_WORKER_URL": "https://elsewhere.example/",
        "A2A_BACKEND": "memory",
        "PATH": "/nowhere",
    }
    envs = function_envs(deploy, PORTS, EMULATORS, mine)
    assert envs["a2a"]["A2A_AUTH"] == "api-key"
    assert envs["a2a"]["A2A_PUSH_ALLOWED_HOSTS"] == ""  # set, even empty: no loopback hosts
    assert envs["a2a"]["A2A_WORKER_URL"] == "http://127.0.0.1:8081/"
    assert envs["a2a"]["A2A_BACKEND"] == "firestore"
    assert "PATH" not in envs["a2a"]  # only A2A_* variables are taken from the developer
    assert Settings.from_env(envs["a2a"]).auth == "api-key"


def test_changes_name_added_removed_and_modified_files() -> None:
    root = REPO_ROOT
    before = {root / "shared" / "a.py": 1.0, root / "shared" / "b.py": 1.0}
    after = {root / "shared" / "b.py": 2.0, root / "functions" / "c.py": 1.0}
    assert changes(before, after) == [
        str(Path("functions") / "c.py"),
        str(Path("shared") / "a.py"),
        str(Path("shared") / "b.py"),
    ]
    assert changes(after, dict(after)) == []
