"""A short soak (60 s, a fixed seed) run whole, as `make soak` runs it: its ledger is clean.

It took 288 s on the shared 2-core machine (load average ~16: the stack's start, the load,
the settling, the ledger), more than the whole suite's 5-minute budget, so it runs only when
SOAK_IN_SUITE=1 asks (a CI job of its own); `make soak` is the full one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = [
    pytest.mark.emulator,
    pytest.mark.skipif(
        os.environ.get("SOAK_IN_SUITE") != "1", reason="a 60 s soak: SOAK_IN_SUITE=1 runs it"
    ),
]


@pytest.mark.timeout(900)
def test_a_short_soak_has_a_clean_ledger(tmp_path: object) -> None:
    env = {**os.environ, "SOAK_SECONDS": "60", "SOAK_SEED": "27", "SOAK_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.soak"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=880,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    assert "ledger: clean" in done.stdout
