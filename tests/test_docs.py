"""The docs kept true where that is cheap and certain: README.md, ARCHITECTURE.md and docs/*.md.

Every relative link resolves to a file (and its `#anchor` to a heading of that page, slugged
as GitHub does), and so does every repository file a page names in code (`shared/app.py`);
docs/settings.md names every variable `shared/settings.py` reads, with its default where its
table gives one as a literal, and no `A2A_*` name on any page is one it does not read; every
`make X` the pages show is a target of the Makefile. Links inside code are examples, not
links; the `make` and file checks read code, since that is where commands and files are shown.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from shared.settings import ENVIRONMENT, Settings
from tests.conftest import ROOT

FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]+`")
# [text](target) and ![alt](target); the text may wrap onto the next line.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
SETTING = re.compile(r"\bA2A_[A-Z][A-Z0-9_]*\b")
# `make run`, `GOOGLE_API_KEY=... make run HANDLER=...`: a command where code shows one.
MAKE = re.compile(r"(?:^|[\s;&|(])make[ \t]+([a-z][a-z0-9_-]*)", re.MULTILINE)
# A repository file named in code: `shared.json_body.py`, `infra/deploy.toml`.
FILE = re.compile(r"`((?:[a-z_]+/)+[a-z_][a-z0-9_.-]*\.(?:py|toml|json|js|css|html|png|md))`")
# A settings table's row: | `A2A_X` | `default` (a note) | meaning |
ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]+)` \| `([^`]+)`(?: \([^|]*\))? \|", re.MULTILINE)
TARGET = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)[ \t]*:(?!=)", re.MULTILINE)


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", root / "ARCHITECTURE.md", *sorted((root / "docs").glob("*.md"))]


def prose(text: str) -> str:
    """The page without its fenced code blocks (each kept as blank lines, so lines count)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """A page's heading anchors, a repeated one numbered as GitHub does (`x`, `x-1`, ...)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in HEADING.findall(prose(page.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Each relative link of `page` that names no file, or no heading of the page it names."""
    text = INLINE_CODE.sub("", prose(page.read_text()))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(root)}: ({target})"
        if not linked.exists():
            broken.append(f"{where} names no file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{where} names no heading of {linked.relative_to(root)}")
    return broken


def test_every_relative_link_resolves() -> None:
    broken = [problem for page in pages() for problem in broken_links(page)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## `make dev`: the shape\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md#make-dev-the-shape) [gone](docs/b.md) [no heading](docs/a.md#nope)\n"
        "`[code](docs/c.md)` [self](#a-readme) [web](https://example.com/x)\n\n# A README\n"
        "```\n[in a fence](docs/d.md)\n```\n"
    )
    assert broken_links(page, tmp_path) == [
        "README.md: (docs/b.md) names no file",
        "README.md: (docs/a.md#nope) names no heading of docs/a.md",
    ]


def test_slugs_follow_github() -> None:
    assert slug("HTTP+JSON (REST)") == "httpjson-rest"
    assert slug("The deployed shape on your machine: `make dev`") == (
        "the-deployed-shape-on-your-machine-make-dev"
    )
    assert slug("Logs, traces and metrics") == "logs-traces-and-metrics"


def test_settings_page_names_every_setting_and_no_other() -> None:
    named = set(re.findall(r"\b[A-Z][A-Z0-9_]*[A-Z0-9]\b", (ROOT / "docs/settings.md").read_text()))
    missing = sorted(set(ENVIRONMENT.values()) - named)
    assert not missing, f"settings.py reads these, docs/settings.md names them not: {missing}"


def shown(value: object) -> str:
    """A default as the settings table writes it (`true`, `80,443`, `0.25`)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


def test_settings_page_gives_the_code_defaults() -> None:
    defaults = {
        f.metadata["variable"]: shown(f.default)
        for f in dataclasses.fields(Settings)
        if f.default is not dataclasses.MISSING
    }
    rows = ROW.findall((ROOT / "docs/settings.md").read_text())
    assert len(rows) > 40  # the tables are read, not skipped
    wrong = [
        f"{name}: the page says {doc!r}, settings.py {defaults.get(name)!r}"
        for name, doc in rows
        if defaults.get(name) != doc
    ]
    assert not wrong, "defaults drifted:\n" + "\n".join(wrong)


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_page_names_exists(page: Path) -> None:
    """A path is the repository's, or (as ARCHITECTURE.md names modules) the library's."""
    missing = sorted(
        name
        for name in set(FILE.findall(page.read_text()))
        if not (ROOT / name).exists() and not (ROOT / "shared" / name).exists()
    )
    assert not missing, f"{page.relative_to(ROOT)} names files that do not exist: {missing}"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_setting_a_page_names_exists(page: Path) -> None:
    unknown = sorted(set(SETTING.findall(page.read_text())) - set(ENVIRONMENT.values()))
    assert not unknown, f"{page.relative_to(ROOT)} names settings settings.py reads not: {unknown}"


def make_commands(text: str) -> set[str]:
    """The targets of the `make` commands a page shows in code (fenced or inline)."""
    code = [m.group(0) for m in FENCE.finditer(text)] + INLINE_CODE.findall(text)
    return {target for block in code for target in MAKE.findall(block.strip("`"))}


def test_every_make_command_is_a_target() -> None:
    targets = set(TARGET.findall((ROOT / "Makefile").read_text()))
    unknown = sorted(
        f"{page.relative_to(ROOT)}: make {name}"
        for page in pages()
        for name in make_commands(page.read_text()) - targets
    )
    assert not unknown, f"no such Makefile target: {unknown}"


def test_make_commands_are_read_from_code_only() -> None:
    text = "`make run HANDLER=x`, `A=1 make dev`\n```\nmake deploy PROJECT=p\n```\nmake it so\n"
    assert make_commands(text) == {"run", "dev", "deploy"}
