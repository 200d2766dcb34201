"""The client CLI (shared/client and the `cli` extra) is never deployed with the functions."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from infra.stage import pinned_requirements, stage
from tests.infra.conftest import REAL_ROOT


def test_staging_leaves_the_cli_and_its_dependencies_out(tmp_path: Path) -> None:
    assert (REAL_ROOT / "shared" / "client" / "cli.py").is_file()  # there is something to leave
    staged = stage(REAL_ROOT, "a2a", tmp_path / "a2a", "functions.handlers.sample")
    assert (staged.path / "shared" / "app.py").is_file()
    assert not (staged.path / "shared" / "client").exists()
    pyproject = tomllib.loads((REAL_ROOT / "pyproject.toml").read_text())
    cli = {
        canonicalize_name(Requirement(r).name)
        for r in pyproject["project"]["optional-dependencies"]["cli"]
    }
    assert cli == {"httpx", "httpx-sse"}
    text = (staged.path / "requirements.txt").read_text()
    pinned = {canonicalize_name(line.split("==")[0]) for line in text.splitlines() if "==" in line}
    assert pinned and not cli & pinned
    assert text == pinned_requirements(REAL_ROOT / "pyproject.toml")
