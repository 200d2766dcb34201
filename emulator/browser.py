"""The headless browser the console's tests drive: Debian's `chromium`, found or installed.

Playwright drives it through `executable_path`; no browser is downloaded from anywhere else
(`playwright install` is never run). `python -m emulator setup` (so `make install`) installs the
package with apt-get where it is missing and this user may; elsewhere it names the command.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from typing import IO

from emulator._process import EmulatorError

PACKAGE = "chromium"
FIX = (
    "Fix: `sudo apt-get install -y chromium` (Debian's package; Playwright drives it, nothing "
    "is downloaded elsewhere), then `make install` again"
)


def find_chromium() -> str:
    """Chromium's executable, or EmulatorError naming the fix."""
    found = shutil.which(PACKAGE)
    if found is None:
        raise EmulatorError(
            "chromium was not found on PATH; the console's browser tests drive Debian's "
            f"headless Chromium. {FIX}"
        )
    return found


def ensure_chromium(
    out: IO[str] | None, *, is_root: Callable[[], bool] = lambda: os.geteuid() == 0
) -> str:
    """Chromium's executable, installed with apt-get first when missing (as root only)."""
    try:
        return find_chromium()
    except EmulatorError:
        apt = shutil.which("apt-get")
        if apt is None or not is_root():
            raise
    if out is not None:
        out.write("[browser] installing Debian's chromium with apt-get (about 400 MB)\n")
        out.flush()
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt, "install", "-y", "--no-install-recommends", PACKAGE]
    done = subprocess.run(install, env=environment, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        # A fresh machine may have no package lists yet: read them, then try once more.
        subprocess.run([apt, "update"], env=environment, capture_output=True, check=False)
        done = subprocess.run(install, env=environment, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        command = " ".join(install)
        raise EmulatorError(f"`{command}` failed (exit {done.returncode}):\n{tail}\n{FIX}")
    return find_chromium()
