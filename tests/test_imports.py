"""The library's import graph, read from the code with `ast`: no cycles, no tests imported,
and the layers kept (the service, each of its modules, and its requests reach no wire module).

Every `import` in shared/ counts, also those inside functions and under TYPE_CHECKING: a
cycle there is still two modules that each need the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

SHARED = ROOT / "shared"
WIRE = ("shared.dialects", "shared.bindings")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The shared modules `path` imports (`from a import b` counts as a.b when that is one)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m in modules and m != name}


def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in SHARED.rglob("*.py")}
    return {name: imports(path, set(paths)) for name, path in paths.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path a -> ... -> a, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(edges[node]):
            found = visit(target)
            if found:
                return found
        path.pop()
        done.add(node)
        return None

    for start in sorted(edges):
        found = visit(start)
        if found:
            return found
    return None


def reached(edges: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module `start` imports, directly or not, each with the module that imports it."""
    seen: dict[str, str] = {start: ""}
    todo = [start]
    while todo:
        module = todo.pop()
        for imported in edges[module] - seen.keys():
            seen[imported] = module
            todo.append(imported)
    return seen


def chain(seen: dict[str, str], module: str) -> str:
    links = [module]
    while seen[links[-1]]:
        links.append(seen[links[-1]])
    return " <- ".join(links)


def test_shared_has_no_import_cycle() -> None:
    edges = graph()
    assert "shared.ports" in edges and "shared.store.memory" in edges  # it found the library
    assert cycle(edges) is None, " -> ".join(cycle(edges) or [])


def test_the_walk_finds_a_cycle() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_the_service_and_its_requests_import_no_wire() -> None:
    edges = graph()
    parts = sorted(m for m in edges if m.startswith("shared.service."))
    assert "shared.service.sending" in parts  # it found the service's modules
    for start in ("shared.service", *parts, "shared.requests"):
        seen = reached(edges, start)
        wire = [chain(seen, m) for m in sorted(seen) if m.startswith(WIRE)]
        assert not wire, f"{start} reaches the wire: {wire}"


def test_the_walk_sees_the_wire_where_it_is() -> None:
    # The check above can fail: the bindings reach the dialects and the service this way.
    seen = reached(graph(), "shared.bindings.jsonrpc")
    assert "shared.dialects.decode" in seen and "shared.service" in seen


def test_shared_never_imports_tests() -> None:
    for path in SHARED.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n == "tests" or n.startswith("tests.") for n in names), path
