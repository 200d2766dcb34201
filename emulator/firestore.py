"""The local Firestore emulator: find the jar, start Java directly, wait, reset, stop by PID.

Owns the official emulator's lifecycle for tests (`emulator.pytest_plugin`) and for manual use
(`python -m emulator`). Java is started directly rather than through `gcloud emulators`,
because killing that wrapper leaves Java running; we hold Java's own PID.
Only the standard library is imported, so this is cheap to import anywhere.
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from emulator._process import (
    STATE_DIR,
    Emulator,
    EmulatorError,
    free_port,
    launch,
    port_in_use,
)

JAR_ENV = "FIRESTORE_EMULATOR_JAR"
DEFAULT_JAR = Path(
    "/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar"
)
HOST_ENV = "FIRESTORE_EMULATOR_HOST"
MAIN_CLASS = "com.google.cloud.datastore.emulator.firestore.CloudFirestore"
# A "demo-" project id can never reach a real project, whatever credentials are around.
DEFAULT_PROJECT = "demo-a2a-functions"
DEFAULT_PORT = 8085
RESET_TRIES = 3  # a reset the emulator cancels is tried again (see FirestoreEmulator.reset)


def find_jar(env: Mapping[str, str] | None = None, default: Path = DEFAULT_JAR) -> Path:
    """The emulator jar: $FIRESTORE_EMULATOR_JAR if it exists, else the gcloud SDK's copy."""
    env = os.environ if env is None else env
    tried: list[str] = []
    configured = env.get(JAR_ENV)
    if configured:
        if Path(configured).is_file():
            return Path(configured)
        tried.append(f"${JAR_ENV}={configured} (no such file)")
    else:
        tried.append(f"${JAR_ENV} (not set)")
    if default.is_file():
        return default
    tried.append(f"{default} (no such file)")
    raise EmulatorError(
        "The Firestore emulator jar was not found. Looked at: "
        + "; ".join(tried)
        + ". Fix: run `gcloud components install cloud-firestore-emulator` "
        f"(or point ${JAR_ENV} at cloud-firestore-emulator.jar)."
    )


def find_java() -> str:
    """The java executable on PATH, or a clear error naming the fix."""
    java = shutil.which("java")
    if java is None:
        raise EmulatorError(
            "java was not found on PATH; the Firestore emulator needs Java 17 or newer. "
            "Fix: install a JRE (Debian: `apt-get install openjdk-17-jre-headless`)."
        )
    return java


# The emulator is always local: an $http_proxy of the machine must not see these calls.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http(method: str, url: str, timeout: float = 5.0) -> tuple[int, str]:
    req = urllib.request.Request(url, method=method)
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return int(resp.status), resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode(errors="replace")


@dataclass
class FirestoreEmulator(Emulator):
    """A running Firestore emulator that we started."""

    project: str = DEFAULT_PROJECT

    def env(self) -> dict[str, str]:
        """The environment variables a client (or a child process) needs."""
        return {HOST_ENV: self.address}

    def is_ready(self) -> bool:
        """True when the emulator answers GET / with Ok."""
        try:
            status, body = _http("GET", f"http://{self.address}/", timeout=1.0)
        except OSError:
            return False
        return status == 200 and body.strip() == "Ok"

    def reset(self, project: str | None = None) -> None:
        """Delete every document of the project's default database."""
        project = project or self.project
        url = f"http://{self.address}/emulator/v1/projects/{project}/databases/(default)/documents"
        for _ in range(RESET_TRIES):
            try:
                # The first reset after start-up runs on a cold JVM: over 4 s on a loaded
                # 2-core machine, where the default 5 s failed the first Firestore test of a
                # worker.
                status, body = _http("DELETE", url, timeout=30.0)
            except OSError as exc:
                raise EmulatorError(f"Firestore emulator reset failed ({url}): {exc}") from exc
            # 499 CANCELLED ("call already cancelled"): the emulator told a listener that its
            # client had just closed of the deletes, and gave up the whole reset for it.
            if status != 499:
                break
        if status != 200:
            raise EmulatorError(f"Firestore emulator reset answered {status}: {body[:500]}")


def start_firestore(
    port: int | None = None,
    *,
    host: str = "127.0.0.1",
    project: str = DEFAULT_PROJECT,
    timeout: float = 30.0,
    jar: Path | None = None,
    log_dir: Path | None = None,
) -> FirestoreEmulator:
    """Start the Firestore emulator and wait until it answers.

    port=None picks a free port. Raises EmulatorError when java or the jar is missing, the
    port is taken, or the emulator is not ready within timeout seconds (with its log tail).
    """
    java = find_java()
    jar = jar or find_jar()
    if port is None:
        port = free_port(host)
    elif port_in_use(host, port):
        raise EmulatorError(
            f"Port {host}:{port} is already in use; is another Firestore emulator running? "
            "Stop it, or choose another port."
        )
    log_path = (log_dir or STATE_DIR) / f"firestore-{port}.log"
    log_path.unlink(missing_ok=True)
    argv = [
        java,
        # English messages, whatever the machine's locale: the log is read by people.
        "-Duser.language=en",
        # The JVM's first compiler only, and its one-thread collector: an emulator lives for a
        # test session or a dev run, where the optimising compiler's work never pays back
        # (its CPU per task, 600 tasks after 200: 17.9 ms by default, 5.7 ms with these;
        # 5.5 vs 4.6 ms once warm, after 2,000), and two cores are shared with everything.
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-cp",
        str(jar),
        MAIN_CLASS,
        "start",
        f"--host={host}",
        f"--port={port}",
    ]
    return launch(
        lambda process: FirestoreEmulator(
            host=host,
            port=port,
            pid=process.pid,
            log_path=log_path,
            project=project,
            process=process,
        ),
        argv,
        log_path,
        what="The Firestore emulator",
        timeout=timeout,
    )
