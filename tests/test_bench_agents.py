"""`make bench`'s agents section reads answers whole off raw connections
(tests/bench/agents.py): whether one says its task completed, blocking and streamed; and its
side client keeps its connections open between requests."""

from __future__ import annotations

import asyncio
import contextlib

from tests.bench.agents import Kept, completed

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n"
STREAM_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
TASK = b'{"result":{"task":{"status":{"state":"TASK_STATE_COMPLETED"}}}}'
WORKING = b'data: {"result":{"statusUpdate":{"status":{"state":"TASK_STATE_WORKING"}}}}\r\n\r\n'
DONE = b'data: {"result":{"statusUpdate":{"status":{"state":"TASK_STATE_COMPLETED"}}}}\r\n\r\n'


def test_a_blocking_answer_completed_is_a_200_holding_a_completed_task() -> None:
    assert completed(HEAD + TASK, streamed=False)
    assert not completed(HEAD + TASK.replace(b"COMPLETED", b"FAILED"), streamed=False)
    assert not completed(b"HTTP/1.1 503 Service Unavailable\r\n\r\n" + TASK, streamed=False)
    assert not completed(b"", streamed=False)


def test_a_stream_completed_is_one_whose_last_event_is_completed() -> None:
    assert completed(STREAM_HEAD + WORKING + DONE, streamed=True)
    assert not completed(STREAM_HEAD + DONE + WORKING, streamed=True)
    assert not completed(STREAM_HEAD + b": keep-alive\r\n\r\n", streamed=True)
    assert not completed(STREAM_HEAD, streamed=True)


def test_the_side_client_keeps_its_connection_and_reopens_one_the_server_closed() -> None:
    """`Kept` sends each request on the connection it opened before (one connection for
    three requests), and resends on a new one a request whose kept connection the server
    closed while it was idle (as uvicorn does past its keep-alive timeout)."""

    async def scenario() -> tuple[list[bool], int, int]:
        connections = 0
        answered = 0

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections, answered
            connections += 1
            with contextlib.suppress(asyncio.IncompleteReadError):
                while True:
                    await reader.readuntil(b"\r\n\r\n")
                    answered += 1
                    writer.write(HEAD.replace(b"\r\n\r\n", b"\r\ncontent-length: 2\r\n\r\n{}"))
                    await writer.drain()
                    if answered == 3:  # the third answer's connection is then closed idle
                        break
            writer.close()
            await writer.wait_closed()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        kept = Kept(f"http://127.0.0.1:{port}")
        request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        await kept.open(1, request)
        oks = [(await kept.exchange(request, None)).ok for _ in range(3)]
        await kept.close()
        server.close()
        await server.wait_closed()
        return oks, connections, kept.reopened

    oks, connections, reopened = asyncio.run(scenario())
    assert oks == [True, True, True]
    assert (connections, reopened) == (2, 1)
