"""A server told to stop (SIGTERM, as Cloud Run does; SIGINT, as Ctrl-C does) ends its open
streams within a second, cleanly (the client resumes elsewhere with Last-Event-ID), and its
in-process push queue, retrying an unreachable webhook, holds nothing up. Before, the server
waited 30 s (gunicorn's graceful timeout) for the streams, then cut them."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from typing import Any

import pytest
import requests

from tests.conftest import Server, free_port


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_server_ends_its_streams_cleanly_within_a_second(sig: signal.Signals) -> None:
    server = Server({"A2A_HANDLER": "tests.handlers.slow", "A2A_PUSH_ALLOWED_HOSTS": "localhost"})
    try:
        # A notification the in-process queue retries: nobody listens at the webhook.
        dead = {"url": f"http://localhost:{free_port()}/hook"}
        message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "steps=1"}]}
        params = {"message": message, "configuration": {"taskPushNotificationConfig": dead}}
        server.rpc({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params})

        long = {
            "messageId": "m-2",
            "role": "ROLE_USER",
            "parts": [{"text": "steps=1000 delay=0.1"}],
        }
        body = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "SendStreamingMessage",
            "params": {"message": long},
        }
        response = requests.post(
            server.url,
            data=json.dumps(body),
            headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
            stream=True,
            timeout=30,
        )
        lines = response.iter_lines(decode_unicode=True)
        events: list[dict[str, Any]] = []
        streaming = threading.Event()
        ended = threading.Event()

        def read() -> None:
            seq = None
            for line in lines:  # a cut stream raises here, and `ended` is never set
                if line.startswith("id: "):
                    seq = int(line[4:])
                elif line.startswith("data: "):
                    events.append({"seq": seq, "data": json.loads(line[6:])})
                    if len(events) >= 3:
                        streaming.set()
            ended.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert streaming.wait(10), "the stream sent no events"
        started = time.monotonic()
        os.killpg(server.process.pid, sig)  # as Ctrl-C reaches the whole process group
        assert ended.wait(5), "the stream was cut, not ended"
        assert time.monotonic() - started < 1
        # The server then lets go of kept-alive connections (gunicorn lingers 2 s at most).
        server.process.wait(timeout=5)
        assert all("result" in e["data"] for e in events)  # no error event
        seqs = [e["seq"] for e in events]
        assert seqs == sorted(seqs) and None not in seqs  # resumable from the last one
    finally:
        if server.process.poll() is None:
            server.stop()
        else:
            server.log.close()
