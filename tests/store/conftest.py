"""Store fixtures: the Firestore emulator for the session, and each store under contract.

The emulator launcher here is a stand-in until the `emulator/` package lands: it starts the
official emulator's Java process directly (so its PID is ours to stop), waits for it to
answer, and wipes its documents before every test that uses it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
import requests

from shared.ports import TaskStore
from shared.store.memory import MemoryTaskStore

PROJECT = "a2a-functions-test"
_DEFAULT_JAR = Path(
    "/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar"
)
_MAIN_CLASS = "com.google.cloud.datastore.emulator.firestore.CloudFirestore"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def firestore_emulator() -> Iterator[str]:
    """host:port of a Firestore emulator running for this session, FIRESTORE_EMULATOR_HOST set."""
    jar = Path(os.environ.get("FIRESTORE_EMULATOR_JAR", _DEFAULT_JAR))
    if not jar.is_file():
        pytest.fail(
            f"the Firestore emulator jar is missing at {jar}: install it with "
            "`gcloud components install cloud-firestore-emulator` or point "
            "FIRESTORE_EMULATOR_JAR at it",
            pytrace=False,
        )
    port = _free_port()
    host = f"127.0.0.1:{port}"
    command = ["java", "-Duser.language=en", "-cp", str(jar), _MAIN_CLASS, "start"]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [*command, "--host=127.0.0.1", f"--port={port}"], stdout=log, stderr=subprocess.STDOUT
        )
        try:
            _wait_ready(host, process, log)
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("FIRESTORE_EMULATOR_HOST", host)
                yield host
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(host: str, process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if requests.get(f"http://{host}/", timeout=1).ok:
                return
        except requests.ConnectionError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            pytest.fail(
                f"the Firestore emulator did not start on {host}:\n{log.read().decode()}",
                pytrace=False,
            )
        time.sleep(0.1)


@pytest.fixture
def firestore_host(firestore_emulator: str) -> str:
    """The emulator, emptied for this test."""
    url = (
        f"http://{firestore_emulator}/emulator/v1/projects/{PROJECT}/databases/(default)/documents"
    )
    requests.delete(url, timeout=10).raise_for_status()
    return firestore_emulator


@pytest.fixture(params=["memory", "firestore"])
def store(request: pytest.FixtureRequest) -> TaskStore:
    if request.param == "memory":
        return MemoryTaskStore()
    request.getfixturevalue("firestore_host")
    from shared.store.firestore import FirestoreTaskStore

    return FirestoreTaskStore(PROJECT)
