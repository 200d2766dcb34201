"""Fixtures for the deploy tests: a fake gcloud on PATH, a small repository to stage, settings."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.settings import DEFAULT_FILE, Settings, load
from tests.infra.fake_gcloud import FakeGcloud

HERE = Path(__file__).parent
REAL_ROOT = HERE.parent.parent
PROJECT = "demo-project"

FAKE_MAIN = '''"""Entry points of a fake repository, standing in for functions/main.py."""

import functions_framework

from shared.card import CARD


@functions_framework.http
def a2a(request):
    if request.path == "/.well-known/agent-card.json":
        return CARD
    return {"error": "not found"}, 404


@functions_framework.http
def worker(request):
    return "", 204


@functions_framework.http
def deliver(request):
    return "", 204
'''


@pytest.fixture
def fake_gcloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeGcloud:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "gcloud"
    # -IS: the fake needs only the standard library and starts faster without site.
    script.write_text(f"#!{sys.executable} -IS\n" + (HERE / "fake_gcloud.py").read_text())
    script.chmod(0o755)
    fake = FakeGcloud(tmp_path / "gcloud.log", tmp_path / "gcloud-state.json")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GCLOUD_LOG", str(fake.log))
    monkeypatch.setenv("FAKE_GCLOUD_STATE", str(fake.state))
    monkeypatch.delenv("FAKE_GCLOUD_FAIL", raising=False)
    monkeypatch.delenv("DRY_RUN", raising=False)
    return fake


def build_fake_repo(root: Path) -> Path:
    """A minimal repository with the layout the stage expects and an `a2a` that serves a card."""
    (root / "functions" / "handlers").mkdir(parents=True)
    (root / "functions" / "main.py").write_text(FAKE_MAIN)
    (root / "functions" / "handlers" / "sample.py").write_text('"""A handler."""\n')
    (root / "shared").mkdir()
    (root / "shared" / "__init__.py").write_text('"""The library."""\n')
    (root / "shared" / "card.py").write_text(
        '"""The card."""\n\nCARD = {"name": "staged-fake", "capabilities": {}}\n'
    )
    (root / "pyproject.toml").write_text((REAL_ROOT / "pyproject.toml").read_text())
    return root


@pytest.fixture
def fake_repo(tmp_path: Path) -> Path:
    return build_fake_repo(tmp_path / "repo")


@pytest.fixture
def settings() -> Settings:
    return load(DEFAULT_FILE, {"PROJECT": PROJECT})


@pytest.fixture
def project_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("PROJECT", PROJECT)
    yield
