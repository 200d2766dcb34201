"""The staging folder is a deployable function: functions-framework serves it on its own.

The server runs isolated: `python -I -S` (no PYTHONPATH, no .pth files, so no editable install
of the project), cwd = the stage, and only the installed packages added to the path. `functions`
and `shared` can only come from the staged copy, as in the cloud.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest
import requests

from infra.stage import StageError, pinned_requirements, stage
from tests.conftest import wait_until
from tests.first_send import SERVE_FIRST_SEND
from tests.infra.conftest import REAL_ROOT

CARD = "/.well-known/agent-card.json"
# Puts the installed packages (argv[1]) on the path, then runs the functions-framework CLI.
BOOT = (
    "import runpy, sys; sys.path.append(sys.argv.pop(1)); "
    "runpy.run_module('functions_framework', run_name='__main__', alter_sys=True)"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_and_get_card(
    staged: Path, env: dict[str, str] | None = None, target: str = "a2a", path: str = CARD
) -> requests.Response:
    """Serve the staged folder in a fresh interpreter; GET its card, or `path` (a2a), or POST
    an empty job without a token (worker, deliver)."""
    port = free_port()
    clean = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    command = [sys.executable, "-I", "-S", "-c", BOOT, sysconfig.get_paths()["purelib"]]
    command += [f"--target={target}", f"--source={staged / 'main.py'}", f"--port={port}"]
    command += ["--host=127.0.0.1"]
    with subprocess.Popen(
        command,
        cwd=staged,
        env={**clean, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as server:
        answers: list[requests.Response] = []

        def answered() -> bool:
            if server.poll() is not None:
                output = server.stdout.read() if server.stdout else ""
                pytest.fail(f"the staged function did not start:\n{output}")
            try:
                if target == "a2a":
                    answers.append(requests.get(f"http://127.0.0.1:{port}{path}", timeout=2))
                else:
                    answers.append(requests.post(f"http://127.0.0.1:{port}/", data="{}", timeout=5))
            except requests.ConnectionError:
                return False
            return True

        try:
            wait_until(answered, 20, lambda: "the staged function did not answer within 20 s")
            return answers[0]
        finally:
            server.terminate()
            server.wait(timeout=10)


def test_staged_fake_repo_serves_its_card(fake_repo: Path, tmp_path: Path) -> None:
    staged = stage(fake_repo, "a2a", tmp_path / "stage" / "a2a", "functions.handlers.sample")

    assert (staged.path / "functions" / "main.py").is_file()
    assert (staged.path / "shared" / "card.py").is_file()
    assert "from functions.main import a2a" in (staged.path / "main.py").read_text()
    response = serve_and_get_card(staged.path)
    assert response.status_code == 200
    assert response.json()["name"] == "staged-fake"


def test_staged_real_repo_serves_its_card(tmp_path: Path) -> None:
    """Stages this checkout's functions/ and shared/: fails until they exist on this branch."""
    staged = stage(REAL_ROOT, "a2a", tmp_path / "a2a", "functions.handlers.sample")
    env = {"A2A_BACKEND": "memory", "A2A_HANDLER": "functions.handlers.sample"}
    response = serve_and_get_card(staged.path, env)
    assert response.status_code == 200
    assert response.json()["name"]


def test_staged_real_repo_serves_the_console_when_asked(tmp_path: Path) -> None:
    """The console's static files travel with `shared` and load from the stage."""
    staged = stage(REAL_ROOT, "a2a", tmp_path / "a2a", "functions.handlers.sample")
    env = {"A2A_BACKEND": "memory", "A2A_CONSOLE": "true"}
    response = serve_and_get_card(staged.path, env, path="/console/console.js")
    assert response.status_code == 200
    assert response.content == (REAL_ROOT / "shared" / "console" / "console.js").read_bytes()
    assert "Content-Security-Policy" in response.headers


