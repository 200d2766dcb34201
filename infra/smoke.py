"""`make smoke URL=...`: checks a deployed agent end to end over HTTP with A2A v1.0 JSON-RPC.

Card, SendMessage, GetTask, CancelTask, and SendStreamingMessage when the card says it streams.
Each check prints one line; the first failure stops the run with what was sent and received.

Credentials: an agent behind IAM (the default deploy) answers 401/403 without a Google ID
token: then the smoke asks `gcloud auth print-identity-token` for one (or takes TOKEN=...) and
tries again. An agent whose card asks for an API key gets API_KEY=... in the card's header.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

import requests

CARD_PATH = "/.well-known/agent-card.json"
VERSION = {"A2A-Version": "1.0"}
TERMINAL = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_FAILED",
    "TASK_STATE_REJECTED",
}
# Where a task may legitimately stop for a smoke message: done, or waiting for the user.
SETTLED = TERMINAL | {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}
NOT_CANCELABLE = -32002


class SmokeFailed(Exception):
    """A check failed; the message says which and what came back."""


def identity_token(url: str, run: Callable[..., Any] = subprocess.run) -> str:
    """A Google ID token of gcloud's account: for `url` when the account is a service account
    (`--audiences` works only for those), else gcloud's own."""
    for extra in ([f"--audiences={url}"], []):
        try:
            out = run(
                ["gcloud", "auth", "print-identity-token", *extra],
                capture_output=True,
                text=True,
                check=False,
            )
        except OSError:
            break
        if out.returncode == 0 and out.stdout.strip():
            return str(out.stdout.strip())
    raise SmokeFailed(
        "the agent needs a Google ID token and `gcloud auth print-identity-token` printed none: "
        "run `gcloud auth login`, or pass one with make smoke TOKEN=..."
    )


class Agent:
    """A deployed agent, reached through its card's JSON-RPC interface."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        timeout: float,
        token: Callable[[], str] | None = None,
        api_key: str | None = None,
    ) -> None:
        self.base = url.rstrip("/")
        self.session = requests.Session()
        self.session.headers.update({**headers, **VERSION})
        self.timeout = timeout
        self.endpoint = self.base
        self._token = token  # where an ID token comes from when IAM asks for one
        self._api_key = api_key

    def card(self) -> dict[str, Any]:
        response = self.session.get(self.base + CARD_PATH, timeout=self.timeout)
        if response.status_code in (401, 403) and self._token and not self._authorized:
            # Behind IAM even the card needs a Google ID token.
            self.session.headers["Authorization"] = f"Bearer {self._token()}"
            response = self.session.get(self.base + CARD_PATH, timeout=self.timeout)
        if response.status_code != 200:
            raise SmokeFailed(
                f"GET {CARD_PATH}: HTTP {response.status_code}: {response.text[:300]}"
            )
        card: dict[str, Any] = response.json()
        interfaces = [
            interface
            for interface in card.get("supportedInterfaces", [])
            if interface.get("protocolBinding") == "JSONRPC"
            and interface.get("protocolVersion") == "1.0"
        ]
        self.endpoint = interfaces[0]["url"] if interfaces else card.get("url", self.base)
        self._credentials(card)
        return card

    @property
    def _authorized(self) -> bool:
        return "Authorization" in self.session.headers

    def _credentials(self, card: dict[str, Any]) -> None:
        """What the card's security schemes ask for: an API key header, or a bearer token."""
        for scheme in card.get("securitySchemes", {}).values():
            api_key = scheme.get("apiKeySecurityScheme")
            if api_key and api_key.get("location") == "header":
                if not self._api_key:
                    raise SmokeFailed(
                        f"the card asks for an API key in the {api_key['name']} header: "
                        "make smoke API_KEY=..."
                    )
                self.session.headers[api_key["name"]] = self._api_key
            elif scheme.get("openIdConnectSecurityScheme") and not self._authorized:
                if self._token is None:
                    raise SmokeFailed("the card asks for a bearer token: make smoke TOKEN=...")
                self.session.headers["Authorization"] = f"Bearer {self._token()}"

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The JSON-RPC response (result or error) of one call."""
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        response = self.session.post(self.endpoint, json=body, timeout=self.timeout)
        if response.status_code != 200:
            raise SmokeFailed(f"{method}: HTTP {response.status_code}: {response.text[:300]}")
        answer: dict[str, Any] = response.json()
        return answer

    def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = self.call(method, params)
        if "error" in answer:
            raise SmokeFailed(f"{method} answered an error: {json.dumps(answer['error'])[:300]}")
        result: dict[str, Any] = answer["result"]
        return result

    def stream(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The `result` of every SSE frame of a SendStreamingMessage."""
        body = {
            "jsonrpc": "2.0",
            "id": "stream",
            "method": "SendStreamingMessage",
            "params": params,
        }
        events: list[dict[str, Any]] = []
        with self.session.post(
            self.endpoint, json=body, stream=True, timeout=self.timeout
        ) as response:
            if response.status_code != 200:
                raise SmokeFailed(f"SendStreamingMessage: HTTP {response.status_code}")
            for line in response.iter_lines(decode_unicode=True):
                if line and line.startswith("data:"):
                    frame = json.loads(line[5:])
                    if "error" in frame:
                        raise SmokeFailed(f"stream error frame: {json.dumps(frame)[:300]}")
                    events.append(frame["result"])
        return events


