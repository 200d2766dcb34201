"""Log lines as Cloud Logging would read them: every record formatted by the JSON formatter
and parsed back, waited on (lines of background work arrive on other threads)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from shared.observability.logs import CloudLoggingFormatter

PROJECT = "demo-project"


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(CloudLoggingFormatter(PROJECT))
        self.raw: list[str] = []
        self._changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record)
        with self._changed:
            self.raw.append(line)
            self._changed.notify_all()

    def all(self) -> list[dict[str, Any]]:
        with self._changed:
            return [json.loads(line) for line in self.raw]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [line for line in self.all() if line.get("kind") == kind]

    def wait(self, check: Callable[[list[dict[str, Any]]], bool], timeout: float = 20) -> None:
        with self._changed:
            done = self._changed.wait_for(
                lambda: check([json.loads(line) for line in self.raw]), timeout
            )
        assert done, f"no such lines within {timeout} s:\n" + "\n".join(self.raw)


@pytest.fixture
def lines() -> Iterator[Lines]:
    root = logging.getLogger()
    handler, level = Lines(), root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