@pytest.mark.parametrize("target", ["worker", "deliver"])
def test_staged_real_repo_serves_the_private_functions(tmp_path: Path, target: str) -> None:
    """Each private function loads from its staged folder and refuses a call without a
    Cloud Tasks token before doing anything."""
    staged = stage(REAL_ROOT, target, tmp_path / target, "functions.handlers.sample")
    env = {
        "A2A_BACKEND": "memory",
        "A2A_HANDLER": "functions.handlers.sample",
        "A2A_TASKS_SERVICE_ACCOUNT": "a2a-tasks@p.iam.gserviceaccount.com",
    }
    # Its own URL, as deployed: the audience of the tokens it accepts.
    if target == "worker":
        env |= {
            "A2A_WORKER_URL": "https://worker.example",
            "A2A_BACKEND": "firestore",
            "GOOGLE_CLOUD_PROJECT": "demo-project",
            "A2A_REGION": "us-central1",
            "FIRESTORE_EMULATOR_HOST": "127.0.0.1:9",  # never reached: the token comes first
        }
    else:
        env["A2A_DELIVER_URL"] = "https://deliver.example"
    response = serve_and_get_card(staged.path, env, target)
    assert response.status_code == 401
    assert f"only Cloud Tasks may call the {target}" in response.json()["error"]


def test_requirements_pin_what_is_installed_here() -> None:
    lines = pinned_requirements(REAL_ROOT / "pyproject.toml").splitlines()
    pins = dict(line.split("==") for line in lines if not line.startswith("#"))
    assert pins["functions-framework"] == "3.10.2"
    assert pins["google-cloud-firestore"] == metadata.version("google-cloud-firestore")
    # Dependencies of dependencies are pinned too: the cloud resolves nothing on its own.
    assert pins["Werkzeug"] == metadata.version("werkzeug")
    assert "pytest" not in pins, "dev tools are not deployed"


def test_staging_is_reproducible_and_tracks_changes(fake_repo: Path, tmp_path: Path) -> None:
    first = stage(fake_repo, "worker", tmp_path / "one", "functions.handlers.sample")
    second = stage(fake_repo, "worker", tmp_path / "two", "functions.handlers.sample")
    assert first.source_hash == second.source_hash
    (fake_repo / "shared" / "card.py").write_text("CARD = {}\n")
    third = stage(fake_repo, "worker", tmp_path / "one", "functions.handlers.sample")
    assert third.source_hash != first.source_hash


# Imports the staged `a2a` entry point in a fresh interpreter (-I -S: the stage and the installed
# packages only), serves its first request (a blocking send: the app's build loads more, such as
# the embedded store) and prints which of the stage's modules were compiled from source.
IMPORT_COUNTING_COMPILES = """
import json, sys
from importlib import _bootstrap_external as external
compiled = []
to_code = external.SourceLoader.source_to_code
def counting(self, data, path, *args, **kwargs):
    compiled.append(path)
    return to_code(self, data, path, *args, **kwargs)
external.SourceLoader.source_to_code = counting
sys.path[:0] = [sys.argv[1], sys.argv[2]]
MAIN = sys.argv[1] + "/main.py"
%s
assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer
print(json.dumps([path for path in compiled if path.startswith(sys.argv[1])]))
"""


def test_staged_functions_ship_bytecode_that_survives_new_file_times(tmp_path: Path) -> None:
    staged = stage(REAL_ROOT, "a2a", tmp_path / "a2a", "functions.handlers.echo")
    ignored = (staged.path / ".gcloudignore").read_text().splitlines()
    assert [line for line in ignored if not line.startswith("#")] == [".gcloudignore"]
    for path in staged.path.rglob("*"):
        os.utime(path, (1_000_000_000, 1_000_000_000))  # as an upload may leave them
    packages = sysconfig.get_paths()["purelib"]
    out = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-B",
            "-c",
            IMPORT_COUNTING_COMPILES % SERVE_FIRST_SEND,
            str(staged.path),
            packages,
        ],
        cwd=staged.path,
        env={"A2A_BACKEND": "memory", "A2A_HANDLER": "functions.handlers.echo", "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"
    modules = list((staged.path / "shared").rglob("*.py"))
    assert len(list((staged.path / "shared").rglob("__pycache__/*.pyc"))) == len(modules)


def test_staging_names_what_is_missing(fake_repo: Path, tmp_path: Path) -> None:
    with pytest.raises(StageError, match=r"handler module functions\.handlers\.nope"):
        stage(fake_repo, "a2a", tmp_path / "a", "functions.handlers.nope")
    (fake_repo / "shared" / "card.py").unlink()
    (fake_repo / "shared" / "__init__.py").unlink()
    (fake_repo / "shared").rmdir()
    with pytest.raises(StageError, match="shared is missing"):
        stage(fake_repo, "a2a", tmp_path / "a", "functions.handlers.sample")
