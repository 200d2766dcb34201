"""The service knows no wire: nothing it imports, directly or not, reaches the dialects or
the bindings."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIRE = ("shared.dialects", "shared.bindings")


def _module_path(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _imports(path: Path) -> set[str]:
    """The shared.* modules a file imports anywhere in it (functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # `from shared.bindings import sse` imports the module shared.bindings.sse
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {m for m in found if m.startswith("shared") and _module_path(m) is not None}


def reached(start: str) -> dict[str, str]:
    """Every shared module `start` imports, directly or not, each with who imports it."""
    seen: dict[str, str] = {start: ""}
    todo = [start]
    while todo:
        module = todo.pop()
        path = _module_path(module)
        assert path is not None, module
        for imported in _imports(path) - seen.keys():
            seen[imported] = module
            todo.append(imported)
    return seen


def _chain(seen: dict[str, str], module: str) -> str:
    chain = [module]
    while seen[chain[-1]]:
        chain.append(seen[chain[-1]])
    return " <- ".join(chain)


def test_the_walk_sees_the_wire_where_it_is() -> None:
    # The check below can fail: the bindings reach the dialects through this walk.
    seen = reached("shared.bindings.jsonrpc")
    assert "shared.dialects.decode" in seen
    assert "shared.service" in seen


def test_the_service_and_its_requests_import_no_wire() -> None:
    for start in ("shared.service", "shared.requests"):
        seen = reached(start)
        wire = [_chain(seen, m) for m in sorted(seen) if m.startswith(WIRE)]
        assert not wire, f"{start} reaches the wire: {wire}"
