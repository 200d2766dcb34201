"""`a2a`: talk to an A2A agent from a terminal or a script (the `cli` extra's console script),
as the A2A CLI specification v0.2 has a client do it (Tier 1; docs/cli.md says what else).

    a2a card get [--verify]                      the agent card
    a2a send [TEXT...] [--text T] [--file P [--media-type M]] [--data PATH|-] ...
    a2a task get TASK [--history N] [--wait]     a task; --wait polls to its end
    a2a task cancel TASK | task list | task subscribe TASK | task push-config ...
    a2a watch TASK | a2a chat | a2a help [COMMAND]

The exit status says whether the CLI did its job, never how the agent's task ended (the
specification's section 6.6): 0 when the exchange was conducted and reported, even for a
task that FAILED, was REJECTED or waits for input (a warning on stderr names it, with the
command that answers); 1 a failure, 2 a usage error, 3 an agent or card out of reach, 4 an
authentication failure, 5 --timeout expired; 130 interrupted. A failure is one
`a2a: error: CODE: ...` line on stderr (with `-o json`, the specification's error object on
stdout): CODE is A2A's error name for a protocol error, an `A2ACLI_ERR_*` code for the CLI's.
"""

from __future__ import annotations

import argparse
import base64
import json
import mimetypes
import os
import re
import shlex
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from shared.client import options
from shared.client.credentials import google_id_token
from shared.client.errors import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    UNSUPPORTED_OPERATION,
    USAGE,
    ClientError,
)
from shared.client.render import Renderer, printable, short_state, state_of, text_of
from shared.client.session import (
    BINDING_NAMES,
    INTERRUPTED,
    TERMINAL,
    Session,
    card_interfaces,
    delivery_failure,
)
from shared.client.shapes import mapping, objects
from shared.client.transport import Event, Transport, origin

