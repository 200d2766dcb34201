"""Interop: the official JS SDK (npm @a2a-js/sdk) streams from a running `a2a` function.

The package is installed with npm once into .emulators/npm (gitignored) and reused. Without
node and npm the test fails with the fix: it is never skipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, Server

JS_SDK = "@a2a-js/sdk@1.3.0"
CACHE = ROOT / ".emulators" / "npm"
SCRIPT = Path(__file__).parent / "js" / "stream.mjs"


@pytest.fixture(scope="session")
def js_sdk() -> Path:
    """The folder where `node` finds @a2a-js/sdk (installed on first use)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(
            "node and npm are needed for the JS interop test: install Node.js 20 or newer "
            "(apt-get install nodejs npm, or https://nodejs.org)",
            pytrace=False,
        )
    installed = CACHE / "node_modules" / "@a2a-js" / "sdk" / "package.json"
    if not installed.exists() or json.loads(installed.read_text())["version"] != "1.3.0":
        CACHE.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(CACHE), JS_SDK],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if result.returncode != 0:
            pytest.fail(
                f"npm install {JS_SDK} failed (run it by hand: npm install --prefix {CACHE} "
                f"{JS_SDK}):\n{result.stderr[-2000:]}",
                pytrace=False,
            )
    return CACHE


def test_js_client_streams_and_subscribes(server: Server, js_sdk: Path) -> None:
    script = js_sdk / SCRIPT.name  # next to node_modules, where ESM imports resolve
    shutil.copyfile(SCRIPT, script)
    result = subprocess.run(
        ["node", str(script), server.url], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["stream"], e["case"], e["state"]) for e in lines] == [
        ("send", "task", "TASK_STATE_WORKING"),
        ("send", "statusUpdate", "TASK_STATE_INPUT_REQUIRED"),
        ("subscribe", "task", "TASK_STATE_INPUT_REQUIRED"),
        ("subscribe", "statusUpdate", "TASK_STATE_WORKING"),
        ("subscribe", "artifactUpdate", None),
        ("subscribe", "statusUpdate", "TASK_STATE_COMPLETED"),
    ]
    assert len({e["id"] for e in lines}) == 1
