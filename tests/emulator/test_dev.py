"""`make dev`'s wiring (emulator/dev.py): each function's environment is the deploy's, with
local URLs, and makes valid settings; the developer's variables win but never over the
wiring. The whole run is tested from a fresh clone in tests/system/test_make_dev.py."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from emulator._process import REPO_ROOT, EmulatorError
from emulator.dev import (
    Dev,
    _parser,
    changes,
    check_host,
    find_handler,
    function_envs,
    local_url,
    ports_from,
)
from infra.plan import WIRING, function_env
from infra.settings import Settings as Deploy
from infra.settings import load
from shared.settings import Settings
from tests.conftest import free_port

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


def test_every_port_follows_port_and_dev_args_move_one() -> None:
    assert ports_from(_parser().parse_args([])) == {
        "a2a": 8080,
        "worker": 8081,
        "deliver": 8082,
        "tasks": 8083,  # one block of six ports (issue 37, item 7: it was PORT+942)
        "firestore": 8085,  # the Firestore emulator's own default, as before
    }
    assert ports_from(_parser().parse_args(["--port", "8180", "--tasks-port", "9500"])) == {
        "a2a": 8180,
        "worker": 8181,
        "deliver": 8182,
        "tasks": 9500,
        "firestore": 8185,
    }


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--port", "65533"], "port 65536 (for tasks, PORT=65533 + 3) is not a port"),
        (["--port", "9000", "--deliver-port", "9001"], "port 9001 is given to both worker and"),
    ],
)
def test_ports_out_of_range_or_shared_are_refused_by_name(argv: list[str], named: str) -> None:
    with pytest.raises(EmulatorError, match=re.escape(named)):
        ports_from(_parser().parse_args(argv))


def test_the_developers_pythonpath_follows_the_checkout_and_one_log_key_is_shared(
    deploy: Deploy,
) -> None:
    envs = function_envs(deploy, PORTS, EMULATORS, {"PYTHONPATH": "/my/agents:/more"})
    for env in envs.values():
        assert env["PYTHONPATH"] == f"{REPO_ROOT}:/my/agents:/more"
    keys = {env["A2A_LOG_OWNER_KEY"] for env in envs.values()}
    assert len(keys) == 1 and len(keys.pop()) == 64  # one owner, one tag on all three
    mine = function_envs(deploy, PORTS, EMULATORS, {"A2A_LOG_OWNER_KEY": "k"})
    assert {env["A2A_LOG_OWNER_KEY"] for env in mine.values()} == {"k"}


def test_the_handler_is_found_where_the_functions_look(tmp_path: Path) -> None:
    (tmp_path / "far_agent.py").write_text("raise SystemExit('never run by the lookup')\n")
    assert find_handler("far_agent", f"{REPO_ROOT}:{tmp_path}") == tmp_path / "far_agent.py"
    assert find_handler("functions.handlers.echo", str(REPO_ROOT)) == (
        REPO_ROOT / "functions" / "handlers" / "echo.py"
    )
    with pytest.raises(EmulatorError, match="far_agent is not on the functions' PYTHONPATH"):
        find_handler("far_agent", str(REPO_ROOT))
    with pytest.raises(EmulatorError, match=r"no\.such is not on"):
        find_handler("no.such", str(REPO_ROOT))
    # One line, with the closest handler module there is (issue 37, item 3).
    with pytest.raises(EmulatorError) as mistyped:
        find_handler("functions.handlers.unit", str(REPO_ROOT))
    assert "\n" not in str(mistyped.value) and not str(mistyped.value).startswith("error")
    assert "the closest handler module there is functions.handlers.echo" in str(mistyped.value)
    assert "(PYTHONPATH=/my/agents make dev HANDLER=my_agent)" in str(mistyped.value)


def test_a_place_it_cannot_listen_on_is_said_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("A2A_AUTH", "api-key")  # a wider HOST is allowed: the address is not
    out = io.StringIO()
    args = _parser().parse_args(["--host", "203.0.113.7", "--port", str(free_port())])
    assert Dev(args, out).run() == 1
    said = out.getvalue()
    assert "error: cannot listen on 203.0.113.7:" in said and "(for a2a)" in said, said
    assert "emulators ready" not in said and "Traceback" not in said


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20"])
def test_a_wider_address_needs_credentials(host: str) -> None:
    with pytest.raises(EmulatorError, match=f"HOST={re.escape(host)} would serve the agent"):
        check_host(host, {})
    with pytest.raises(EmulatorError, match="set A2A_AUTH=api-key and A2A_API_KEYS"):
        check_host(host, {"A2A_AUTH": "none"})
    check_host(host, {"A2A_AUTH": "api-key"})
    for loopback in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        check_host(loopback, {})


def test_a_changed_handler_outside_the_checkout_is_named_by_its_path(tmp_path: Path) -> None:
    outside = tmp_path / "far_agent.py"
    assert changes({outside: 1.0}, {outside: 2.0}) == [str(outside)]
