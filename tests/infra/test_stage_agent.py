"""An agent kept in a folder of its own (AGENT): staged beside the kit with its requirements
pinned, served from the stage, deployed on the fake gcloud; what cannot ship is refused
before anything is built, naming the fix."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest

from infra.settings import DEFAULT_FILE, load
from infra.stage import StageError, stage
from tests.infra.conftest import REAL_ROOT
from tests.infra.fake_gcloud import FakeGcloud
from tests.infra.test_deploy import flag, run
from tests.infra.test_stage import serve_and_get_card

AGENT_INIT = '''"""An agent of its own, with a dependency the kit does not have."""

from sortedcontainers import SortedList

from shared.agent import AgentInfo, Context

from my_agent.words import sorted_words

AGENT = AgentInfo(name="my own agent", description="Sorts your words.")


def handle(ctx: Context) -> None:
    ctx.artifact(text=" ".join(sorted_words(ctx.text)))
'''
WORDS = '''"""A module of the agent's package, imported by its handler."""

from sortedcontainers import SortedList


def sorted_words(text: str) -> list[str]:
    return list(SortedList(text.split()))
'''


def pins(text: str) -> dict[str, str]:
    return dict(line.split("==") for line in text.splitlines() if "==" in line)


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    """~/agents/my_agent: a package named after its folder, with a requirements.txt, a
    test of its own and a cache that must not ship."""
    folder = tmp_path / "agents" / "my_agent"
    (folder / "tests").mkdir(parents=True)
    (folder / "__init__.py").write_text(AGENT_INIT)
    (folder / "words.py").write_text(WORDS)
    (folder / "requirements.txt").write_text(
        "# the agent's own dependencies\n\nsortedcontainers>=2  # sorted words\n"
        'no-such-package-for-old-pythons; python_version < "3.8"\n'
    )
    (folder / "tests" / "test_words.py").write_text("def test_nothing():\n    pass\n")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "stale.pyc").write_bytes(b"old")
    (folder / ".git").mkdir()
    return folder


def test_the_stage_holds_the_agent_folder_and_its_pinned_requirements(
    agent: Path, tmp_path: Path
) -> None:
    staged = stage(REAL_ROOT, "a2a", tmp_path / "a2a", "my_agent", agent=agent)
    shipped = staged.path / "my_agent"
    assert (shipped / "__init__.py").read_text() == AGENT_INIT
    assert (shipped / "words.py").is_file() and (shipped / "requirements.txt").is_file()
    assert not (shipped / ".git").exists()
    assert not (shipped / "__pycache__" / "stale.pyc").exists(), "its own bytecode, fresh"
    assert (shipped / "__pycache__").is_dir()
    text = (staged.path / "requirements.txt").read_text()
    assert "# With the agent's requirements: my_agent/requirements.txt." in text
    pinned = pins(text)
    assert pinned["sortedcontainers"] == metadata.version("sortedcontainers")
    assert pinned["functions-framework"] == "3.10.2", "the kit's own stay"
    assert not (staged.path / "shared" / "testing.py").exists(), "its tests' helper stays home"
    assert "no-such-package-for-old-pythons" not in text, "a marker for another Python"

    # Served from the stage alone (no PYTHONPATH, no checkout): the handler loads with its
    # dependency, and its card is the agent's.
    env = {"A2A_BACKEND": "memory", "A2A_HANDLER": "my_agent"}
    card = serve_and_get_card(staged.path, env)
    assert card.status_code == 200 and card.json()["name"] == "my own agent"


def test_an_agent_s_pyproject_dependencies_are_its_requirements(
    agent: Path, tmp_path: Path
) -> None:
    (agent / "requirements.txt").unlink()
    (agent / "pyproject.toml").write_text(
        '[project]\nname = "my-agent"\nversion = "1"\ndependencies = ["sortedcontainers"]\n'
    )
    staged = stage(REAL_ROOT, "worker", tmp_path / "worker", "my_agent.words", agent=agent)
    text = (staged.path / "requirements.txt").read_text()
    assert "# With the agent's requirements: my_agent/pyproject.toml." in text
    assert "sortedcontainers" in pins(text)


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("-r other.txt", "'-r other.txt' is not a requirement the stage can pin"),
        ("mylib @ https://example.com/mylib.whl", "a URL is not pinned"),
        ("no-such-package-xyz==1", "no-such-package-xyz is required but not installed here"),
    ],
)
def test_requirements_that_cannot_be_pinned_are_refused_naming_the_line(
    agent: Path, tmp_path: Path, line: str, named: str
) -> None:
    (agent / "requirements.txt").write_text(f"sortedcontainers\n{line}\n")
    with pytest.raises(StageError, match="pip install -r") as refused:
        stage(REAL_ROOT, "a2a", tmp_path / "a2a", "my_agent", agent=agent)
    assert named in str(refused.value)
    assert not (tmp_path / "a2a").exists(), "nothing staged"


def test_a_folder_that_cannot_ship_is_refused_naming_the_fix(
    agent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    with pytest.raises(StageError, match=r"HANDLER=functions\.handlers\.sample is not in"):
        stage(REAL_ROOT, "a2a", out, "functions.handlers.sample", agent=agent)
    with pytest.raises(StageError, match=r"handler module my_agent\.nope is not in"):
        stage(REAL_ROOT, "a2a", out, "my_agent.nope", agent=agent)
    for name in ("shared", "my-agent", "class"):
        renamed = agent.rename(agent.parent / name)
        with pytest.raises(StageError, match="rename the folder"):
            stage(REAL_ROOT, "a2a", out, name, agent=renamed)
        agent = renamed.rename(agent.parent / "my_agent")
    secret = agent.parent / "id_rsa"
    secret.write_text("a key")
    (agent / "tests" / "key").symlink_to(secret)
    with pytest.raises(StageError, match=r"tests/key is a symbolic link"):
        stage(REAL_ROOT, "a2a", out, "my_agent", agent=agent)
    (agent / "tests" / "key").unlink()
    (agent / ".venv").mkdir()
    (agent / ".venv" / "python").symlink_to(secret)  # not shipped: not refused
    stage(REAL_ROOT, "a2a", out, "my_agent", agent=agent)
    assert not (out / "my_agent" / ".venv").exists()
    (agent / "data.bin").write_bytes(b"x" * 2048)
    monkeypatch.setattr("infra.stage.MAX_AGENT_BYTES", 2048)
    with pytest.raises(StageError, match=r"holds \d+ bytes of files to ship, over 2048"):
        stage(REAL_ROOT, "a2a", out, "my_agent", agent=agent)
    (agent / "__init__.py").unlink()
    with pytest.raises(StageError, match=r"needs an __init__\.py"):
        stage(REAL_ROOT, "a2a", out, "my_agent", agent=agent)


def test_the_folder_s_package_is_the_handler_unless_handler_names_a_module_in_it() -> None:
    folder = "~/agents/my_agent/"
    settings = load(DEFAULT_FILE, {"AGENT": folder})
    assert settings.handler == "my_agent"
    assert settings.agent_folder == Path.home() / "agents" / "my_agent"
    assert load(DEFAULT_FILE, {"AGENT": folder, "HANDLER": "my_agent.main"}).handler == (
        "my_agent.main"
    )
    assert load(DEFAULT_FILE, {}).agent_folder is None


def test_an_agent_folder_deploys_on_the_fake_gcloud(
    fake_gcloud: FakeGcloud,
    fake_repo: Path,
    agent: Path,
    project_env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENT", str(agent))
    assert run(fake_repo, "deploy") == 0
    deploys = [call for call in fake_gcloud.changes() if call[:2] == ["functions", "deploy"]]
    assert [call[2] for call in deploys] == ["deliver", "worker", "a2a"]
    for call in deploys:
        assert "A2A_HANDLER=my_agent" in flag(call, "set-env-vars").split(",")
        source = Path(flag(call, "source"))
        assert (source / "my_agent" / "words.py").read_text() == WORDS
        assert "sortedcontainers" in pins((source / "requirements.txt").read_text())
    state = json.loads(fake_gcloud.state.read_text())
    assert state["function/a2a"]["state"] == "ACTIVE"

    # A change in the agent's folder is a change of the functions: all three redeploy.
    fake_gcloud.clear_log()
    (agent / "words.py").write_text(WORDS.replace("SortedList(text.split())", "text.split()"))
    assert run(fake_repo, "deploy") == 0
    assert [call[2] for call in fake_gcloud.changes() if call[:2] == ["functions", "deploy"]] == [
        "deliver",
        "worker",
        "a2a",
    ]
