"""Interop: the official JS SDK (npm @a2a-js/sdk) streams from a running `a2a` function.

The package is installed with npm once into .emulators/npm (gitignored) and reused
(`tests/system/npm.py`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Server
from tests.system.npm import npm_package

SCRIPT = Path(__file__).parent / "js" / "stream.mjs"


@pytest.fixture(scope="session")
def js_sdk() -> Path:
    """The folder where `node` finds @a2a-js/sdk 1.3 (installed on first use)."""
    return npm_package("@a2a-js/sdk", "1.3.0", "npm")


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
