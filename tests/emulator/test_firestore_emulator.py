"""The Firestore emulator starts, resets and stops as emulator.firestore promises."""

from __future__ import annotations

import os
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
