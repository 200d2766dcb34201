"""Deploying an extra: `extras` in deploy.toml's [functions] (FUNCTIONS_EXTRAS) pins the named
optional dependencies into each function's requirements.txt, at the versions installed here;
an extra the project lacks, or one that never deploys (the CLI's, the test tools'), is an
error naming what can be deployed."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from infra.settings import DEFAULT_FILE, SettingsError, load
from infra.stage import StageError, pinned_requirements, stage
from tests.infra.conftest import REAL_ROOT

PYPROJECT = REAL_ROOT / "pyproject.toml"


def pins(text: str) -> dict[str, str]:
    return dict(line.split("==") for line in text.splitlines() if "==" in line)


def test_no_extra_by_default_and_the_named_ones_pinned_when_asked() -> None:
    assert load(DEFAULT_FILE, {}).functions.extras == ()
    plain = pins(pinned_requirements(PYPROJECT))
    # (google-api-core needs opentelemetry-api itself; the SDK and exporters are the extra's.)
    assert "opentelemetry-sdk" not in plain and "opentelemetry-exporter-gcp-trace" not in plain
    with_otel = pins(pinned_requirements(PYPROJECT, ["otel"]))
    assert with_otel["opentelemetry-sdk"] == metadata.version("opentelemetry-sdk")
    assert with_otel["opentelemetry-exporter-gcp-trace"] == metadata.version(
        "opentelemetry-exporter-gcp-trace"
    )
    # What they need comes too, and everything of the plain list stays as it was.
    assert with_otel["opentelemetry-api"] == metadata.version("opentelemetry-api")
    assert plain.items() <= with_otel.items()


def test_the_variable_names_the_extras_and_odd_names_are_refused() -> None:
    assert load(DEFAULT_FILE, {"FUNCTIONS_EXTRAS": "otel, adk"}).functions.extras == (
        "otel",
        "adk",
    )
    with pytest.raises(SettingsError, match="FUNCTIONS_EXTRAS"):
        load(DEFAULT_FILE, {"FUNCTIONS_EXTRAS": "otel;rm -rf"})


@pytest.mark.parametrize("extra", ["dev", "cli", "no-such-extra"])
def test_an_extra_that_cannot_deploy_is_refused_naming_those_that_can(extra: str) -> None:
    with pytest.raises(StageError, match=r"cannot be deployed: .* are .*otel"):
        pinned_requirements(PYPROJECT, [extra])


def test_a_staged_function_s_requirements_hold_the_extra(tmp_path: Path) -> None:
    staged = stage(REAL_ROOT, "worker", tmp_path / "worker", "functions.handlers.sample", ["otel"])
    text = (staged.path / "requirements.txt").read_text()
    assert "# With the extras: otel." in text
    assert "opentelemetry-sdk" in pins(text)
    plain = stage(REAL_ROOT, "worker", tmp_path / "plain", "functions.handlers.sample")
    assert plain.source_hash != staged.source_hash
