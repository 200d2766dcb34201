"""Cold start: the embedded backend's import path stays free of the Google client libraries."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

HEAVY = (
    "google.cloud.firestore",
    "google.cloud.tasks",
    "google.api_core",
    "grpc",
    "google.auth",
    "jwt",
    "cryptography",
)


def test_importing_main_on_the_embedded_backend_loads_no_google_client() -> None:
    code = (
        "import sys, json, functions.main; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"A2A_BACKEND": "memory", "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == []


def test_bad_settings_stop_start_up_naming_the_variable() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import functions.main"],
        check=False,
        cwd=ROOT,
        env={"A2A_BACKEND": "mongodb", "PATH": ""},
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0
    assert "A2A_BACKEND" in out.stderr
    assert "Traceback" in out.stderr  # start-up errors go to the log; no request is served