# Read at most this much of a --file or --data: the agent's default request limit
# (A2A_MAX_BODY_BYTES) is 10 MiB, and base64 makes a file a third larger.
MAX_FILE_BYTES = 7 * 1024 * 1024
MAX_RECONNECTS = 5  # resubscriptions in a row that bring nothing before polling instead
FIRST_POLL = 0.25  # seconds before the first poll; each pause doubles, to --poll-interval
_URL = re.compile(r"^https?://", re.IGNORECASE)
_SVC_PARAM = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]{0,63}):(.*)$")
_OUTCOMES = {
    "TASK_STATE_FAILED": "the task FAILED",
    "TASK_STATE_REJECTED": "the agent REJECTED the task",
    "TASK_STATE_CANCELED": "the task was CANCELED",
    "TASK_STATE_INPUT_REQUIRED": "the task waits for input (INPUT_REQUIRED)",
    "TASK_STATE_AUTH_REQUIRED": "the task waits for authorization (AUTH_REQUIRED)",
}
EXIT_STATUS = """exit status:
  0    the CLI did its job: the exchange was conducted and reported, whatever the task's
       outcome (FAILED, REJECTED, INPUT_REQUIRED: named by a warning on stderr)
  1    a failure (a2a: error: CODE: ... on stderr; -o json: an error object on stdout)
  2    a usage error (A2ACLI_ERR_USAGE)
  3    the agent or its card cannot be reached or found (A2ACLI_ERR_UNREACHABLE,
       A2ACLI_ERR_CARD_NOT_FOUND)
  4    credentials missing or refused (A2ACLI_ERR_CREDENTIALS_MISSING, A2ACLI_ERR_AUTH_FAILED)
  5    --timeout expired (A2ACLI_ERR_TIMEOUT)
  130  interrupted"""


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    commands = options.build(HANDLERS, _epilog())
    as_json = _asks_json(arguments)
    try:
        args = options.parse(commands, arguments, os.environ)
    except ClientError as exc:
        return _failed(exc, as_json)
    if args.command_name == "help":
        return _help(commands, args.words)
    out = Renderer(
        files=Path(args.files) if args.files else None,
        as_json=args.output == "json",
        verbose=args.verbose,
    )
    transport = Transport(verify=not args.insecure, debug=sys.stderr if args.debug else None)
    try:
        session = _session(args, transport)
        return int(args.command_fn(session, args, out))
    except ClientError as exc:
        return _failed(exc, out.as_json)
    except KeyboardInterrupt:
        print("a2a: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader left (`| head`): nothing more can be reported, and Python's own flush
        # at exit must not fail again on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILURE
    finally:
        transport.close()


def _session(args: argparse.Namespace, transport: Transport) -> Session:
    """The agent, with the service parameters and credentials the caller gave."""
    for item in args.svc_param:
        found = _SVC_PARAM.match(item)
        if not found:
            raise ClientError(f"--svc-param {item!r} is not KEY:VALUE", error=USAGE)
        transport.headers[found.group(1)] = found.group(2).strip()
    trusted = []
    for given in args.send_credentials_to:
        trusted_origin = origin(given)
        if trusted_origin is None:
            raise ClientError(f"--send-credentials-to {given!r} is no http(s) origin", error=USAGE)
        trusted.append(trusted_origin)
    transports = []
    for name in args.transport:
        binding = BINDING_NAMES.get(name.upper())
        if binding is None:
            raise ClientError(f"--transport {name!r}: one of JSONRPC, HTTP+JSON, GRPC", error=USAGE)
        transports.append(binding)
    if args.timeout is not None:
        transport.deadline = time.monotonic() + args.timeout
    session = Session(
        args.agent_card,
        transport,
        version=args.a2a_version,
        transports=transports,
        api_key=args.api_key,
        trusted=trusted,
    )
    if args.bearer and args.google:
        raise ClientError("--bearer and --google both set the Authorization", error=USAGE)
    if args.bearer:
        transport.credentials["Authorization"] = f"Bearer {args.bearer}"
    elif args.google:
        where = urlsplit(session.source.url or "")
        if not where.netloc:
            raise ClientError("--google needs the card's URL (its audience)", error=USAGE)
        token = google_id_token(f"{where.scheme}://{where.netloc}")
        transport.credentials["Authorization"] = f"Bearer {token}"
    if args.api_key:
        transport.credentials["X-API-Key"] = args.api_key  # the card may name another header
    if args.insecure:
        _warn(
            "--insecure: TLS certificates are not verified"
            + (
                "; the credentials sent can be read by anyone between you and the agent"
                if transport.credentials
                else ""
            )
        )
    return session


def _endpoint(session: Session) -> None:
    """Say when the card's endpoint is off its origin: no credentials go there."""
    transport = session.transport
    where = origin(session.url)
    if transport.credentials and where not in transport.trusted:
        _warn(
            f"the card's endpoint {session.url} is not on the origin the card came from "
            f"({session.source.origin or 'a local file'}): no credentials are sent to it "
            f"(--send-credentials-to {where} sends them)"
        )


# -- commands -------------------------------------------------------------------------------


def card_get(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    card = session.card
    signatures: list[dict[str, Any]] | None = None
    if args.verify:
        from shared.client import card_trust  # PyJWT and JCS: only for --verify

        jwks = card_trust.load_jwks(Path(args.trust_jwks)) if args.trust_jwks else None
        signatures = card_trust.verify(session, frozenset(args.trust_key), jwks)
        if signatures is None:
            _warn("the card carries no signatures: there is nothing to verify")
    if out.as_json:
        out.json(card)
        if signatures:
            print(f"a2a: signatures: {_verified(signatures)}", file=sys.stderr)
        return 0
    _card_text(session, card, out)
    if args.verify:
        out.field("Signatures", _verified(signatures) if signatures else "absent")
    else:
        out.field(
            "Signatures", "present, not checked (--verify)" if card.get("signatures") else "absent"
        )
    if out.verbose:
        out.block("Card", json.dumps(card, indent=2, ensure_ascii=False))
    return 0


def _verified(signatures: list[dict[str, Any]]) -> str:
    shown = ", ".join(f"kid {key['kid']!r} from {key['key']}" for key in signatures)
    return f"{len(signatures)} verified ({shown})"


def _card_text(session: Session, card: dict[str, Any], out: Renderer) -> None:
    out.field("Name", card.get("name"))
    for label, key in (("Description", "description"), ("Version", "version")):
        if card.get(key):
            out.field(label, card[key])
    provider = card.get("provider")
    if isinstance(provider, dict) and provider.get("organization"):
        out.field("Provider", provider["organization"])
    capabilities = mapping(card.get("capabilities"))
    for label, key in (
        ("Streaming", "streaming"),
        ("Push Notifications", "pushNotifications"),
        ("Extended Card", "extendedAgentCard"),
    ):
        out.field(label, str(bool(capabilities.get(key))).lower())
    for interface in card_interfaces(card):
        out.field("Interface", interface)
    try:
        out.field("Selected Interface", session.interface)
    except ClientError as exc:
        out.field("Selected Interface", f"none: {exc}")
    schemes = card.get("securitySchemes")
    for name, scheme in (schemes if isinstance(schemes, dict) else {}).items():
        out.field("Security Scheme", f"{name}: {json.dumps(scheme, separators=(',', ':'))}")
    for skill in objects(card.get("skills")):
        out.field("Skill", f"{skill.get('id')}: {skill.get('name')}")


def send(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    if args.stream and args.async_:
        raise ClientError("--stream follows the task; --async leaves it: pick one", error=USAGE)
    if args.async_ and args.wait:
        raise ClientError("--wait and --async ask opposite things: pick one", error=USAGE)
    message = _message(args)
    push = _push_config(args.push, args.push_token)
    _endpoint(session)
    if push is not None:
        _push_capable(session)
    try:
        if args.stream and session.streaming:
            _follow(session, session.stream(message, push=push), out, args)
            return 0
        if args.stream:
            _warn("the agent's card declares no streaming: one answer instead, then polls")
        result = session.send(message, return_immediately=args.async_, push=push)
    except ClientError as exc:
        raise _refused(exc, args) from None
    task = result.get("task")
    if isinstance(task, dict) and not args.async_ and not _settled(task):
        if args.stream:
            out.response(result)
        task = _poll(session, task, args)
        result = {"task": task}
    out.response(result)
    if isinstance(task, dict):
        _report(task, out, args)
    return 0


def _refused(exc: ClientError, args: argparse.Namespace) -> ClientError:
    """A protocol error answering a message that named a task or context: said to have
    started nothing in their place (the specification's section 8.1)."""
    if exc.code is None or exc.hint or not (args.task_id or args.context_id):
        return exc
    return ClientError(
        str(exc),
        error=exc.error,
        code=exc.code,
        hint="the agent refused the --task-id/--context-id given, and no task was started in "
        "their place; --debug shows the exchange",
    )


def task_get(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    _endpoint(session)
    task = session.get(args.task, args.history)
    if args.wait and not _settled(task):
        task = _poll(session, task, args)
    out.task(task, history=bool(args.history))
    _report(task, out, args)
    return 0


def task_cancel(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    """Cancel, idempotently: a task already canceled is shown as it is, exit 0."""
    _endpoint(session)
    try:
        task = session.cancel(args.task)
    except ClientError as exc:
        if exc.code != TASK_NOT_CANCELABLE:
            raise
        task = session.get(args.task)
        if state_of(task) != "TASK_STATE_CANCELED":
            state = short_state(state_of(task))
            raise ClientError(
                f"{exc} (the task is {state})", error=exc.error, code=exc.code
            ) from None
        _warn(f"task {args.task} was canceled already")
    out.task(task)
    return 0


def task_download(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    """Write the bytes of the task's file artifacts under --dir; a file the agent only
    links to (a URL) is named, never fetched."""
    _endpoint(session)
    task = session.get(args.task)
    saver = Renderer(files=Path(args.dir))
    saved: list[str] = []
    for artifact in objects(task.get("artifacts")):
        for part in objects(artifact.get("parts")):
            if "raw" not in part:
                continue
            try:
                data = base64.b64decode(str(part["raw"]), validate=True)
            except ValueError:
                _warn(f"a file part of artifact {artifact.get('artifactId')} is not base64")
                continue
            fallback = str(artifact.get("artifactId") or "file")
            saved.append(saver.save(data, part.get("filename"), fallback))
    if out.as_json:
        out.json(task)
        for path in saved:
            print(f"a2a: saved {printable(path)}", file=sys.stderr)
    else:
        out.field("Task ID", task.get("id"))
        out.field("Context ID", task.get("contextId"))
        out.field("State", short_state(state_of(task)))
        for path in saved:
            out.field("Saved To", path)
    if not saved:
        _warn(f"task {args.task} has no file artifact with bytes to save")
    return 0


def task_list(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    _endpoint(session)
    token = args.page_token
    listed: list[dict[str, Any]] = []
    while True:
        page = session.list_tasks(
            context_id=args.list_context,
            state=args.status,
            page_size=args.page_size,
            page_token=token,
        )
        token = page.get("nextPageToken") or None
        listed += objects(page.get("tasks"))
        if not token or not args.all:
            break
    if out.as_json and args.stream:
        for task in listed:
            out.json(task)
    elif out.as_json:
        out.json({**page, "tasks": listed, "nextPageToken": token or ""})
    else:
        for task in listed:
            out.field("Task ID", task.get("id"))
            out.field("Context ID", task.get("contextId"))
            status = mapping(task.get("status"))
            out.field("State", short_state(status.get("state")))
            out.field("Updated", status.get("timestamp", ""))
            out.gap()
        if token:
            out.field("Next Page Token", token)
    return 0


def task_subscribe(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    _endpoint(session)
    _follow(session, session.subscribe(args.task), out, args, task_id=args.task)
    return 0


def _push_capable(session: Session) -> None:
    """A push config only for an agent whose card declares push notifications."""
    capabilities = mapping(session.card.get("capabilities"))
    if not capabilities.get("pushNotifications"):
        raise ClientError(
            "the agent's card declares no push notifications (capabilities.pushNotifications)",
            error="PushNotificationNotSupportedError",
            hint="follow the task with `a2a task subscribe TASK` or `a2a task get --wait TASK`",
        )


def push_create(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    _endpoint(session)
    _push_capable(session)
    config = session.push_add(
        args.task, args.webhook, token=args.config_token, config_id=args.config_id
    )
    _config(config, out)
    return 0


def push_get(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    _endpoint(session)
    _push_capable(session)
    _config(session.push_get(args.task, args.config_id), out)
    return 0


def push_list(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    _endpoint(session)
    _push_capable(session)
    configs = session.push_list(args.task)
    if out.as_json and not args.stream:
        out.json({"configs": configs, "nextPageToken": ""})
        return 0
    for config in configs:
        _config(config, out)
        if not out.as_json:
            out.gap()
    return 0


def push_delete(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    _endpoint(session)
    _push_capable(session)
    try:
        session.push_get(args.task, args.config_id)
    except ClientError as exc:
        if exc.code != TASK_NOT_FOUND:
            raise
        # A2A's delete succeeds for a config that is not there: say it was not.
        raise ClientError(
            f"nothing removed: {exc}",
            error=exc.error,
            code=exc.code,
            hint=f"`a2a task push-config list {args.task}` shows its configs",
        ) from None
    session.push_remove(args.task, args.config_id)
    if out.as_json:
        out.json({})
    else:
        out.field("Removed", f"push config {args.config_id} of task {args.task}")
    return 0


def _config(config: dict[str, Any], out: Renderer) -> None:
    if out.as_json:
        out.json(config)
        return
    out.field("Config ID", config.get("id"))
    out.field("URL", config.get("url"))
    out.field("Task ID", config.get("taskId"))
    failure = delivery_failure(config)
    if failure is not None:
        out.field(
            "Delivery Failed",
            f"at {failure.get('failedAt')}: {failure.get('lastError')} (the next event of "
            "the task, or adding the config again, retries)",
        )


def chat(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    """Each line of stdin is a message; a task waiting for input gets the next line. Typed
    at a terminal only when the output is one too: never a prompt a script would hang on."""
    if sys.stdin.isatty() and not sys.stdout.isatty():
        raise ClientError(
            "chat reads a terminal only when it writes to one: pipe its lines in instead",
            error=USAGE,
        )
    _endpoint(session)
    context_id: str | None = args.context_id
    task_id: str | None = None
    prompt = sys.stdin.isatty()
    while True:
        if prompt:
            print("you> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line:
            return 0
        if not line.strip():
            continue
        message = _new_message([{"text": line.rstrip("\n")}], task_id, context_id)
        if session.streaming:
            state, context_id, task_id = _follow(
                session, session.stream(message), out, args, quiet=True
            )
        else:
            result = session.send(message)
            out.response(result)
            task = mapping(result.get("task"))
            state = state_of(task)
            context_id = task.get("contextId") or mapping(result.get("message")).get("contextId")
            task_id = task.get("id")
        if not out.as_json:
            out.gap()
        context_id = context_id or args.context_id
        # Only a task waiting for input takes the next line; otherwise a new task begins.
        if state not in INTERRUPTED:
            task_id = None


def _help(commands: options.Commands, words: list[str]) -> int:
    parser = commands.by_words.get(tuple(words))
    if parser is None:
        raise_error = ClientError(f"no command {' '.join(words)!r}", error=USAGE)
        return _failed(raise_error, False)
    parser.print_help()
    return 0


HANDLERS: dict[str, Callable[..., int]] = {
    "help": _help,
    "card get": card_get,
    "send": send,
    "task get": task_get,
    "task cancel": task_cancel,
    "task list": task_list,
    "task download": task_download,
    "task subscribe": task_subscribe,
    "task push-config create": push_create,
    "task push-config get": push_get,
    "task push-config list": push_list,
    "task push-config delete": push_delete,
    "watch": task_subscribe,
    "chat": chat,
}


# -- outcomes, waiting and failures --------------------------------------------------------


def _settled(task: dict[str, Any]) -> bool:
    """Ended or waiting for the caller: no wait goes on (UNSPECIFIED is neither)."""
    state = state_of(task)
    return state in TERMINAL or state in INTERRUPTED


def _report(task: dict[str, Any], out: Renderer, args: argparse.Namespace) -> None:
    """A task's outcome, when not a success: a warning on stderr (the exit status stays 0),
    and for a task waiting for the caller the command that answers it."""
    state = state_of(task)
    if state not in _OUTCOMES:
        return
    status = mapping(task.get("status"))
    said = text_of(status.get("message"))
    warning = _OUTCOMES[state] + (f": {said}" if said else "")
    task_id = task.get("id")
    if state in INTERRUPTED and isinstance(task_id, str):
        resume = _resume_command(task_id, args)
        if not out.as_json:
            out.field("Resume", resume)
        warning += f"; answer with: {resume}"
    _warn(warning)


def _resume_command(task_id: str, args: argparse.Namespace) -> str:
    words = ["a2a", "send"]
    if args.agent_card != options.DEFAULT_AGENT_CARD:
        words += ["--agent-card", args.agent_card]
    return shlex.join([*words, "--task-id", task_id, "--text", "REPLY"])


def _poll(session: Session, task: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """GetTask until the task ends or waits for the caller: the first poll soon, each pause
    twice the last up to --poll-interval; --timeout bounds it all (the transport's deadline)."""
    task_id = str(task.get("id"))
    print(
        f"a2a: waiting for task {printable(task_id)} (context "
        f"{printable(str(task.get('contextId')))}), {short_state(state_of(task))}; "
        f"Ctrl-C stops waiting, the task goes on: `a2a task get --wait {printable(task_id)}`",
        file=sys.stderr,
        flush=True,
    )
    pause = min(FIRST_POLL, args.poll_interval)
    deadline = session.transport.deadline
    while not _settled(task):
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        time.sleep(pause if left is None else min(pause, left))
        task = session.get(task_id)  # past the deadline: A2ACLI_ERR_TIMEOUT
        pause = min(pause * 2, args.poll_interval)
    return task


def _failed(exc: ClientError, as_json: bool) -> int:
    if as_json:
        print(json.dumps(exc.envelope(), separators=(",", ":")), flush=True)
    # The message may quote the agent: nothing in it may steer the terminal.
    print(f"a2a: error: {exc.error}: {printable(str(exc))}", file=sys.stderr)
    if exc.hint:
        print(f"a2a: hint: {printable(exc.hint)}", file=sys.stderr)
    return exc.exit_status


def _warn(text: str) -> None:
    print(f"a2a: warning: {printable(text)}", file=sys.stderr, flush=True)


def _asks_json(argv: list[str]) -> bool:
    """Whether the command line (or A2ACLI_OUTPUT) asks for JSON, read before parsing: a
    usage error is reported in the format asked for."""
    for index, word in enumerate(argv):
        if word in ("-o", "--output") and argv[index + 1 : index + 2] == ["json"]:
            return True
        if word in ("-ojson", "--output=json"):
            return True
    return os.environ.get("A2ACLI_OUTPUT") == "json"


def _epilog() -> str:
    return f"{options.defaults_text(os.environ)}\n\n{EXIT_STATUS}"


# -- following a stream ---------------------------------------------------------------------


def _follow(
    session: Session,
    events: Iterator[Event],
    out: Renderer,
    args: argparse.Namespace,
    *,
    task_id: str | None = None,
    quiet: bool = False,
) -> tuple[str | None, str | None, str | None]:
    """Render a task's events until it ends or waits for input, resubscribing (from the last
    event seen) when the stream is cut or closed early, polling when it cannot be had
    again; (state, context id, task id). `quiet`: no outcome warning (chat)."""
    state: str | None = None
    context_id: str | None = None
    last_id: str | None = None
    last_kind = ""
    status: dict[str, Any] = {}  # the last status seen: the outcome reported
    failures = 0
    while True:
        news = False
        try:
            for event in events:
                news = True
                last_id = event.id or last_id
                if last_kind and not out.as_json:
                    out.gap()
                out.response(event.result)
                last_kind = next(iter(event.result), "")
                if "message" in event.result:  # a message ends a message stream
                    return None, mapping(event.result["message"]).get("contextId"), None
                task_id, context_id, state = _track(event.result, task_id, context_id, state)
                for key in ("task", "statusUpdate"):
                    status = mapping(mapping(event.result.get(key)).get("status")) or status
                if state in INTERRUPTED:
                    # Waiting for input: a subscription would stay open on it, silent, until
                    # the agent's idle limit (A2A_STREAM_IDLE_SECONDS) ends it.
                    break
                if state not in TERMINAL:
                    session.transport.check_deadline()
        except ClientError as exc:
            if task_id is None:
                raise  # not even the task came: nothing to resume
            if exc.code == UNSUPPORTED_OPERATION:
                # The task ended while we were away: show how.
                return _settle(session, session.get(task_id), out, args, quiet)
            if not exc.retryable:
                _warn(f"the stream failed ({exc}): polling task {task_id} instead")
                return _settle(
                    session, _poll(session, session.get(task_id), args), out, args, quiet
                )
        if state in TERMINAL or state in INTERRUPTED:
            if last_kind == "artifactUpdate" and not out.as_json:
                out.field("Task ID", task_id)
                out.field("Context ID", context_id)
                out.field("State", short_state(state))
            if not quiet:
                _report({"id": task_id, "status": status}, out, args)
            return state, context_id, task_id
        if task_id is None:
            raise ClientError("the stream ended before the agent said which task it was")
        # A stream that brought nothing, cut or closed, counts against the agent.
        failures = 0 if news else failures + 1
        if failures > MAX_RECONNECTS:
            _warn(f"the stream of task {task_id} ended {failures} times with nothing new: polling")
            return _settle(session, _poll(session, session.get(task_id), args), out, args, quiet)
        if failures:
            time.sleep(min(0.5 * 2**failures, 8.0))  # the agent may be restarting
        print(f"a2a: resuming the stream of task {printable(task_id)}", file=sys.stderr, flush=True)
        events = session.subscribe(task_id, last_id)


def _settle(
    session: Session, task: dict[str, Any], out: Renderer, args: argparse.Namespace, quiet: bool
) -> tuple[str | None, str | None, str | None]:
    """A followed task's end, read whole: rendered, reported; (state, context, task)."""
    if not out.as_json:
        out.gap()
    out.response({"task": task})
    if not quiet:
        _report(task, out, args)
    return state_of(task), task.get("contextId"), task.get("id")


def _track(
    result: dict[str, Any], task_id: str | None, context_id: str | None, state: str | None
) -> tuple[str | None, str | None, str | None]:
    for key in ("task", "statusUpdate", "artifactUpdate"):
        item = result.get(key)
        if isinstance(item, dict):
            # Only text is an id: anything else the agent sends there is no id to follow.
            found = item.get("id" if key == "task" else "taskId")
            task_id = found if isinstance(found, str) and found else task_id
            found = item.get("contextId")
            context_id = found if isinstance(found, str) and found else context_id
            if key != "artifactUpdate":
                state = state_of(item) or state
    return task_id, context_id, state


# -- building requests ----------------------------------------------------------------------


def _message(args: argparse.Namespace) -> dict[str, Any]:
    """The message of `send`: its words as a text part, then each part flag in its order."""
    parts: list[dict[str, Any]] = []
    if args.words:
        parts.append({"text": " ".join(args.words)})
    for given in args.parts:
        part = _part(given["kind"], given["value"])
        if given["media_type"]:
            part["mediaType"] = given["media_type"]
        parts.append(part)
    if not parts:
        raise ClientError(
            "nothing to send", error=USAGE, hint="give TEXT, --text T, --file PATH or --data PATH"
        )
    metadata_value = None
    if args.metadata is not None:
        try:
            metadata_value = json.loads(args.metadata)
        except ValueError as exc:
            raise ClientError(f"--metadata is not JSON: {exc}", error=USAGE) from None
        if not isinstance(metadata_value, dict):
            raise ClientError('--metadata is a JSON object: {"k": "v"}', error=USAGE)
    message = _new_message(parts, args.task_id, args.context_id)
    if metadata_value is not None:
        message["metadata"] = metadata_value
    return message


def _new_message(
    parts: list[dict[str, Any]], task_id: str | None, context_id: str | None
) -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}
    if task_id:
        message["taskId"] = task_id
    if context_id:
        message["contextId"] = context_id
    return message


def _part(kind: str, value: str) -> dict[str, Any]:
    if kind == "text":
        return {"text": value}
    if kind == "file":
        if _URL.match(value):
            # A reference the agent fetches: never fetched nor re-hosted here.
            name = urlsplit(value).path.rsplit("/", 1)[-1]
            part: dict[str, Any] = {"url": value}
            guessed = mimetypes.guess_type(name)[0]
            return (
                part
                | ({"filename": name} if name else {})
                | ({"mediaType": guessed} if guessed else {})
            )
        path = Path(value)
        content = _read(path, "--file")
        return {
            "raw": base64.b64encode(content).decode("ascii"),
            "filename": path.name,
            "mediaType": mimetypes.guess_type(path.name)[0] or "application/octet-stream",
        }
    content = (
        sys.stdin.buffer.read(MAX_FILE_BYTES + 1) if value == "-" else _read(Path(value), "--data")
    )
    if len(content) > MAX_FILE_BYTES:
        raise ClientError(f"--data - is over {MAX_FILE_BYTES} bytes", error=USAGE)
    try:
        return {"data": json.loads(content)}
    except ValueError as exc:
        raise ClientError(f"--data {value}: not JSON: {exc}", error=USAGE) from None


def _read(path: Path, flag: str) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ClientError(
                f"{flag} {path} is {size} bytes; at most {MAX_FILE_BYTES} go in a message "
                "(the agent's request limit is 10 MiB by default)",
                error=USAGE,
                hint="send a URL to it instead: --file https://...",
            )
        return path.read_bytes()
    except OSError as exc:
        raise ClientError(f"{flag} {path}: {exc.strerror or exc}", error=USAGE) from None


def _push_config(url: str | None, token: str | None) -> dict[str, Any] | None:
    if url is None:
        if token is not None:
            raise ClientError("--push-token needs --push URL", error=USAGE)
        return None
    return {"url": url, **({"token": token} if token is not None else {})}
