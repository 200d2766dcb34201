"""Every command and flag the plans use exists in the installed gcloud's --help text.

The help texts are rendered by the real gcloud, locally (no network), once per test session, so
the plan cannot drift from the CLI users have.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from infra.plan import deploy_plan, destroy_plan
from infra.resources import Binding
from infra.settings import DEFAULT_FILE, load
from infra.steps import Command, Outputs, PlanError, Skipped, Step
from tests.infra.conftest import PROJECT, build_fake_repo

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
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
        update={"secrets": {"API_KEYS": "api-keys:latest"}}
    )
    repo = build_fake_repo(tmp_path_factory.mktemp("flags") / "repo")
    (repo / "infra").mkdir()
    (repo / "infra" / "firestore.indexes.json").write_text(INDEXES)
    steps = deploy_plan(settings, repo, repo / "build" / "stage")
    steps += destroy_plan(settings, delete_database=True)
    return step_commands(steps)


@pytest.fixture(scope="session")
def help_texts(plan_commands: list[Command]) -> dict[tuple[str, ...], str]:
    """The real gcloud's help of every command path the plans use, keyed by path."""
    gcloud = shutil.which("gcloud")
    assert gcloud, "the real gcloud must be installed for this test"
    env = {
        **os.environ,
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "1",
        "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "1",
    }

    def render(path: tuple[str, ...]) -> str:
        result = subprocess.run(
            [gcloud, *path, "--help"], capture_output=True, text=True, env=env, check=False
        )
        return _ANSI.sub("", result.stdout) if result.returncode == 0 else ""

    paths = sorted({command.path for command in plan_commands})
    # gcloud takes about half a second of CPU per help text: render a few at once.
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(paths, pool.map(render, paths), strict=True))


def test_every_command_exists(help_texts: dict[tuple[str, ...], str]) -> None:
    missing = [" ".join(path) for path, text in help_texts.items() if not text]
    assert missing == []
    assert len(help_texts) >= 25, "the plans use about thirty commands"


def documented(flag: str, text: str) -> bool:
    """Whether `flag` is in a help text, where `--x` and `--no-x` may be written `--[no-]x`."""
    bare = flag.removeprefix("--").removeprefix("no-")
    spellings = (flag, f"--[no-]{bare}")
    return any(re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", text) for s in spellings)


def test_every_flag_is_in_the_help_of_its_command(
    plan_commands: list[Command], help_texts: dict[tuple[str, ...], str]
) -> None:
    unknown = sorted(
        {
            f"gcloud {' '.join(command.path)} {flag}"
            for command in plan_commands
            for flag in command.flag_names
            if not documented(flag, help_texts[command.path])
        }
    )
    assert unknown == []


def test_the_check_finds_a_flag_that_does_not_exist(
    help_texts: dict[tuple[str, ...], str],
) -> None:
    text = help_texts[("tasks", "queues", "create")]
    assert documented("--max-attempts", text)
    assert not documented("--max-attempt", text)
    assert documented("--no-allow-unauthenticated", help_texts[("functions", "deploy")])
