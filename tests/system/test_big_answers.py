"""Tiny requests for big answers, against the server as `make run` starts it (issue 36 item
1): a task's history grown long, then many GetTask from clients that never read their
answers. The server's memory is read from /proc (tests/bench/load.py); the full repro (a
16 MiB history, 30 clients) is measured by hand, its figures in the commit that bounded it."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

from shared.identity.api_key import hashed
from tests.bench.load import pss_mib
from tests.conftest import Server, wait_until

KEY = "alice-key-" + "k" * 32
TEXT = 880_000  # a message's text, near A2A_MAX_MESSAGE_BYTES
REQUEST_LINE = "request POST / "  # the log line of each JSON-RPC request the app answered


def rpc(server: Server, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return server.rpc(body, {"X-API-Key": KEY, "A2A-Version": "1.0"})


def unread(server: Server, method: str, params: dict[str, Any]) -> socket.socket:
    """A request sent on a connection whose client then reads nothing."""
    data = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    head = (
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"A2A-Version: 1.0\r\nX-API-Key: {KEY}\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode()
    connection = socket.create_connection(("localhost", server.port), timeout=30)
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    connection.sendall(head + data)
    return connection


def test_unread_answers_about_a_long_history_hold_little(
    start_server: Callable[..., Server],
) -> None:
    server = start_server(
        A2A_HANDLER="tests.handlers.limits",
        A2A_AUTH="api-key",
        A2A_API_KEYS=f"alice:{hashed(KEY)}",
    )
    task_id = None
    for number in range(8):  # 8 x 880 KB: 7 MB of history
        message = {
            "messageId": f"m-{number}",
            "role": "ROLE_USER",
            "parts": [{"text": chr(97 + number) * TEXT}],
            **({"taskId": task_id} if task_id else {}),
        }
        task_id = rpc(server, "SendMessage", {"message": message})["result"]["task"]["id"]
    rpc(server, "GetTask", {"id": task_id})
    before = pss_mib(server.process.pid)
    answered = server.output().count(REQUEST_LINE)
    connections = [unread(server, "GetTask", {"id": task_id}) for _ in range(20)]
    try:
        # Once the server made every answer (its line is logged as the app hands it over).
        wait_until(lambda: server.output().count(REQUEST_LINE) >= answered + 20, 30, server.output)
        grown = pss_mib(server.process.pid) - before
        # Whole, the 20 answers were 20 x 7 MB (the server grew by 155 MiB); each is now its
        # newest message (880 KB), and what unread answers hold is the owner's share at most:
        # either bound alone keeps this.
        assert grown < 60, f"the server grew by {grown:.1f} MiB"
    finally:
        for connection in connections:
            connection.close()
    # A client that reads gets its answer: the newest message.
    got = rpc(server, "GetTask", {"id": task_id})["result"]
    assert got["history"][-1]["parts"][0]["text"] == "h" * TEXT
