"""Staging: the folder gcloud uploads for one function, built from the repository as it is.

Cloud Functions loads `main.py` from the root of the upload and installs `requirements.txt`. The
stage gets `functions/`, `shared/`, a generated `main.py` that exposes the one entry point, and a
`requirements.txt` pinned to the versions installed here, so the cloud runs what the tests ran.
An agent kept in a folder of its own (`AGENT`, docs/agents.md) ships beside them: the folder,
a Python package named after it, goes to the stage's root as it is, and its own
`requirements.txt` (or its pyproject's `[project] dependencies`) joins the pinned list.
Every module ships compiled (`__pycache__`, hash-checked bytecode valid whatever the files'
times after upload), and a `.gcloudignore` keeps gcloud from leaving it out: a new instance
compiles nothing before its first answer.
"""

from __future__ import annotations

import compileall
import hashlib
import keyword
import os
import py_compile
import shutil
import tomllib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

PACKAGES = ("functions", "shared")
# The client CLI (shared/client, the `cli` extra) is for people, and a handler's test helper
# (shared/testing.py) for its tests: neither is for the functions.
NOT_DEPLOYED = (Path("shared") / "client", Path("shared") / "testing.py")
# Extras that never deploy: the CLI's, and the test tools'.
NOT_DEPLOYED_EXTRAS = ("cli", "dev")
_CACHES = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")
# What an agent folder may ship, counted unzipped: Cloud Functions takes at most 100 MB of
# zipped source a function; the kit's own stage is 2.0 MB (0.8 MB zipped), and files an agent
# ships may not compress at all.
MAX_AGENT_BYTES = 95 * 1000 * 1000
# Names an agent's package cannot take: the stage's own top level, and the entry module.
_RESERVED = frozenset({*PACKAGES, "main"})


class StageError(Exception):
    """The repository cannot be packaged; the message says what is missing."""


@dataclass(frozen=True)
class Staged:
    """A staging folder and the hash of its contents (a deploy changes only if the hash does)."""

    path: Path
    source_hash: str


def stage(
    repo_root: Path,
    entry_point: str,
    out_dir: Path,
    handler: str,
    extras: Sequence[str] = (),
    *,
    agent: Path | None = None,
) -> Staged:
    """Build `out_dir` (replacing it) for the function whose entry point is `entry_point`,
    with the requirements of the pyproject's `extras` too (deploy.toml, [functions]), and
    the agent folder `agent` with its own requirements, when the handler lives there."""
    for package in PACKAGES:
        if not (repo_root / package).is_dir():
            raise StageError(f"{repo_root / package} is missing: nothing to deploy")
    if not (repo_root / "functions" / "main.py").is_file():
        raise StageError(
            f"{repo_root / 'functions' / 'main.py'} is missing: it holds the entry points"
        )
    own: list[str] = []
    source = ""
    if agent is not None:
        agent = agent.expanduser().resolve()
        check_agent(agent, handler)
        own, source = agent_requirements(agent)
    elif not _module_file(repo_root, handler):
        raise StageError(
            f"handler module {handler} is not in {repo_root}: set HANDLER to a module "
            "under functions/ or shared/, such as functions.handlers.sample, or AGENT to "
            "the folder of an agent of your own (docs/agents.md)"
        )
    requirements = pinned_requirements(repo_root / "pyproject.toml", extras, own, source)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    for package in PACKAGES:
        shutil.copytree(repo_root / package, out_dir / package, ignore=_ignored(repo_root))
    if agent is not None:
        shutil.copytree(agent, out_dir / agent.name, ignore=_CACHES)
    (out_dir / "main.py").write_text(_entry_module(entry_point))
    (out_dir / "requirements.txt").write_text(requirements)
    (out_dir / ".gcloudignore").write_text(_GCLOUDIGNORE)
    _compile(out_dir)
    return Staged(out_dir, tree_hash(out_dir))


