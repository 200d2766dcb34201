"""Suite-wide pytest setup: the emulator fixtures (firestore_emulator, tasks_emulator, ...)."""

pytest_plugins = ["emulator.pytest_plugin"]
