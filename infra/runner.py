"""Runs a plan with gcloud: check each resource, apply its changes, stop at the first failure.

Every step prints one line saying what it is and what it does; a failure says which step, what
gcloud answered, and what to run to fix the usual causes (permission, API, billing, login).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from infra.steps import Change, Command, Outputs, PlanError, Skipped, Step

_NOT_FOUND = re.compile(r"NOT_FOUND|not found|does not exist|status=\[404\]", re.IGNORECASE)
RETRIES = 6


class StepFailed(Exception):
    """A step could not be completed; the message is the full report for the user."""


@dataclass(frozen=True)
class Result:
    """What a gcloud run returned."""

    code: int
    stdout: str
    stderr: str


FALLBACK = "fix the cause above and run the same command again: finished steps are skipped"


def diagnose(stderr: str, project: str) -> str | None:
    """What to run about a gcloud failure, for the causes a first deploy usually meets."""
    api = re.search(r"([a-z0-9-]+\.googleapis\.com)", stderr)
    if re.search(r"billing", stderr, re.IGNORECASE):
        return (
            f"billing is not enabled on {project}: find your account with "
            f"`gcloud billing accounts list`, then run `gcloud billing projects link {project} "
            "--billing-account=ACCOUNT_ID`"
        )
    if re.search(
        r"SERVICE_DISABLED|has not been used in project|API .*(disabled|not enabled)", stderr
    ):
        name = api.group(1) if api else "THE_API.googleapis.com"
        return f"an API is not enabled: run `gcloud services enable {name} --project={project}`"
    if re.search(r"allowedPolicyMemberDomains|do not belong to a permitted customer", stderr):
        return (
            "an organization policy forbids public access: deploy with AUTH=authenticated "
            "(make deploy AUTH=authenticated)"
        )
    if re.search(r"build service account|cloudbuild\.builds\.builder", stderr):
        return (
            "Cloud Build cannot build the function as its build account: the deploy grants "
            "that account its roles before the first build (BUILD_SERVICE_ACCOUNT, steps "
            "'... on project'); IAM may take a minute to apply them, so run make deploy "
            "again; if it fails the same way, an organization policy may restrict the account"
        )
    if re.search(
        r"no active account|not currently have an active account|auth login|"
        r"Reauthentication",
        stderr,
        re.IGNORECASE,
    ):
        return "gcloud is not logged in: run `gcloud auth login`, then make deploy again"
    if re.search(
        r"PERMISSION_DENIED|does not have permission|Permission .* denied|status=\[403\]",
        stderr,
        re.IGNORECASE,
    ):
        permission = re.search(r"[Pp]ermission[s]? '?\"?([a-z]+\.[A-Za-z.]+)", stderr)
        needed = f" ({permission.group(1)})" if permission else ""
        return (
            f"the account gcloud uses lacks a permission{needed} on {project}: check it with "
            "`gcloud auth list`; a project owner can grant it with `gcloud projects "
            f"add-iam-policy-binding {project} --member=user:YOU@example.com --role=roles/owner` "
            "(or the narrower roles listed in README.md, section 'Deploy to Google Cloud')"
        )
    return None


class Runner:
    """Executes steps in order (or, in a dry run, prints what it would execute)."""

    def __init__(
        self,
        project: str,
        *,
        dry_run: bool = False,
        out: IO[str],
        retry_delay: float = 10.0,
    ) -> None:
        self.project = project
        self.dry_run = dry_run
        self.out = out
        self.retry_delay = retry_delay

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def run(self, steps: Sequence[Step], *, removing: bool = False) -> Outputs:
        """Run `steps`; a dry run prints what they run on a project where each resource is
        missing (a first deploy) or, `removing`, present (a destroy: every delete)."""
        outputs = Outputs(dry_run=self.dry_run)
        if self.dry_run and removing:
            self.say(
                "dry run: printing every command a destroy runs, each resource taken as "
                "present (one that is missing is skipped); nothing is executed"
            )
        elif self.dry_run:
            self.say("dry run: printing the commands a first deploy runs; nothing is executed")
        for number, step in enumerate(steps, 1):
            label = f"[{number}/{len(steps)}] {step.title}"
            try:
                if self.dry_run:
                    self._print(label, step, outputs, step.existing() if removing else None)
                else:
                    self._apply(label, step, outputs)
            except Skipped as skipped:
                self.say(f"{label}: skipped: {skipped}")
            except PlanError as error:
                raise StepFailed(f"step {label} failed: {error}") from error
        return outputs

    def _print(self, label: str, step: Step, outputs: Outputs, found: Any) -> None:
        check = step.check()
        changes = step.changes(found, outputs)
        self.say(f"{label}")
        if check is not None:
            self.say(f"  check:  {check}")
        for change in changes:
            self.say(f"  {change.verb + ':':7} {change.command}")
            self._notes(change)

    def _notes(self, change: Change) -> None:
        for note in change.notes:
            self.say(f"  # {note}")

    def _apply(self, label: str, step: Step, outputs: Outputs) -> None:
        found = self._check(label, step)
        changes = step.changes(found, outputs)
        if not changes:
            self.say(f"{label}: up to date")
        for change in changes:
            why = f" ({change.why})" if change.why else ""
            self.say(f"{label}: {change.verb}{why}")
            self.say(f"  $ {change.command}")
            self._notes(change)
            started = time.monotonic()
            self._change(label, change)
            self.say(f"  done in {time.monotonic() - started:.1f} s")
        if changes and step.refresh:
            found = self._check(label, step)
        if found is not None:
            step.learn(found, outputs)

    def _check(self, label: str, step: Step) -> Any:
        command = step.check()
        if command is None:
            return None
        result = execute(command)
        if result.code == 0:
            return json.loads(result.stdout) if result.stdout.strip() else {}
        hint = diagnose(result.stderr, self.project)
        # "Permission denied (or it may not exist)" is a failure, not an absence.
        if hint is None and _NOT_FOUND.search(result.stderr):
            return None
        raise self._failure(label, "check", command, result, hint)

    def _change(self, label: str, change: Change) -> None:
        for attempt in range(RETRIES):
            result = execute(change.command, echo=self.out)
            if result.code == 0:
                return
            transient = change.retry_if and re.search(change.retry_if, result.stderr)
            if not transient or attempt == RETRIES - 1:
                break
            self.say(f"  not visible yet, retrying in {self.retry_delay:.0f} s")
            time.sleep(self.retry_delay)
        hint = diagnose(result.stderr, self.project)
        raise self._failure(label, change.verb, change.command, result, hint)

    def _failure(
        self, label: str, verb: str, command: Command, result: Result, hint: str | None
    ) -> StepFailed:
        said = (
            "\n".join(f"    {line}" for line in result.stderr.strip().splitlines())
            or "    (nothing)"
        )
        return StepFailed(
            f"step {label} failed ({verb}, exit {result.code})\n"
            f"  command: {command}\n"
            f"  gcloud said:\n{said}\n"
            f"  to fix: {hint or FALLBACK}"
        )


def execute(command: Command, echo: IO[str] | None = None) -> Result:
    """Run one gcloud command; with `echo`, its progress (stderr) is shown as it comes; its
    `stdin` (a generated secret) is made and written to it (and closed) first."""
    try:
        process = subprocess.Popen(
            command.argv,
            stdin=subprocess.PIPE if command.stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except FileNotFoundError as error:
        raise StepFailed(
            "gcloud is not on PATH: install the Google Cloud SDK "
            "(https://cloud.google.com/sdk/docs/install), then run `gcloud auth login`"
        ) from error
    with process:
        assert process.stdout is not None and process.stderr is not None
        if command.stdin is not None:
            assert process.stdin is not None
            with process.stdin:  # a few hundred bytes: within the pipe's buffer, then EOF
                process.stdin.write(command.stdin.make().decode())
        out_pipe, err_pipe = process.stdout, process.stderr
        stdout: list[str] = []
        # stdout is drained on the side so a chatty command cannot block on a full pipe.
        reader = threading.Thread(target=lambda: stdout.extend(out_pipe))
        reader.start()
        stderr: list[str] = []
        for line in err_pipe:
            stderr.append(line)
            if echo is not None:
                print(f"  | {line.rstrip()}", file=echo, flush=True)
        reader.join()
    return Result(process.returncode, "".join(stdout), "".join(stderr))
