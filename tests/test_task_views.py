"""How much of a task an answer carries (shared/service/base.py `view`, shared/service/tasks.py):
its most recent history within ANSWER_HISTORY_BYTES, however long the history and whatever
historyLength asks, and ListTasks pages within LIST_PAGE_BYTES (issue 36 item 1: a 274-byte
GetTask answered a 16 MiB history whole)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from shared.service.base import ANSWER_HISTORY_BYTES
from shared.service.tasks import LIST_PAGE_BYTES
from tests.conftest import Client

MakeClient = Callable[..., Client]
BIG = 400_000  # a message's text: three of them are past the answer's history budget


def message(text: str, number: int, **extra: Any) -> dict[str, Any]:
    return {"messageId": f"m-{number}", "role": "ROLE_USER", "parts": [{"text": text}], **extra}


def grown(client: Client, messages: int, first: int = 0) -> str:
    """A task (tests.handlers.limits asks for more after each message) of `messages` sends."""
    sent = client.result("SendMessage", {"message": message("a" * BIG, first)}, version="1.0")
    task_id: str = sent["task"]["id"]
    for number in range(first + 1, first + messages):
        params = {"message": message(chr(97 + number % 26) * BIG, number, taskId=task_id)}
        client.result("SendMessage", params, version="1.0")
    return task_id


def history_bytes(task: dict[str, Any]) -> int:
    return len(json.dumps(task.get("history", []), separators=(",", ":")))


def test_a_long_history_is_answered_within_the_budget_newest_first(
    make_client: MakeClient,
) -> None:
    client = make_client(handler="tests.handlers.limits")
    task_id = grown(client, 5)  # 5 x 400 KB and the agent's questions: ~2 MB
    task = client.result("GetTask", {"id": task_id}, version="1.0")
    assert history_bytes(task) <= ANSWER_HISTORY_BYTES
    history = task["history"]
    assert 1 <= len(history) < 9  # 5 sends and 4 questions, the oldest left out
    assert history[-1]["parts"][0]["text"] == "e" * BIG  # the newest kept
    assert history[0]["parts"][0]["text"][:1] != "a"
    # A historyLength within the budget is honoured; one past it is lowered (A2A 1.0 lets a
    # server return fewer); 0 is none.
    assert (
        len(client.result("GetTask", {"id": task_id, "historyLength": 1}, version="1.0")["history"])
        == 1
    )
    asked = client.result("GetTask", {"id": task_id, "historyLength": 50}, version="1.0")
    assert asked["history"] == history
    none = client.result("GetTask", {"id": task_id, "historyLength": 0}, version="1.0")
    assert "history" not in none
    # A send to the task answers it within the budget too (it was the whole history).
    params = {"message": message("hi", 99, taskId=task_id)}
    sent = client.result("SendMessage", params, version="1.0")["task"]
    assert history_bytes(sent) <= ANSWER_HISTORY_BYTES


def test_a_message_past_the_budget_alone_is_still_answered(make_client: MakeClient) -> None:
    client = make_client(handler="tests.handlers.limits", max_message_bytes=3 * 1024 * 1024)
    huge = "h" * (ANSWER_HISTORY_BYTES + 1000)
    task = client.result("SendMessage", {"message": message(huge, 1)}, version="1.0")["task"]
    # Nothing stored is out of reach: the newest message is answered whatever its size.
    got = client.result("GetTask", {"id": task["id"]}, version="1.0")
    assert [m["parts"][0]["text"] for m in got["history"]] == [huge]
    params = {"message": message(huge + "2", 2, taskId=task["id"])}
    client.result("SendMessage", params, version="1.0")
    got = client.result("GetTask", {"id": task["id"], "historyLength": 3}, version="1.0")
    assert [m["parts"][0]["text"] for m in got["history"]] == [huge + "2"]


def test_list_pages_end_within_their_bytes_and_page_on_to_every_task(
    make_client: MakeClient,
) -> None:
    client = make_client(handler="tests.handlers.limits")
    made = {grown(client, 2, first=10 * n) for n in range(6)}  # ~800 KB each
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        params: dict[str, Any] = {"historyLength": 10, "pageSize": 100}
        if token:
            params["pageToken"] = token
        page = client.result("ListTasks", params, version="1.0")
        pages += 1
        size = len(json.dumps(page["tasks"], separators=(",", ":")))
        assert size <= LIST_PAGE_BYTES + ANSWER_HISTORY_BYTES
        seen += [task["id"] for task in page["tasks"]]
        token = page["nextPageToken"]
        if not token:
            break
    assert pages >= 2
    assert sorted(seen) == sorted(made)  # each task once, none lost at a page's end
