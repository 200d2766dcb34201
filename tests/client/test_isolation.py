"""The functions never load the client: no library module imports it, and importing the
entry points loads neither it nor its HTTP stack."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT
from tests.test_imports import graph


def test_no_library_module_imports_the_client() -> None:
    edges = graph()
    assert "shared.client.cli" in edges  # the walk sees the client
    importers = sorted(
        module
        for module, imported in edges.items()
        if not module.startswith("shared.client")
        and any(m.startswith("shared.client") for m in imported)
    )
    assert importers == []


def test_the_entry_points_load_no_client_code() -> None:
    code = (
        "import sys, json, functions.main; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('httpx', 'httpx_sse') or m.startswith('shared.client'))))"
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
