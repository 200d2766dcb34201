"""README's list of what a deploy creates is the plan's own (infra.summary).

Issue 26, item 4: the README's TTL list left out `idempotency`, and its `a2a-deliver` roles
left out what the plan grants. The block between the markers is now `python -m infra
summary`'s output, wherever the docs keep it (README.md, or a page of docs/).
"""

from __future__ import annotations

from pathlib import Path

from infra.plan import deploy_plan
from infra.resources import Binding
from infra.settings import DEFAULT_FILE, load
from infra.summary import BEGIN, END, _bindings, summary
from tests.infra.conftest import REAL_ROOT

SETTINGS = load(DEFAULT_FILE, {"PROJECT": "my-project"})


def documented() -> str:
    """The block as the docs hold it."""
    for page in [REAL_ROOT / "README.md", *sorted((REAL_ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        if BEGIN in text:
            return text[text.index(BEGIN) : text.index(END) + len(END)]
    raise AssertionError(f"no page holds {BEGIN!r}")


def test_the_docs_list_what_the_plan_creates() -> None:
    assert documented() == summary(SETTINGS), (
        "README's list of what deploy creates differs from the plan: paste the output of "
        "`.venv/bin/python -m infra summary` between its markers"
    )


def test_the_summary_names_every_grant_of_the_plan_and_every_ttl_group(fake_repo: Path) -> None:
    steps = deploy_plan(SETTINGS, fake_repo, fake_repo / "build" / "stage")
    planned = {(s.role, s.member, s.target, s.present) for s in steps if isinstance(s, Binding)}
    summarised = {(b.role, b.member, b.target, b.present) for b in _bindings(SETTINGS)}
    assert planned == summarised
    text = summary(SETTINGS)
    for group in SETTINGS.ttl_collection_groups:
        assert f"`{group}`" in text
    assert "`idempotency`" in text
    deliver = next(line for line in text.splitlines() if line.startswith("- `a2a-deliver`"))
    assert "`roles/cloudtasks.enqueuer` on queue `push`" in deliver
    assert "`roles/secretmanager.secretAccessor` on secret `a2a-log-owner-key`" in deliver
