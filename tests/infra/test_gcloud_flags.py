"""Every command and flag the plans use is one the installed gcloud takes.

Checked against the real gcloud's own tree of commands and flags (read locally, once per test
session), so the plan cannot drift from the CLI users have.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from infra.plan import deploy_plan, destroy_plan
from infra.resources import Binding
from infra.settings import DEFAULT_FILE, load
from infra.steps import Command, Outputs, PlanError, Skipped, Step
from tests.infra.conftest import PROJECT, build_fake_repo

INDEXES = """{
  "indexes": [{"collectionGroup": "tasks", "queryScope": "COLLECTION", "fields": [
    {"fieldPath": "owner", "order": "ASCENDING"}, {"fieldPath": "tags", "arrayConfig": "CONTAINS"}
  ]}],
  "fieldOverrides": [{"collectionGroup": "events", "fieldPath": "payload",
    "indexes": [{"order": "ASCENDING", "queryScope": "COLLECTION_GROUP"}]}]
}"""


def step_commands(steps: list[Step]) -> list[Command]:
    """Each step's check, and its changes for a missing, an empty and a fully bound resource."""
    found: list[Command] = []
    outputs = Outputs(dry_run=True)
    for step in steps:
        check = step.check()
        if check is not None:
            found.append(check)
        states: list[Any] = [None, {}]
        if isinstance(step, Binding):
            states.append({"bindings": [{"role": step.role, "members": [step.member]}]})
        for state in states:
            try:
                found += [change.command for change in step.changes(state, outputs)]
            except (PlanError, Skipped):
                continue
    return found


@pytest.fixture(scope="session")
def plan_commands(tmp_path_factory: pytest.TempPathFactory) -> list[Command]:
    """Every command of a deploy (with secrets and an index file) and of a full destroy."""
    settings = load(DEFAULT_FILE, {"PROJECT": PROJECT}).model_copy(
        update={"secrets": {"API_KEYS": "api-keys:latest"}, "sign_card": True}
    )
    repo = build_fake_repo(tmp_path_factory.mktemp("flags") / "repo")
    (repo / "infra").mkdir()
    (repo / "infra" / "firestore.indexes.json").write_text(INDEXES)
    steps = deploy_plan(settings, repo, repo / "build" / "stage")
    steps += destroy_plan(settings, delete_database=True)
    return step_commands(steps)


# The installed gcloud's own tree of its commands and their flags, which it ships for shell
# completion (generated from the CLI at its release): read in ~0.5 s, where rendering the help
# of each of the ~30 commands the plans use took gcloud 20-50 s of CPU.
_TREE_FILE = Path("data", "cli", "gcloud_completions.py")
_TREE_NAME = "STATIC_COMPLETION_CLI_TREE"


@pytest.fixture(scope="session")
def cli_tree() -> dict[str, Any]:
    """The real gcloud's command tree: {"commands": {name: node}, "flags": {flag: kind}}."""
    gcloud = shutil.which("gcloud")
    assert gcloud, "the real gcloud must be installed for this test"
    source = Path(gcloud).resolve().parent.parent / _TREE_FILE
    assert source.is_file(), f"{source}: gcloud's command tree is missing from its install"
    namespace: dict[str, Any] = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)  # gcloud's own data
    tree: dict[str, Any] = namespace[_TREE_NAME]
    return tree


def command_flags(tree: dict[str, Any], path: tuple[str, ...]) -> dict[str, str] | None:
    """The flags `gcloud <path>` takes (its own, its groups' and the global ones), each with
    its kind ("bool" for a switch); None when there is no such command."""
    flags = dict(tree["flags"])
    node = tree
    for name in path:
        node = node["commands"].get(name)
        if node is None:
            return None
        flags.update(node["flags"])
    return flags


def test_every_command_exists(plan_commands: list[Command], cli_tree: dict[str, Any]) -> None:
    paths = {command.path for command in plan_commands}
    missing = sorted(" ".join(path) for path in paths if command_flags(cli_tree, path) is None)
    assert missing == []
    assert len(paths) >= 25, "the plans use about thirty commands"


def takes(flag: str, flags: dict[str, str]) -> bool:
    """Whether a command with `flags` takes `flag`: `--no-x` is the off form of a switch `--x`."""
    if flag in flags:
        return True
    switch = "--" + flag.removeprefix("--no-")
    return flag.startswith("--no-") and flags.get(switch) == "bool"


def test_every_flag_is_one_its_command_takes(
    plan_commands: list[Command], cli_tree: dict[str, Any]
) -> None:
    unknown = sorted(
        {
            f"gcloud {' '.join(command.path)} {flag}"
            for command in plan_commands
            for flag in command.flag_names
            if not takes(flag, command_flags(cli_tree, command.path) or {})
        }
    )
    assert unknown == []


def test_the_check_finds_a_flag_or_command_that_does_not_exist(cli_tree: dict[str, Any]) -> None:
    flags = command_flags(cli_tree, ("tasks", "queues", "create"))
    assert flags is not None
    assert takes("--max-attempts", flags)
    assert takes("--project", flags)  # a global flag
    assert not takes("--max-attempt", flags)
    assert not takes("--no-max-attempts", flags)  # not a switch
    deploy = command_flags(cli_tree, ("functions", "deploy"))
    assert deploy is not None
    assert takes("--no-allow-unauthenticated", deploy)
    assert command_flags(cli_tree, ("functions", "deploy-all")) is None
