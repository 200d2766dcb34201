"""The vocabulary of a deploy: gcloud commands, changes, and steps that compare and converge.

A step names one resource. It describes the resource (`check`), compares what it found with what
the settings want, and returns the changes that close the gap: none when the resource is already
right, which is what makes a second `make deploy` a no-op.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Input:
    """What a command reads on its standard input, made only when it runs (a secret's value:
    never on a command line, in a log or on disk), and how a printed plan names it."""

    label: str
    make: Callable[[], bytes] = field(compare=False)


@dataclass(frozen=True)
class Command:
    """One gcloud invocation, kept in parts so a test can check its flags against gcloud's help."""

    path: tuple[str, ...]
    args: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    stdin: Input | None = None

    @property
    def argv(self) -> list[str]:
        return ["gcloud", *self.path, *self.args, *self.flags]

    @property
    def flag_names(self) -> set[str]:
        return {flag.split("=", 1)[0] for flag in self.flags}

    def __str__(self) -> str:
        shown = shlex.join(self.argv)
        return f"{shown} < ({self.stdin.label})" if self.stdin else shown


@dataclass(frozen=True)
class Change:
    """A command that creates, updates or removes something, and why it is needed."""

    verb: str
    command: Command
    why: str = ""
    # A failure whose stderr matches is retried: IAM takes seconds to see a new service account.
    retry_if: str | None = None
    # Printed under the command, a line each: why a value it sets is what it is.
    notes: tuple[str, ...] = ()


class PlanError(Exception):
    """The project is in a state the deploy must not change on its own; says what to do."""


class Skipped(Exception):
    """A step that has nothing to act on; the message says why and what would change that."""


@dataclass
class Outputs:
    """What running steps learn that later steps need: the functions' URLs, known before
    any of them is built (infra.resources.Project)."""

    dry_run: bool = False
    urls: dict[str, str] = field(default_factory=dict)

    def url(self, role: str) -> str:
        if role in self.urls:
            return self.urls[role]
        if self.dry_run:
            return f"<url of {role}>"
        raise PlanError(f"the URL of {role} is unknown: the project step must run first")


class Step(ABC):
    """One resource: how to look at it and how to bring it to the wanted state."""

    title: str
    # Describe again after the changes, so that `learn` sees the resource as it now is.
    refresh: bool = False

    @abstractmethod
    def check(self) -> Command | None:
        """The describe command; its JSON output is `found`, None when it says NOT_FOUND."""

    @abstractmethod
    def changes(self, found: Any, outputs: Outputs) -> list[Change]:
        """What to run so the resource matches the settings; empty when it already does."""

    def existing(self) -> Any:
        """What `check` finds once the resource exists, as a destroy's dry run presumes it
        (default: a description with nothing more in it)."""
        return {}

    def learn(self, found: Any, outputs: Outputs) -> None:
        """Record what later steps need from this resource (default: nothing)."""
        return None


def gcloud(
    project: str,
    *path: str,
    args: tuple[str, ...] = (),
    flags: tuple[str, ...] = (),
    json: bool = False,
    stdin: Input | None = None,
) -> Command:
    """A command against `project`, never prompting; `json` asks for machine-readable output."""
    extra = ("--format=json",) if json else ()
    return Command(path, args, (*flags, *extra, f"--project={project}", "--quiet"), stdin)
