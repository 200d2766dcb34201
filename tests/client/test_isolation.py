"""The functions never load the client: no library module imports it (and importing the
entry points loads neither it nor its HTTP stack: tests/system/test_cold_start.py)."""

from __future__ import annotations

from tests.test_imports import graph


def test_no_library_module_imports_the_client() -> None:
    edges = graph()
    assert "shared.client.cli" in edges  # the walk sees the client
    importers = sorted(
        module
        for module, imported in edges.items()
        if not module.startswith("shared.client")
        and any(m.startswith("shared.client") for m in imported)
    )
    assert importers == []
