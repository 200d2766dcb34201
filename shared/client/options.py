"""The `a2a` command line: commands and options as the A2A CLI specification v0.2 names them
(its section 7), each option's value from its flag, else its `A2ACLI_*` variable, else the
built-in default (section 6.5); `--help` shows each effective value and where it came from.

Options are accepted before or after the command (`a2a send --text hi -o json`). `--stream`
is never read from the environment (section 11.3), nor are the kit's own options that trust
something (`--send-credentials-to`, `--trust-key`) or the send's content.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from shared.client.errors import USAGE, ClientError

DEFAULT_AGENT_CARD = "http://localhost:8080"
DEFAULT_POLL_INTERVAL = 2.0  # seconds: the specification's recommended default (section 9.3)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def duration(text: str) -> float:
    """`30`, `30s`, `500ms`, `2m`, `1h`: seconds."""
    found = _DURATION.match(text.strip().lower())
    if not found:
        raise ValueError(f"{text!r} is not a duration (30, 30s, 500ms, 2m)")
    return float(found.group(1)) * _UNITS[found.group(2) or "s"]


@dataclass(frozen=True)
class Option:
    """A global option: its flags, its variable (None: flag only) and built-in default."""

    dest: str
    flags: tuple[str, ...]
    help: str
    env: str | None = None
    default: Any = None
    kind: str = "value"  # value | flag | list
    parse: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    secret: bool = False  # --help says "set", never the value
    note: str = ""  # what --help adds to the value


OPTIONS = (
    Option(
        "agent_card",
        ("-a", "--agent-card"),
        "the agent: a host or origin (its /.well-known/agent-card.json), a card URL, or a "
        "card file",
        "A2ACLI_AGENT_CARD",
        DEFAULT_AGENT_CARD,
        metavar="REF",
    ),
    Option(
        "output",
        ("-o", "--output"),
        "text (Label: value lines) or json (the protocol's objects)",
        "A2ACLI_OUTPUT",
        "text",
        choices=("text", "json"),
    ),
    Option(
        "stream",
        ("--stream",),
        "follow the agent's live events (JSON Lines with -o json)",
        kind="flag",
    ),
    Option(
        "async_",
        ("--async", "--return-immediately", "--no-wait"),
        "send: return the task's ids at once, not waiting for its end",
        "A2ACLI_ASYNC",
        False,
        kind="flag",
    ),
    Option(
        "wait",
        ("--wait", "--watch"),
        "wait for the task's end or a question (send's default; task get polls)",
        "A2ACLI_WAIT",
        False,
        kind="flag",
        note="send waits unless --async",
    ),
    Option(
        "poll_interval",
        ("--poll-interval",),
        "longest pause between two polls of a waited task (the first come sooner)",
        "A2ACLI_POLL_INTERVAL",
        DEFAULT_POLL_INTERVAL,
        parse=duration,
        metavar="DURATION",
    ),
    Option(
        "timeout",
        ("--timeout",),
        "give up waiting after this long (exit 5, A2ACLI_ERR_TIMEOUT)",
        "A2ACLI_TIMEOUT",
        None,
        parse=duration,
        metavar="DURATION",
    ),
    Option(
        "context_id",
        ("--context-id",),
        "send: a new task in this context",
        "A2ACLI_CONTEXT_ID",
        metavar="ID",
    ),
    Option(
        "task_id",
        ("--task-id",),
        "send: continue this task (one waiting for input)",
        "A2ACLI_TASK_ID",
        metavar="ID",
    ),
    Option(
        "a2a_version",
        ("--a2a-version",),
        "the A2A version to speak: 1.0, or 0.3 (legacy, only when asked)",
        "A2ACLI_A2A_VERSION",
        "1.0",
        choices=("1.0", "0.3"),
    ),
    Option(
        "transport",
        ("--transport",),
        "a binding you prefer, repeatable, first preferred (JSONRPC; the card's order else)",
        "A2ACLI_TRANSPORT",
        [],
        kind="list",
        metavar="BINDING",
    ),
    Option(
        "bearer",
        ("--bearer",),
        "a bearer token (OIDC, a Google ID token); visible to `ps`: prefer A2ACLI_BEARER",
        "A2ACLI_BEARER",
        secret=True,
        metavar="TOKEN",
    ),
    Option(
        "api_key",
        ("--api-key",),
        "an API key, in the header the card names; visible to `ps`: prefer A2ACLI_API_KEY",
        "A2ACLI_API_KEY",
        secret=True,
        metavar="KEY",
    ),
    Option(
        "google",
        ("--google",),
        "a Google ID token for the agent, from Application Default Credentials or gcloud",
        kind="flag",
        default=False,
    ),
    Option(
        "send_credentials_to",
        ("--send-credentials-to",),
        "also send credentials to this origin (repeatable; default: the card's origin only)",
        kind="list",
        default=[],
        metavar="ORIGIN",
    ),
    Option(
        "svc_param",
        ("--svc-param",),
        "an A2A service parameter (an HTTP header) KEY:VALUE, repeatable",
        kind="list",
        default=[],
        metavar="KEY:VALUE",
    ),
    Option(
        "insecure",
        ("--insecure",),
        "do not verify TLS certificates (development only; warns)",
        "A2ACLI_INSECURE",
        False,
        kind="flag",
    ),
    Option(
        "files",
        ("--files",),
        "write file parts' bytes under DIR (default: described, never written)",
        "A2ACLI_FILES",
        metavar="DIR",
    ),
    Option(
        "verbose",
        ("--verbose",),
        "show everything exchanged: history, part metadata, the whole card",
        "A2ACLI_VERBOSE",
        False,
        kind="flag",
    ),
    Option(
        "debug",
        ("--debug",),
        "log each HTTP exchange to stderr (credentials redacted)",
        "A2ACLI_DEBUG",
        False,
        kind="flag",
    ),
)


class _Parser(argparse.ArgumentParser):
    """argparse that raises a ClientError (A2ACLI_ERR_USAGE) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise ClientError(
            f"{self.prog}: {message}", error=USAGE, hint=f"`{self.prog} --help` shows the usage"
        )


