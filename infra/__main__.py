"""`python -m infra deploy|destroy|stage|summary`: the commands behind make deploy, destroy and
stage, and README's list of what a deploy creates."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from infra.plan import deploy_plan, destroy_plan
from infra.runner import Runner, StepFailed
from infra.settings import DEFAULT_FILE, Settings, SettingsError, load
from infra.stage import StageError, stage
from infra.steps import PlanError
from infra.summary import summary

REPO_ROOT = Path(__file__).resolve().parent.parent
CARD_PATH = "/.well-known/agent-card.json"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load(args.settings, os.environ)
        if args.command == "stage":
            return _stage(settings, args.repo_root, args.stage_dir)
        if args.command == "summary":
            print(
                summary(settings.model_copy(update={"project": settings.project or "my-project"}))
            )
            return 0
        if not settings.project:
            raise SettingsError("no project: run make deploy PROJECT=my-project")
        runner = Runner(settings.project, dry_run=args.dry_run, out=sys.stdout)
        if args.command == "deploy":
            return _deploy(settings, runner, args.repo_root, args.stage_dir)
        return _destroy(settings, runner, yes=args.yes, delete_database=args.delete_database)
    except (SettingsError, StageError, PlanError, StepFailed) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m infra", description=__doc__)
    parser.add_argument("--settings", type=Path, default=DEFAULT_FILE, help="deploy settings file")
    parser.add_argument("--repo-root", type=Path, default=REPO_ROOT, help="what gets staged")
    parser.add_argument(
        "--stage-dir", type=Path, default=REPO_ROOT / "build" / "stage", help="staging folders"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        default=os.environ.get("DRY_RUN", "") not in ("", "0", "false", "no"),
        help="print the commands, run none (also DRY_RUN=1)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("deploy", help="create or update everything, then print the card URL")
    destroy = commands.add_parser("destroy", help="remove what deploy created")
    destroy.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    destroy.add_argument(
        "--delete-database", action="store_true", help="also delete the Firestore database"
    )
    commands.add_parser("stage", help="build the staging folders only")
    commands.add_parser("summary", help="print README's list of what deploy creates")
    return parser


def _callers(settings: Settings) -> str:
    """Who may call the deployed agent, and with what (docs/security.md: Who may call the agent)."""
    gate = "IAM (roles/run.invoker)" if settings.auth == "authenticated" else "anyone (public)"
    send = {
        "none": "no credentials; every caller is the same owner",
        "api-key": "an API key from A2A_API_KEYS in X-API-Key",
        "google": "Authorization: Bearer <Google ID token for the agent's URL>",
        "oidc": "Authorization: Bearer <ID token of A2A_OIDC_ISSUER>",
    }[settings.identity]
    return f"{gate}, A2A_AUTH={settings.identity}: {send}"


def _stage(settings: Settings, repo_root: Path, stage_dir: Path) -> int:
    for role in ("a2a", "worker", "deliver"):
        staged = stage(
            repo_root,
            role,
            stage_dir / role,
            settings.handler,
            settings.functions.extras,
            agent=settings.agent_folder,
        )
        print(f"staged {role}: {staged.path} (source {staged.source_hash})")
    return 0


def _deploy(settings: Settings, runner: Runner, repo_root: Path, stage_dir: Path) -> int:
    steps = deploy_plan(settings, repo_root, stage_dir)
    print(f"deploying to project {settings.project}, region {settings.region}: {len(steps)} steps")
    outputs = runner.run(steps)
    print(f"worker:  {outputs.url('worker')}")
    print(f"deliver: {outputs.url('deliver')}")
    print(f"callers: {_callers(settings)}")
    print(f"agent card: {outputs.url('a2a')}{CARD_PATH}")
    return 0


def _destroy(settings: Settings, runner: Runner, *, yes: bool, delete_database: bool) -> int:
    steps = destroy_plan(settings, delete_database=delete_database)
    if not (yes or runner.dry_run):
        print(f"This removes from project {settings.project} (whatever of it exists):")
        for step in steps:
            print(f"  - {step.title}")
        if not delete_database:
            print("The Firestore database and its data stay (add --delete-database to remove).")
        print("Deleted queue names cannot be reused for about 7 days.")
        answer = input(f"Type the project id ({settings.project}) to confirm: ")
        if answer.strip() != settings.project:
            print("not confirmed: nothing removed")
            return 1
    runner.run(steps, removing=True)
    print("destroyed" if not runner.dry_run else "dry run: nothing removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
