"""Reading server-sent events in tests: a strict parser of what our server sends."""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any

import requests


@dataclass(frozen=True)
class Event:
    id: str | None
    event: str | None
    data: Any  # the JSON of the data lines
    comments: int  # comment lines (keep-alives) before this event


def events(lines: Iterable[str]) -> Generator[Event, None, None]:
    """Events from SSE lines (without their line ends), as they arrive."""
    fields: dict[str, str] = {}
    data: list[str] = []
    comments = 0
    for line in lines:
        if line == "":
            if data:
                yield Event(
                    fields.get("id"), fields.get("event"), json.loads("\n".join(data)), comments
                )
                comments = 0
            fields, data = {}, []
        elif line.startswith(":"):
            comments += 1
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data.append(value)
            else:
                fields[name] = value


def parse(text: str) -> list[Event]:
    return list(events(text.split("\n")))


def stream(
    url: str, body: Any = None, headers: dict[str, str] | None = None, timeout: float = 30
) -> requests.Response:
    """A streamed POST of `body` (GET when None), checked to answer an event stream."""
    hdrs = {"Accept": "text/event-stream", **(headers or {})}
    if body is None:
        response = requests.get(url, headers=hdrs, stream=True, timeout=timeout)
    else:
        hdrs.setdefault("Content-Type", "application/json")
        response = requests.post(
            url, data=json.dumps(body), headers=hdrs, stream=True, timeout=timeout
        )
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/event-stream"), response.text
    return response


def read(response: requests.Response) -> Generator[Event, None, None]:
    return events(response.iter_lines(decode_unicode=True))