class _Part(argparse.Action):
    """`--text`, `--file`, `--data`: one part each, in the order given."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        parts = list(getattr(namespace, "parts", None) or [])
        parts.append({"kind": self.dest, "value": values, "media_type": None})
        namespace.parts = parts


class _MediaType(argparse.Action):
    """`--media-type` sets the media type of the part flag just before it."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        parts = getattr(namespace, "parts", None) or []
        if not parts or parts[-1]["media_type"] is not None:
            parser.error("--media-type follows the --text, --file or --data it describes")
        parts[-1]["media_type"] = values


def effective(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """Each option's value and its source: the flag, the variable, the built-in default."""
    values: dict[str, tuple[Any, str]] = {}
    for option in OPTIONS:
        if hasattr(args, option.dest):
            values[option.dest] = (getattr(args, option.dest), "flag")
        elif option.env is not None and option.env in environ:
            values[option.dest] = (_from_env(option, environ[option.env]), option.env)
        else:
            default = list(option.default) if option.kind == "list" else option.default
            values[option.dest] = (default, "built-in default")
    return values


def _from_env(option: Option, text: str) -> Any:
    try:
        if option.kind == "flag":
            if text.strip().lower() not in (*_TRUE, *_FALSE):
                raise ValueError(f"{text!r} is not one of {', '.join(_TRUE + _FALSE[1:])}")
            return text.strip().lower() in _TRUE
        if option.kind == "list":
            return [item.strip() for item in text.split(",") if item.strip()]
        value = option.parse(text)
    except ValueError as exc:
        raise ClientError(f"{option.env}: {exc}", error=USAGE) from None
    if option.choices and value not in option.choices:
        raise ClientError(f"{option.env}={text!r}: one of {', '.join(option.choices)}", error=USAGE)
    return value


def defaults_text(environ: Mapping[str, str]) -> str:
    """The effective defaults, for --help: the value, and which variable set it."""
    lines = ["effective defaults (a flag overrides; then the variable; then the built-in):"]
    resolved = effective(argparse.Namespace(), environ)
    for option in OPTIONS:
        if option.env is None:
            continue
        value, source = resolved[option.dest]
        shown = ("set" if value else "unset") if option.secret else _shown(value)
        shown += f" ({option.note})" if option.note else ""
        lines.append(
            f"  {option.flags[-1] if option.kind != 'flag' else option.flags[0]:<16}"
            f" {shown:<24} ({source}; {option.env})"
        )
    return "\n".join(lines)


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(value) or "none"
    return (
        "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    )


def _common() -> argparse.ArgumentParser:
    """The global options, every default suppressed: `effective` tells given from not."""
    common = _Parser(add_help=False, argument_default=argparse.SUPPRESS)
    for option in OPTIONS:
        kwargs: dict[str, Any] = {"help": option.help, "dest": option.dest}
        if option.kind == "flag":
            kwargs["action"] = "store_true"
        else:
            kwargs["action"] = "append" if option.kind == "list" else "store"
            kwargs["type"] = option.parse
            kwargs["metavar"] = option.metavar or option.dest.upper()
            if option.choices:
                kwargs["choices"] = option.choices
        common.add_argument(*option.flags, **kwargs)
    return common


@dataclass
class Commands:
    """The parser and each command's parser by its words (`a2a help task get`)."""

    parser: argparse.ArgumentParser
    by_words: dict[tuple[str, ...], argparse.ArgumentParser]


class _Version(argparse.Action):
    """`-v/--version`: the installed package's version, read only when asked."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        from importlib import metadata

        try:
            version = metadata.version("a2a-functions")
        except metadata.PackageNotFoundError:
            version = "unknown"
        print(f"a2a {version}")
        parser.exit()


def build(handlers: Mapping[str, Callable[..., int]], epilog: str) -> Commands:
    """The `a2a` parser; `handlers` maps each command's name (`task get`) to its function."""
    common = _common()
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog="a2a",
        description="Talk to an A2A agent (the A2A CLI specification v0.2, Tier 1): its card, "
        "messages, tasks.",
        epilog=epilog,
        formatter_class=formatter,
        parents=[common],
    )
    parser.add_argument(
        "-v", "--version", action=_Version, nargs=0, help="print the version and exit"
    )
    by_words: dict[tuple[str, ...], argparse.ArgumentParser] = {(): parser}

    def command(group: Any, words: tuple[str, ...], help_text: str) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = group.add_parser(
            words[-1], help=help_text, parents=[common], epilog=epilog, formatter_class=formatter
        )
        name = " ".join(words)
        if name in handlers:
            sub.set_defaults(command_fn=handlers[name], command_name=name)
        by_words[words] = sub
        return sub

    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    help_parser = command(commands, ("help",), "usage of a2a or of one command")
    help_parser.add_argument("words", nargs="*", metavar="COMMAND")

    cards = command(commands, ("card",), "the agent card").add_subparsers(
        dest="card_command", required=True, metavar="get"
    )
    card = command(cards, ("card", "get"), "fetch the agent card and show it")
    card.add_argument("--verify", action="store_true", help="check its signatures (A2A 8.4)")
    card.add_argument(
        "--trust-key",
        action="append",
        default=[],
        metavar="THUMBPRINT",
        help="trust an embedded key of this RFC 7638 thumbprint (repeatable; written "
        "--trust-key=THUMBPRINT, as one may start with -)",
    )
    card.add_argument("--trust-jwks", metavar="FILE", help="trust the keys of this JWKS file")

    _add_send(command(commands, ("send",), "send a message; wait for the task's end"))
    tasks = command(
        commands, ("task",), "a task: get, cancel, list, download, subscribe, push-config"
    )
    _add_tasks(tasks.add_subparsers(dest="task_command", required=True, metavar="ACTION"), command)

    watch = command(commands, ("watch",), "follow a task's events (as task subscribe)")
    watch.add_argument("task", metavar="TASK")
    command(commands, ("chat",), "a conversation: one message per line of stdin")
    return Commands(parser, by_words)


def _add_send(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("words", nargs="*", metavar="TEXT", help="a text part (words joined)")
    sub.add_argument("--text", action=_Part, help="a text part (repeatable)")
    sub.add_argument("--file", action=_Part, metavar="PATH|URL", help="a file part (repeatable)")
    sub.add_argument(
        "--data", action=_Part, metavar="PATH|-", help="a JSON data part from a file or stdin"
    )
    sub.add_argument(
        "--media-type", action=_MediaType, metavar="TYPE", help="the part flag before it's type"
    )
    sub.add_argument("--metadata", metavar="JSON", help="the message's metadata (an object)")
    sub.add_argument("--push", metavar="URL", help="POST the task's updates to this webhook")
    sub.add_argument("--push-token", metavar="TOKEN", help="the token the webhook receives")


def _add_tasks(actions: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    get = command(actions, ("task", "get"), "a task: state, artifacts (--history N messages)")
    get.add_argument("task", metavar="TASK")
    get.add_argument("--history", type=int, metavar="N", help="with its last N messages")

    cancel = command(actions, ("task", "cancel"), "cancel a task")
    cancel.add_argument("task", metavar="TASK")

    listing = command(actions, ("task", "list"), "tasks, newest first")
    listing.add_argument("--context", dest="list_context", metavar="ID", help="of this context")
    listing.add_argument("--status", metavar="STATE", help="in this state (WORKING, ...)")
    listing.add_argument("--page-size", type=int, metavar="N", help="per page (1 to 100)")
    listing.add_argument("--page-token", metavar="TOKEN", help="the page after this token")
    listing.add_argument("--all", action="store_true", help="every page")

    download = command(actions, ("task", "download"), "write a task's file artifacts to disk")
    download.add_argument("task", metavar="TASK")
    download.add_argument("--dir", default=".", help="under this directory (default: here)")

    subscribe = command(actions, ("task", "subscribe"), "follow a task's events to its end")
    subscribe.add_argument("task", metavar="TASK")

    push = command(actions, ("task", "push-config"), "a task's push notification configs")
    verbs = push.add_subparsers(dest="push_command", required=True, metavar="ACTION")
    create = command(verbs, ("task", "push-config", "create"), "POST the task's updates to URL")
    create.add_argument("task", metavar="TASK")
    create.add_argument("webhook", metavar="URL")
    create.add_argument("--token", dest="config_token", help="the token the webhook receives")
    create.add_argument("--id", dest="config_id", help="the config's id (default: the agent's)")
    for verb, help_text in (("get", "one config"), ("delete", "remove one")):
        one = command(verbs, ("task", "push-config", verb), help_text)
        one.add_argument("task", metavar="TASK")
        one.add_argument("config_id", metavar="ID")
    command(verbs, ("task", "push-config", "list"), "the task's configs").add_argument(
        "task", metavar="TASK"
    )


def parse(
    commands: Commands, argv: Sequence[str], environ: Mapping[str, str]
) -> argparse.Namespace:
    """The arguments, every global option resolved (flag > variable > default)."""
    args = commands.parser.parse_args(list(argv))
    for dest, (value, _) in effective(args, environ).items():
        setattr(args, dest, value)
    if not hasattr(args, "parts"):
        args.parts = []
    return args