def check_agent(agent: Path, handler: str) -> None:
    """Raise StageError unless `agent` is a package folder the stage can ship at its root
    and `handler` a module in it."""
    name = agent.name
    if not (agent / "__init__.py").is_file():
        raise StageError(
            f"AGENT={agent} is not an agent folder: it needs an __init__.py (the handler "
            "module, or the package holding it; docs/agents.md shows the layout)"
        )
    if not name.isidentifier() or keyword.iskeyword(name) or name in _RESERVED:
        raise StageError(
            f"AGENT={agent}: the folder's name is its package's, and {name!r} cannot be one "
            f"(a Python identifier other than {', '.join(sorted(_RESERVED))}): rename the folder"
        )
    if handler != name and not handler.startswith(f"{name}."):
        raise StageError(
            f"HANDLER={handler} is not in the agent folder {agent}: leave HANDLER unset to "
            f"serve its package ({name}), or name a module in it ({name}.agent)"
        )
    if not _module_file(agent.parent, handler):
        raise StageError(f"handler module {handler} is not in {agent}")
    _check_files(agent)


def _check_files(agent: Path) -> None:
    """What of the agent folder ships (caches and dot-files such as .git and .venv do not):
    no symbolic link, which would upload whatever it points to (a key, a home folder), and
    at most MAX_AGENT_BYTES. Raises StageError naming the problem."""
    size = 0
    for folder, names, files in os.walk(agent):
        ignored = _CACHES(folder, [*names, *files])
        names[:] = [name for name in names if name not in ignored]
        for name in (*names, *(f for f in files if f not in ignored)):
            path = Path(folder) / name
            if path.is_symlink():
                raise StageError(
                    f"{path} is a symbolic link: the agent folder ships as files, and a link "
                    "would upload what it points to; copy what it should hold, or remove it"
                )
            size += path.stat().st_size if path.is_file() else 0
    if size > MAX_AGENT_BYTES:
        raise StageError(
            f"AGENT={agent} holds {size} bytes of files to ship, over {MAX_AGENT_BYTES}: "
            "keep data out of the package (fetch it at run time, or put it in a dot-folder "
            "when it is only for development)"
        )


def agent_requirements(agent: Path) -> tuple[list[str], str]:
    """The requirement lines of the agent folder (its requirements.txt, else its
    pyproject's `[project] dependencies`), and which file they come from. Lines that are
    not a plain requirement (pip options, other files, URLs) are refused: the stage pins
    each to the version installed here."""
    requirements, pyproject = agent / "requirements.txt", agent / "pyproject.toml"
    if requirements.is_file():
        source = requirements
        lines = [
            (number, line.split(" #", 1)[0].strip())
            for number, line in enumerate(requirements.read_text().splitlines(), 1)
        ]
    elif pyproject.is_file():
        source = pyproject
        try:
            declared = tomllib.loads(pyproject.read_text()).get("project", {})
        except tomllib.TOMLDecodeError as error:
            raise StageError(f"{pyproject} is not valid TOML: {error}") from error
        dependencies = declared.get("dependencies", [])
        if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
            raise StageError(f"{pyproject}: [project] dependencies must be a list of strings")
        lines = list(enumerate(dependencies, 1))
    else:
        return [], ""
    wanted: list[str] = []
    for number, line in lines:
        if not line or line.startswith("#"):
            continue
        try:
            requirement = Requirement(line)
            if requirement.url:
                raise InvalidRequirement("a URL is not pinned to an installed version")
        except InvalidRequirement as error:
            raise StageError(
                f"{source}:{number}: {line!r} is not a requirement the stage can pin "
                f"({error}): write one package per line (name, extras, version "
                "specifiers, markers), installed here with pip install -r"
            ) from error
        # For the interpreter the cloud runs, which is this one (3.11).
        if requirement.marker is None or requirement.marker.evaluate():
            wanted.append(line)
    return wanted, f"{agent.name}/{source.name}"


