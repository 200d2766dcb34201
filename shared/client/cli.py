"""`a2a`: talk to an A2A agent from a terminal (the `cli` extra's console script).

    a2a [--url URL] [--api-key KEY | --token TOKEN | --google] [--protocol 1.0|0.3]
        [--files DIR] [--json] COMMAND ...

    card [--verify]                        the agent card, and the version and URL spoken
                                           (--verify: check its signatures, A2A 1.0 §8.4)
    send TEXT... [--file PATH] [--data JSON] [--task ID] [--context ID]
                 [--no-stream] [--no-wait] [--push URL [--push-token T]]
    send --task ID TEXT...                 answer a task that waits for input
    get TASK [--history N]                 a task: status, artifacts (and N messages)
    list [--context ID] [--state S] [--page-size N] [--page-token T] [--all]
    cancel TASK
    watch TASK                             follow a task until it ends, resuming when cut
    push add TASK URL [--token T] [--id ID] | push list TASK | push rm TASK ID
    chat [--context ID]                    a conversation on stdin, answering input-required

Exit status (`EXIT_STATUS`, in `a2a --help`): 0 on success, 1 with one line `a2a: error: ...`
on stderr when a call fails (a JSON-RPC error, an HTTP error, an agent that cannot be reached,
`push rm` of a config that is not there), 2 for a usage error (argparse's), 130 when
interrupted; `send` and `watch` end with the task's state: 3 to 7 for a task that did not
complete (`TASK_EXITS`). A task that waits for input says how to answer it (`a2a send --task`).
"""

from __future__ import annotations

import argparse
import base64
import json
import mimetypes
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from shared.client.credentials import google_id_token
from shared.client.render import Renderer, printable, short_state
from shared.client.session import INTERRUPTED, TERMINAL, VERSIONS, Session, delivery_failure
from shared.client.transport import ClientError, Event, Transport

DEFAULT_URL = "http://localhost:8080"
# Read at most this much of a --file: the agent's default request limit (A2A_MAX_BODY_BYTES)
# is 10 MiB, and base64 makes a file a third larger.
MAX_FILE_BYTES = 7 * 1024 * 1024
MAX_RECONNECTS = 5  # resubscriptions in a row that bring nothing before giving up on a stream
UNSUPPORTED_OPERATION = -32004
TASK_NOT_FOUND = -32001

# How `send` and `watch` exit when the task did not complete: a script tells a failure from
# a question without parsing the output. 1 and 2 stay what they are for every command (a call
# failed; a usage error, as argparse exits), so a task's states start at 3.
TASK_EXITS: dict[str, tuple[int, str]] = {
    "TASK_STATE_FAILED": (3, "the task failed"),
    "TASK_STATE_REJECTED": (4, "the agent rejected the task"),
    "TASK_STATE_CANCELED": (5, "the task was canceled"),
    "TASK_STATE_INPUT_REQUIRED": (6, "the task waits for input: answer with a2a send --task ID"),
    "TASK_STATE_AUTH_REQUIRED": (7, "the task waits for authorization (auth-required)"),
}
EXIT_INTERRUPTED = 130
EXIT_STATUS = "\n".join(
    [
        "exit status:",
        "  0    success; send and watch: the task completed (send --no-wait: it was accepted)",
        "  1    a call failed (one line `a2a: error: ...` on stderr), or push rm found no such",
        "       config",
        "  2    a usage error",
        *(f"  {code}    {meaning} (send, watch)" for code, meaning in TASK_EXITS.values()),
        f"  {EXIT_INTERRUPTED}  interrupted",
    ]
)

