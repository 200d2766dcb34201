"""npm packages the interop tests run under node, installed on first use into a prefix under
`.emulators/` (gitignored) and reused. Without node and npm the tests fail with the fix: they
are never skipped."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT


def npm_package(name: str, version: str, prefix: str) -> Path:
    """The folder where `node` finds `name` at `version` (`.emulators/<prefix>`), installed
    there first when it is missing or another version."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(
            "node and npm are needed for the JS interop tests: install Node.js 20 or newer "
            "(apt-get install nodejs npm, or https://nodejs.org)",
            pytrace=False,
        )
    folder = ROOT / ".emulators" / prefix
    installed = folder / "node_modules" / name / "package.json"
    if installed.exists() and json.loads(installed.read_text())["version"] == version:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    package = f"{name}@{version}"
    argv = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), package]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        pytest.fail(
            f"npm install {package} failed (run it by hand: npm install --prefix {folder} "
            f"{package}):\n{result.stderr[-2000:]}",
            pytrace=False,
        )
    return folder