def _ignored(repo_root: Path) -> Callable[[str, list[str]], set[str]]:
    """copytree's filter: caches, and the folders that are not deployed."""
    skipped = {repo_root / path for path in NOT_DEPLOYED}

    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(folder)
        return set(_CACHES(folder, names)) | {n for n in names if here / n in skipped}

    return ignore


# gcloud's default .gcloudignore for Python leaves out __pycache__/: this one uploads it all.
_GCLOUDIGNORE = (
    "# Written by infra.stage: upload everything, __pycache__ included (precompiled bytecode).\n"
    ".gcloudignore\n"
)


def _compile(out_dir: Path) -> None:
    """Bytecode for every module of the stage, beside it in __pycache__. CHECKED_HASH: the
    interpreter checks the source's hash, not its mtime (an upload does not keep mtimes), and
    the bytes depend on the source alone (the stage's hash is reproducible). Paths are stored
    relative to the stage; the import system puts the real path in at load time."""
    compiled = compileall.compile_dir(
        out_dir,
        quiet=1,
        stripdir=str(out_dir),
        invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
    )
    if not compiled:
        raise StageError(f"a module under {out_dir} does not compile: see the error above")


def _module_file(repo_root: Path, module: str) -> bool:
    base = repo_root.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _entry_module(entry_point: str) -> str:
    return (
        f'"""Entry point of the `{entry_point}` function, written by infra.stage: '
        'Cloud Functions loads main.py."""\n\n'
        f"from functions.main import {entry_point}\n\n"
        f'__all__ = ["{entry_point}"]\n'
    )


def _requested(project: dict[str, Any], extras: Sequence[str]) -> list[str]:
    """The project's dependencies and those of `extras`. Raises StageError for an extra the
    project does not have, or one that is never deployed."""
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    lines = list(project["dependencies"])
    for extra in extras:
        if extra in NOT_DEPLOYED_EXTRAS or extra not in optional:
            offered = sorted(set(optional) - set(NOT_DEPLOYED_EXTRAS))
            raise StageError(
                f"extra {extra!r} cannot be deployed: the functions' extras (deploy.toml, "
                f"[functions] extras) are {', '.join(offered) or 'none'}"
            )
        lines += optional[extra]
    return lines


def pinned_requirements(
    pyproject: Path, extras: Sequence[str] = (), agent: Sequence[str] = (), agent_file: str = ""
) -> str:
    """The runtime dependencies of `pyproject` (and of its `extras`), the agent folder's
    requirement lines `agent` (read from `agent_file`), and everything they need, at
    installed versions."""
    project = tomllib.loads(pyproject.read_text())["project"]
    dependencies = [*_requested(project, extras), *agent]
    pins: dict[str, str] = {}
    pending = deque(Requirement(line) for line in dependencies)
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        requirement = pending.popleft()
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            distribution = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError as error:
            raise StageError(
                f"{requirement.name} is required but not installed here: run make install"
                + (f" (and pip install -e '.[{','.join(extras)}]')" if extras else "")
                + (
                    "; an agent folder's requirements are installed with "
                    ".venv/bin/pip install -r AGENT/requirements.txt (or -e AGENT)"
                    if agent
                    else ""
                )
            ) from error
        pins[key[0]] = f"{distribution.metadata['Name']}=={distribution.version}"
        requested = {"", *requirement.extras}
        for line in distribution.requires or []:
            needed = Requirement(line)
            # Markers are evaluated for this interpreter, which is the one the cloud runs (3.11).
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in requested
            ):
                pending.append(needed)
    header = (
        "# Written by infra.stage: pyproject dependencies at the versions the tests ran with.\n"
    )
    if extras:
        header += f"# With the extras: {', '.join(extras)}.\n"
    if agent:
        header += f"# With the agent's requirements: {agent_file}.\n"
    return header + "".join(f"{pins[name]}\n" for name in sorted(pins))


def tree_hash(folder: Path) -> str:
    """A short hash of every file's path and bytes, stable across machines and runs."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
