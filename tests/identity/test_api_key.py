"""A2A_AUTH=api-key: the setting holds hashes; keys are compared by hash, in constant time."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.identity import AuthenticationError, Principal
from shared.identity.__main__ import main
from shared.identity.api_key import ApiKeys, hashed, new_key, parse
from shared.settings import Settings, SettingsError
from tests.conftest import ROOT

ALICE_KEY = "alice-key-" + "a" * 32
BOB_KEY = "bob-key-" + "b" * 32
ENTRIES = f"alice:{hashed(ALICE_KEY)}, bob:{hashed(BOB_KEY)}"


def keys() -> ApiKeys:
    return ApiKeys(parse(ENTRIES), "X-API-Key")


def test_the_right_key_is_its_owner_and_nothing_else_is() -> None:
    assert keys().authenticate({"X-API-Key": ALICE_KEY}.get) == Principal("alice", True)
    assert keys().authenticate({"X-API-Key": BOB_KEY}.get).owner == "bob"
    for presented in (None, "", ALICE_KEY + "x", ALICE_KEY[:-1], hashed(ALICE_KEY)):
        with pytest.raises(AuthenticationError) as refused:
            keys().authenticate({"X-API-Key": presented}.get)
        assert refused.value.challenge == 'ApiKey header="X-API-Key"'
        assert "X-API-Key" in str(refused.value)


@given(st.text(max_size=2000))
def test_any_header_value_is_refused_cleanly(presented: str) -> None:
    with pytest.raises(AuthenticationError):
        keys().authenticate({"X-API-Key": presented}.get)


def test_a_plaintext_key_in_the_setting_stops_start_up_without_repeating_it() -> None:
    digest = hashed(ALICE_KEY)
    for value in (
        "alice:s3cret-key",
        "alice:sha256:abc",
        digest,
        "alice",
        f"a b:{digest}",
        f"{'x' * 300}:{digest}",
    ):
        with pytest.raises(SettingsError) as refused:
            Settings.from_env({"A2A_AUTH": "api-key", "A2A_API_KEYS": value})
        message = str(refused.value)
        assert "A2A_API_KEYS" in message and "owner:sha256:<64 hex digits>" in message
        assert "python -m shared.identity" in message
        assert "s3cret" not in message
    with pytest.raises(SettingsError, match="A2A_API_KEYS"):
        Settings.from_env({"A2A_AUTH": "api-key"})


def test_no_hash_is_printable_through_the_settings() -> None:
    settings = Settings.from_env({"A2A_AUTH": "api-key", "A2A_API_KEYS": ENTRIES})
    assert settings.api_keys == {hashed(ALICE_KEY): "alice", hashed(BOB_KEY): "bob"}
    for shown in (repr(settings), str(settings)):
        assert hashed(ALICE_KEY)[7:] not in shown
        assert "api_keys" not in shown


def test_new_key_prints_an_entry_its_key_opens(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new-key", "carol"]) == 0
    out, err = capsys.readouterr()
    key = err.strip().rsplit(" ", 1)[1]
    assert len(key) >= 32 and key != new_key()
    settings = Settings.from_env({"A2A_AUTH": "api-key", "A2A_API_KEYS": out.strip()})
    owner = ApiKeys(settings.api_keys, "X-API-Key").authenticate({"X-API-Key": key}.get)
    assert owner.owner == "carol"


def test_hash_key_reads_the_key_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(ALICE_KEY + "\n"))
    assert main(["hash-key", "alice"]) == 0
    assert capsys.readouterr().out.strip() == f"alice:{hashed(ALICE_KEY)}"
    monkeypatch.setattr(sys, "stdin", io.StringIO("short\n"))
    with pytest.raises(SystemExit):
        main(["hash-key", "alice"])
    for owner in ("a,b", "a:b", ""):
        with pytest.raises(SystemExit):
            main(["new-key", owner])


def test_the_command_runs_as_a_module() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "shared.identity", "hash-key", "alice"],
        input=ALICE_KEY,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == f"alice:{hashed(ALICE_KEY)}"
