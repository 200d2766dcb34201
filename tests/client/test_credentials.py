"""`a2a --google`: an ID token from Application Default Credentials, else from gcloud; when
neither has one, the error says what to run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from shared.client.credentials import google_id_token
from shared.client.errors import ClientError


@pytest.fixture
def no_adc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No usable Application Default Credentials (a missing key file) and an empty PATH."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def fake_gcloud(bin_dir: Path, body: str) -> None:
    script = bin_dir / "gcloud"
    script.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    script.chmod(0o755)


def test_gcloud_gives_the_token_when_adc_has_none(no_adc: Path) -> None:
    fake_gcloud(no_adc, "assert sys.argv[1:] == ['auth', 'print-identity-token']\nprint('eyJ.x.y')")
    assert google_id_token("https://agent.example") == "eyJ.x.y"


def test_without_any_credentials_the_error_says_what_to_run(no_adc: Path) -> None:
    with pytest.raises(ClientError) as caught:
        google_id_token("https://agent.example")
    message = str(caught.value)
    assert "gcloud is not on PATH" in message and "gcloud auth login" in message
    fake_gcloud(no_adc, "print('ERROR: no credentialed accounts', file=sys.stderr)\nsys.exit(1)")
    with pytest.raises(ClientError, match="gcloud: ERROR: no credentialed accounts"):
        google_id_token("https://agent.example")
    assert os.environ["PATH"] == str(no_adc)
