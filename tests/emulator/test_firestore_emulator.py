"""The Firestore emulator starts, resets and stops as emulator.firestore promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from emulator import EmulatorError
from emulator._process import pid_alive, port_in_use
from emulator.firestore import FirestoreEmulator, find_jar, start_firestore

pytestmark = pytest.mark.emulator


def test_reset_deletes_documents(clean_firestore: FirestoreEmulator) -> None:
    from google.cloud import firestore

    assert os.environ["FIRESTORE_EMULATOR_HOST"] == clean_firestore.address
    client = firestore.Client(project=clean_firestore.project)
    try:
        doc = client.collection("tasks").document("t1")
        doc.set({"status": "working"})
        doc.collection("events").document("1").set({"seq": 1})
        assert doc.get().to_dict() == {"status": "working"}
        clean_firestore.reset()
        assert not doc.get().exists
        assert not doc.collection("events").document("1").get().exists
    finally:
        client.close()  # type: ignore[no-untyped-call]


def test_start_and_stop_by_pid(tmp_path: Path) -> None:
    emu = start_firestore(log_dir=tmp_path)
    try:
        assert emu.is_ready()
        assert emu.log_path.read_text()  # the emulator's log goes to the file
    finally:
        emu.stop()
    assert not emu.alive()
    assert not pid_alive(emu.pid)
    assert not port_in_use(emu.host, emu.port)


def test_missing_jar_names_both_places_and_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jar"
    with pytest.raises(EmulatorError) as info:
        find_jar({"FIRESTORE_EMULATOR_JAR": str(missing)}, default=tmp_path / "default.jar")
    message = str(info.value)
    assert str(missing) in message
    assert str(tmp_path / "default.jar") in message
    assert "gcloud components install cloud-firestore-emulator" in message


def test_jar_from_the_environment_wins(tmp_path: Path) -> None:
    jar = tmp_path / "emulator.jar"
    jar.write_bytes(b"")
    assert find_jar({"FIRESTORE_EMULATOR_JAR": str(jar)}) == jar


def test_fixture_fails_loudly_without_java(tmp_path: Path) -> None:
    # A suite that uses the fixture on a machine without Java must error, never skip.
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["emulator.pytest_plugin"]\n')
    (tmp_path / "test_uses_it.py").write_text("def test_it(firestore_emulator):\n    pass\n")
    env = {**os.environ, "PATH": str(tmp_path)}  # no java on it
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=Path(__file__).resolve().parents[2],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout
    assert "1 error" in result.stdout
    assert "skipped" not in result.stdout
    assert "java was not found on PATH" in result.stdout


def test_a_reset_the_emulator_cancels_is_tried_again(tmp_path: Path) -> None:
    """The emulator answers a reset 499 CANCELLED when a listener's client closed meanwhile."""
    import http.server
    import threading

    answers = [499, 200]
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_DELETE(self) -> None:
            asked.append(self.path)
            self.send_response(answers.pop(0))
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        emu = FirestoreEmulator("127.0.0.1", server.server_address[1], 0, tmp_path / "log")
        emu.reset()
    finally:
        server.shutdown()
        server.server_close()
    assert len(asked) == 2 and not answers
