"""Where the handler module is, found without running it: what `make run` and `make dev` look
up before anything starts, so that a mistyped HANDLER is one line naming it and the closest
handler module that exists, not a server's 30-line traceback.

    python -m emulator.handler [--make dev] MODULE   # its file on stdout; else one line on
                                                     # stderr (naming `make dev`), exit 1

Run it with the functions' PYTHONPATH: the module is looked up on `sys.path` as they import
it, one dotted name at a time with `PathFinder` (as the import system's path finder does), so
no package's `__init__` runs here. A module that is there but fails when imported (an import
of its own that is missing, a syntax error) is found: the server then says why, in its own
words, and this never calls it missing.

The closest module is found by difflib among the handler modules (files that define
`handle`) under the PYTHONPATH entries, the checkout first, a few levels deep. Imports only
the standard library.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Iterator, Sequence
from importlib.machinery import PathFinder
from pathlib import Path

# What marks a handler module, read from its text: a `handle` defined or assigned at the top.
HANDLE = re.compile(rb"^(?:async\s+)?def\s+handle\s*\(|^handle\s*[:=]", re.MULTILINE)
MAX_DEPTH = 3  # packages below a PYTHONPATH entry looked into (functions/handlers/x.py: 2)
MAX_FILES = 5000  # files looked at in all: a PYTHONPATH of one's home folder stays quick
SKIPPED = frozenset({"node_modules", "site-packages", "__pycache__"})
CUTOFF = 0.6  # difflib.get_close_matches' own: below it, names share too little to suggest


def locate(module: str, path: Sequence[str]) -> Path | None:
    """The file the module `module` would be imported from, on the path entries `path`;
    None when there is none (a name that is no module, or a namespace package: no file)."""
    search: Sequence[str] | None = list(path)
    origin: str | None = None
    for part in module.split("."):
        if search is None or not part.isidentifier():
            return None  # under a module that is no package, or not a name at all
        spec = PathFinder.find_spec(part, list(search))
        if spec is None:
            return None
        search = spec.submodule_search_locations
        origin = spec.origin if spec.has_location else None
    return Path(origin) if origin else None


def handler_modules(roots: Sequence[str]) -> Iterator[str]:
    """The dotted names of the modules under `roots` that define `handle`, MAX_DEPTH
    packages deep at most, MAX_FILES files looked at in all."""
    budget = [MAX_FILES]

    def walk(folder: Path, prefix: str, depth: int) -> Iterator[str]:
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            return
        for entry in entries:
            if budget[0] <= 0:
                return
            budget[0] -= 1
            if entry.is_dir():
                if depth < MAX_DEPTH and entry.name.isidentifier() and entry.name not in SKIPPED:
                    yield from walk(entry, f"{prefix}{entry.name}.", depth + 1)
                continue
            if entry.suffix != ".py" or not _defines_handle(entry):
                continue
            if entry.stem == "__init__":
                if prefix:  # the package itself
                    yield prefix[:-1]
            elif entry.stem.isidentifier():
                yield prefix + entry.stem

    for root in dict.fromkeys(roots):  # each entry once, in order
        yield from walk(Path(root), "", 0)


def closest(module: str, roots: Sequence[str]) -> str | None:
    """The handler module under `roots` whose name is closest to `module` (difflib's ratio,
    of the whole dotted names or of their last parts: `sample` is functions.handlers.sample),
    if any is close at all (difflib's own cutoff, 0.6)."""
    last = module.rpartition(".")[2]

    def likeness(name: str) -> float:
        whole = difflib.SequenceMatcher(None, module, name).ratio()
        return max(whole, difflib.SequenceMatcher(None, last, name.rpartition(".")[2]).ratio())

    scored = [(likeness(name), name) for name in dict.fromkeys(handler_modules(roots))]
    best = max(scored, default=None, key=lambda pair: pair[0])
    return best[1] if best is not None and best[0] >= CUTOFF else None


def missing(module: str, roots: Sequence[str], target: str = "run") -> str:
    """The one line that says `module` is not there, and what is (`make <target>`'s words)."""
    near = closest(module, roots)
    hint = f"the closest handler module there is {near} (HANDLER={near}); " if near else ""
    shown = module if module.isprintable() else repr(module)  # one line, whatever was typed
    return (
        f"error: the handler module {shown} is not on the functions' PYTHONPATH "
        f"({os.pathsep.join(roots)}): {hint}check HANDLER's spelling, or put the folder "
        f"that holds it on PYTHONPATH (PYTHONPATH=/my/agents make {target} HANDLER=my_agent)"
    )


def find(module: str, target: str = "run") -> Path | str:
    """The module's file on this interpreter's path, or the line that says it is missing."""
    found = locate(module, sys.path)
    if found is not None:
        return found
    roots = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    return missing(module, roots or [os.getcwd()], target)


def _defines_handle(path: Path) -> bool:
    try:
        return HANDLE.search(path.read_bytes()) is not None
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulator.handler", description=__doc__)
    parser.add_argument("module", help="the handler module (HANDLER)")
    parser.add_argument("--make", default="run", help="the make target named in the fix")
    args = parser.parse_args(argv)
    found = find(args.module, args.make)
    if isinstance(found, str):
        print(found, file=sys.stderr)
        return 1
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
