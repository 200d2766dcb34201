"""emulator/browser.py: Debian's chromium is found, installed by apt-get as root, or named as
the fix (never silently absent). A fake apt-get on PATH records what setup ran."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from emulator._process import EmulatorError
from emulator.browser import ensure_chromium, find_chromium

FAKE_APT = """#!/bin/sh
echo "$*" >> {log}
if [ "$1" = install ] && [ -e {works} ]; then
  printf '#!/bin/sh\\n' > {bin}/chromium && /bin/chmod +x {bin}/chromium
  exit 0
fi
[ "$1" = update ] && exit 0
echo "E: Unable to locate package chromium" >&2
exit 100
"""


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with a fake apt-get and no chromium."""
    folder = tmp_path / "bin"
    folder.mkdir()
    apt = folder / "apt-get"
    works = tmp_path / "apt-works"
    apt.write_text(FAKE_APT.format(log=tmp_path / "apt.log", works=works, bin=folder))
    apt.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    return folder


def apt_calls(bin_dir: Path) -> list[str]:
    log = bin_dir.parent / "apt.log"
    return log.read_text().splitlines() if log.exists() else []


def test_missing_chromium_names_the_fix(bin_dir: Path) -> None:
    with pytest.raises(EmulatorError, match=r"apt-get install -y chromium"):
        find_chromium()


def test_not_root_installs_nothing_and_names_the_fix(bin_dir: Path) -> None:
    with pytest.raises(EmulatorError, match=r"sudo apt-get install -y chromium"):
        ensure_chromium(None, is_root=lambda: False)
    assert apt_calls(bin_dir) == []


def test_root_installs_it_with_apt_get(bin_dir: Path) -> None:
    (bin_dir.parent / "apt-works").touch()
    out = io.StringIO()
    assert ensure_chromium(out, is_root=lambda: True) == str(bin_dir / "chromium")
    assert apt_calls(bin_dir) == ["install -y --no-install-recommends chromium"]
    assert "installing Debian's chromium" in out.getvalue()


def test_a_failed_install_reads_the_lists_tries_again_then_says_why(bin_dir: Path) -> None:
    with pytest.raises(EmulatorError) as failed:
        ensure_chromium(None, is_root=lambda: True)
    assert apt_calls(bin_dir) == [
        "install -y --no-install-recommends chromium",
        "update",
        "install -y --no-install-recommends chromium",
    ]
    assert "Unable to locate package chromium" in str(failed.value)
    assert "sudo apt-get install -y chromium" in str(failed.value)


def test_found_chromium_needs_no_apt(bin_dir: Path) -> None:
    chromium = bin_dir / "chromium"
    chromium.write_text("#!/bin/sh\n")
    chromium.chmod(0o755)
    assert ensure_chromium(None, is_root=lambda: True) == str(chromium)
    assert apt_calls(bin_dir) == []
