"""`make bench`'s agents section reads answers whole off raw connections
(tests/bench/agents.py): whether one says its task completed, blocking and streamed."""

from __future__ import annotations

from tests.bench.agents import completed

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