Command = Callable[[Session, argparse.Namespace, Renderer], int]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    renderer = Renderer(files=Path(args.files), as_json=args.json)
    transport = Transport()
    try:
        if args.token is not None:
            transport.headers["Authorization"] = f"Bearer {args.token}"
        elif args.google:
            transport.headers["Authorization"] = f"Bearer {google_id_token(args.url)}"
        elif args.api_key is not None:
            # The header the card names replaces this one once the card is read.
            transport.headers["X-API-Key"] = args.api_key
        session = Session(args.url, transport, version=args.protocol, api_key=args.api_key)
        command: Command = args.command_fn
        return command(session, args, renderer)
    except ClientError as exc:
        # The message may quote the agent: nothing in it may steer the terminal.
        print(f"a2a: error: {printable(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        transport.close()


# -- commands -------------------------------------------------------------------------------


def card(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    if not args.json:
        name = session.card.get("name", "?")
        out.line(f"{name}: A2A {session.version} JSON-RPC at {session.url}")
    out.line(json.dumps(session.card, indent=None if args.json else 2, ensure_ascii=False))
    if args.verify:
        _verify_card(session, args.json, out)
    return 0


def _verify_card(session: Session, as_json: bool, out: Renderer) -> None:
    """Check every signature of the card with the key its protected header names: from its
    `jku`, which must be on the agent's own origin (a JWKS anyone else serves vouches for
    nothing, and the request carries the caller's credentials), or an embedded `jwk` (shown
    as such: no host vouches for it). Raises ClientError naming what failed."""
    from shared import card_signing

    origin = urlsplit(session.base_url)
    fetched: dict[str, dict[str, Any]] = {}
    keys: list[dict[str, Any]] = []  # each signature's kid and where its key came from

    def find_key(header: dict[str, Any]) -> Any:
        if isinstance(header.get("jwk"), dict):
            keys.append({"kid": header.get("kid"), "key": "embedded jwk"})
            return header["jwk"]
        jku = header.get("jku")
        if not isinstance(jku, str):
            raise card_signing.SignatureProblem("its header names no key: no jku, no jwk")
        where = urlsplit(jku)
        if (where.scheme, where.netloc) != (origin.scheme, origin.netloc):
            raise card_signing.SignatureProblem(
                f"its jku {jku} is not on the agent's origin "
                f"{origin.scheme}://{origin.netloc}: not fetched"
            )
        if jku not in fetched:
            fetched[jku] = session.transport.get_json(jku)
        keys.append({"kid": header.get("kid"), "key": jku})
        return card_signing.jwks_key(fetched[jku], header)

    problems = card_signing.check(session.card, find_key)
    if problems:
        raise ClientError("the card's signatures do not verify: " + "; ".join(problems))
    if as_json:
        out.json({"verified": keys})
    else:
        shown = ", ".join(f"kid {key['kid']!r} from {key['key']}" for key in keys)
        out.line(f"signatures: {len(keys)} verified ({shown})")


def send(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    message = _message(args.text, args.file, args.data, args.task, args.context)
    push = _push_config(args.push, args.push_token)
    if args.no_wait or args.no_stream or not session.streaming:
        result = session.send(message, return_immediately=args.no_wait, push=push)
        out.response(result)
        task = result.get("task") or {}
        return _ended(task.get("id"), _state(task))
    state, _, task_id = _follow(session, session.stream(message, push=push), out)
    return _ended(task_id, state)


def get(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    task = session.get(args.task_id, args.history)
    out.task(task, history=bool(args.history))
    _ended(task.get("id"), _state(task))
    return 0  # the task was read: its state is in the output, not the status


def list_tasks(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    token = args.page_token
    while True:
        page = session.list_tasks(
            context_id=args.context, state=args.state, page_size=args.page_size, page_token=token
        )
        token = page.get("nextPageToken") or None
        if args.json:
            out.json(page)
        else:
            for task in page.get("tasks") or []:
                status = task.get("status") or {}
                out.line(
                    "  ".join(
                        str(x)
                        for x in (
                            task.get("id"),
                            short_state(status.get("state")),
                            task.get("contextId"),
                            status.get("timestamp", ""),
                        )
                    )
                )
        if not token or not args.all:
            break
    if token and not args.json:
        out.line(f"more: --page-token {token}")
    return 0


def cancel(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    out.task(session.cancel(args.task_id))
    return 0


def watch(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    state, _, task_id = _follow(session, session.subscribe(args.task_id), out, task_id=args.task_id)
    return _ended(task_id, state)


def push(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    if args.push_command == "add":
        config = session.push_add(
            args.task_id, args.webhook, token=args.config_token, config_id=args.id
        )
        out.json(config) if args.json else out.line(_config_line(config))
    elif args.push_command == "list":
        configs = session.push_list(args.task_id)
        if args.json:
            out.json(configs)
        for config in [] if args.json else configs:
            out.line(_config_line(config))
    else:
        try:
            session.push_get(args.task_id, args.config_id)
        except ClientError as exc:
            if exc.code != TASK_NOT_FOUND:
                raise
            # A2A's delete succeeds for a config that is not there: say it was not.
            raise ClientError(
                f"nothing removed: {exc} (`a2a push list {args.task_id}` shows its configs)",
                code=exc.code,
            ) from None
        session.push_remove(args.task_id, args.config_id)
        if not args.json:
            out.line(f"removed push config {args.config_id} of task {args.task_id}")
    return 0


def chat(session: Session, args: argparse.Namespace, out: Renderer) -> int:
    """Each line of stdin is a message; a task waiting for input gets the next line."""
    context_id: str | None = args.context
    task_id: str | None = None
    while True:
        print("you> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line:
            print(file=sys.stderr)
            return 0
        if not line.strip():
            continue
        message = _message([line.rstrip("\n")], [], [], task_id, context_id)
        if session.streaming:
            state, context_id, task_id = _follow(session, session.stream(message), out)
        else:
            result = session.send(message)
            out.response(result)
            task = result.get("task") or {}
            state = _state(task)
            context_id = task.get("contextId") or (result.get("message") or {}).get("contextId")
            task_id = task.get("id")
        context_id = context_id or args.context
        # Only a task waiting for input takes the next line; otherwise a new task begins.
        if state not in INTERRUPTED:
            task_id = None


def _ended(task_id: object, state: str | None) -> int:
    """The exit status for a task last seen in `state`; a task waiting for input says how
    to answer it (on stderr: the output stays the task's, JSON lines included)."""
    if state in INTERRUPTED and isinstance(task_id, str) and task_id:
        print(f"answer with: a2a send --task {printable(task_id)} TEXT...", file=sys.stderr)
    return TASK_EXITS[state][0] if state in TASK_EXITS else 0


def _state(item: Any) -> str | None:
    """A task's or status update's state, when the agent sent it as text: anything else
    (a list, an object) is no state, never a crash at a set lookup."""
    status = item.get("status") if isinstance(item, dict) else None
    state = status.get("state") if isinstance(status, dict) else None
    return state if isinstance(state, str) else None


# -- following a stream ---------------------------------------------------------------------


def _follow(
    session: Session, events: Iterator[Event], out: Renderer, *, task_id: str | None = None
) -> tuple[str | None, str | None, str | None]:
    """Render a task's events until it ends or waits for input, resubscribing (from the last
    event seen) when the stream is cut or closed early; (state, context id, task id)."""
    state: str | None = None
    context_id: str | None = None
    last_id: str | None = None
    failures = 0
    while True:
        news = False
        try:
            for event in events:
                news = True
                last_id = event.id or last_id
                out.response(event.result)
                if "message" in event.result:  # a message ends a message stream
                    return None, event.result["message"].get("contextId"), None
                task_id, context_id, state = _track(event.result, task_id, context_id, state)
                if state in INTERRUPTED:
                    # Waiting for input: a subscription would stay open on it, silent, until
                    # the agent's idle limit (A2A_STREAM_IDLE_SECONDS) ends it.
                    return state, context_id, task_id
        except ClientError as exc:
            if task_id is None:
                raise  # not even the task came: nothing to resume
            if exc.code == UNSUPPORTED_OPERATION:
                # The task ended while we were away: show how.
                task = session.get(task_id)
                out.task(task)
                return _state(task), task.get("contextId"), task_id
            if not exc.retryable:
                raise
            # Cut, or the agent is away (restarting): counted below, unless it brought news.
        if state in TERMINAL or state in INTERRUPTED:
            return state, context_id, task_id
        if task_id is None:
            raise ClientError("the stream ended before the agent said which task it was")
        # A stream that brought nothing, cut or closed, counts against the agent.
        failures = 0 if news else failures + 1
        if failures > MAX_RECONNECTS:
            raise ClientError(
                f"the stream of task {task_id} ended {failures} times in a row with nothing new; "
                f"`a2a watch {task_id}` follows it again, `a2a get {task_id}` shows it"
            )
        if failures:
            time.sleep(min(0.5 * 2**failures, 8.0))  # the agent may be restarting
        print(f"(resuming the stream of task {printable(task_id)})", file=sys.stderr, flush=True)
        events = session.subscribe(task_id, last_id)


def _track(
    result: dict[str, Any], task_id: str | None, context_id: str | None, state: str | None
) -> tuple[str | None, str | None, str | None]:
    for key in ("task", "statusUpdate", "artifactUpdate"):
        item = result.get(key)
        if isinstance(item, dict):
            task_id = item.get("id" if key == "task" else "taskId") or task_id
            context_id = item.get("contextId") or context_id
            if key != "artifactUpdate":
                state = _state(item) or state
    return task_id, context_id, state


# -- building requests ----------------------------------------------------------------------


def _message(
    text: list[str],
    files: list[str],
    data: list[str],
    task_id: str | None,
    context_id: str | None,
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if text:
        parts.append({"text": " ".join(text)})
    parts += [_file_part(Path(p)) for p in files]
    for value in data:
        try:
            parts.append({"data": json.loads(value)})
        except ValueError as exc:
            raise ClientError(f"--data {value[:40]!r} is not JSON: {exc}") from None
    if not parts:
        raise ClientError("nothing to send: give text, --file PATH or --data JSON")
    message: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}
    if task_id:
        message["taskId"] = task_id
    if context_id:
        message["contextId"] = context_id
    return message


def _file_part(path: Path) -> dict[str, Any]:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ClientError(
                f"--file {path} is {size} bytes; at most {MAX_FILE_BYTES} go in a message "
                "(the agent's request limit is 10 MiB by default): send a URL to it instead"
            )
        content = path.read_bytes()
    except OSError as exc:
        raise ClientError(f"--file {path}: {exc.strerror or exc}") from None
    media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return {
        "raw": base64.b64encode(content).decode("ascii"),
        "filename": path.name,
        "mediaType": media_type,
    }


def _push_config(url: str | None, token: str | None) -> dict[str, Any] | None:
    if url is None:
        if token is not None:
            raise ClientError("--push-token needs --push URL")
        return None
    return {"url": url, **({"token": token} if token is not None else {})}


def _config_line(config: dict[str, Any]) -> str:
    line = f"{config.get('id')}  {config.get('url')}  (task {config.get('taskId')})"
    failure = delivery_failure(config)
    if failure is not None:
        line += (
            f"\n  delivery failed at {failure.get('failedAt')}: {failure.get('lastError')}"
            " (the next event of the task, or adding the config again, retries)"
        )
    return line


# -- arguments ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="a2a",
        description="Talk to an A2A agent: its card, messages (streamed), tasks, push configs.",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", default=DEFAULT_URL, help=f"the agent (default {DEFAULT_URL})")
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--api-key", help="an API key (A2A_AUTH=api-key agents)")
    who.add_argument("--token", help="a bearer token (an OIDC or Google ID token)")
    who.add_argument(
        "--google",
        action="store_true",
        help="a Google ID token for the agent's URL, from Application Default Credentials "
        "or gcloud (IAM-protected agents)",
    )
    parser.add_argument(
        "--protocol", choices=VERSIONS, help="speak this A2A version (default: from the card)"
    )
    parser.add_argument(
        "--files", default="a2a-files", help="where file parts are saved (default a2a-files)"
    )
    parser.add_argument("--json", action="store_true", help="print results as JSON lines")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub = commands.add_parser("card", help="show the agent card")
    sub.add_argument(
        "--verify", action="store_true", help="check its signatures (exit 1 if one fails)"
    )
    sub.set_defaults(command_fn=card)

    _add_send(commands)
    _add_tasks(commands)
    return parser


def _add_send(commands: Any) -> None:
    sub = commands.add_parser("send", help="send a message (streamed unless --no-stream)")
    sub.add_argument("text", nargs="*", help="the message's text")
    sub.add_argument("--file", action="append", default=[], help="attach a file (repeatable)")
    sub.add_argument("--data", action="append", default=[], help="a JSON data part (repeatable)")
    sub.add_argument(
        "--task", metavar="ID", help="answer this task (one waiting for input: input-required)"
    )
    sub.add_argument("--context", help="send in this context")
    sub.add_argument("--no-stream", action="store_true", help="one answer, no live updates")
    sub.add_argument(
        "--no-wait", action="store_true", help="return at once; the task runs on (background)"
    )
    sub.add_argument("--push", metavar="URL", help="POST the task's updates to this webhook")
    sub.add_argument("--push-token", help="the token the webhook receives with them")
    sub.set_defaults(command_fn=send)
    sub = commands.add_parser("chat", help="a conversation: one message per line of stdin")
    sub.add_argument("--context", help="continue this context")
    sub.set_defaults(command_fn=chat)


def _add_tasks(commands: Any) -> None:
    sub = commands.add_parser("get", help="show a task")
    sub.add_argument("task_id", metavar="TASK")
    sub.add_argument("--history", type=int, help="with its last N messages")
    sub.set_defaults(command_fn=get)

    sub = commands.add_parser("list", help="list tasks, newest first (A2A 1.0)")
    sub.add_argument("--context", help="only this context's tasks")
    sub.add_argument("--state", help="only tasks in this state (working, completed, ...)")
    sub.add_argument("--page-size", type=int, help="tasks per page (1 to 100)")
    sub.add_argument("--page-token", help="the page after this token (printed as `more:`)")
    sub.add_argument("--all", action="store_true", help="every page")
    sub.set_defaults(command_fn=list_tasks)

    sub = commands.add_parser("cancel", help="cancel a task")
    sub.add_argument("task_id", metavar="TASK")
    sub.set_defaults(command_fn=cancel)

    sub = commands.add_parser("watch", help="follow a task's updates until it ends")
    sub.add_argument("task_id", metavar="TASK")
    sub.set_defaults(command_fn=watch)

    sub = commands.add_parser("push", help="a task's push notification configs")
    pushes = sub.add_subparsers(dest="push_command", required=True, metavar="add|list|rm")
    add = pushes.add_parser("add", help="POST the task's updates to URL")
    add.add_argument("task_id", metavar="TASK")
    add.add_argument("webhook", metavar="URL")
    add.add_argument("--token", dest="config_token", help="the token the webhook receives")
    add.add_argument("--id", help="the config's id (default: the agent picks)")
    pushes.add_parser("list", help="the task's configs").add_argument("task_id", metavar="TASK")
    remove = pushes.add_parser("rm", help="remove one")
    remove.add_argument("task_id", metavar="TASK")
    remove.add_argument("config_id", metavar="ID")
    sub.set_defaults(command_fn=push)