def message(text: str) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}


def check(agent: Agent, text: str, say: Any = print) -> None:
    """Run every check against `agent`; raises SmokeFailed at the first that fails."""
    card = agent.card()
    say(f"ok   card: {card.get('name')!r}, JSON-RPC at {agent.endpoint}")

    sent = agent.result("SendMessage", {"message": message(text)})
    if "message" in sent:
        say("ok   SendMessage: the agent answered with a message (no task to get or cancel)")
    else:
        task = sent["task"]
        state = task["status"]["state"]
        say(f"ok   SendMessage: task {task['id']} is {state}")
        got = agent.result("GetTask", {"id": task["id"]})
        if got.get("id") != task["id"]:
            raise SmokeFailed(f"GetTask returned {got.get('id')}, expected {task['id']}")
        say(f"ok   GetTask: {got['status']['state']}")

    params = {"message": message(text), "configuration": {"returnImmediately": True}}
    background = agent.result("SendMessage", params)
    if "task" in background:
        task_id = background["task"]["id"]
        answer = agent.call("CancelTask", {"id": task_id})
        if "result" in answer:
            say(f"ok   CancelTask: {answer['result']['status']['state']}")
        elif answer["error"].get("code") == NOT_CANCELABLE:
            say("ok   CancelTask: the task had already finished (TaskNotCancelableError)")
        else:
            raise SmokeFailed(f"CancelTask answered {json.dumps(answer['error'])[:300]}")

    if not card.get("capabilities", {}).get("streaming"):
        say("skip SendStreamingMessage: the card does not declare streaming")
        return
    events = agent.stream({"message": message(text)})
    if not events:
        raise SmokeFailed("SendStreamingMessage: the stream closed without an event")
    last = events[-1]
    state = (last.get("statusUpdate") or last.get("task") or {}).get("status", {}).get("state")
    if "message" not in events[0] and state not in SETTLED:
        raise SmokeFailed(f"SendStreamingMessage: the stream ended in state {state}")
    say(f"ok   SendStreamingMessage: {len(events)} events")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.smoke", description=__doc__)
    parser.add_argument("url", help="the a2a function's URL (without the card path)")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        help="'Name: value' sent with every request, e.g. 'Authorization: Bearer TOKEN'",
    )
    parser.add_argument("--text", default="hello", help="what the smoke messages say")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    args = parser.parse_args(argv)
    headers = dict(item.split(":", 1) for item in args.header)
    # From the environment, not the command line: credentials stay out of `ps`.
    given = os.environ.get("TOKEN")
    agent = Agent(
        args.url,
        {k.strip(): v.strip() for k, v in headers.items()},
        args.timeout,
        token=(lambda: given) if given else (lambda: identity_token(args.url)),
        api_key=os.environ.get("API_KEY") or None,
    )
    try:
        check(agent, args.text)
    except (SmokeFailed, requests.RequestException, KeyError, ValueError) as error:
        print(f"FAIL {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(f"smoke passed: {args.url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
