"""Suite-wide pytest setup: the emulator fixtures (firestore_emulator, tasks_emulator, ...)."""

import sys
from pathlib import Path

# A bare `pytest` (not `python -m pytest`) leaves the repository root off sys.path, and
# tests/emulator/ (no __init__.py) would then pass for the `emulator` package. Put the root
# first; `pythonpath = ["."]` under [tool.pytest.ini_options] would do the same.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

pytest_plugins = ["emulator.pytest_plugin"]
