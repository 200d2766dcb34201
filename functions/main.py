"""Cloud Functions entry points: thin wrappers over the `shared` library.

`a2a` is the public agent: its card, JSON-RPC, and the seeds' legacy routes. The app is
built at import, once per instance, from the environment (see README, "Settings").
"""

from __future__ import annotations

import flask
import functions_framework

from shared.app import build

_a2a = build()


@functions_framework.http
def a2a(request: flask.Request) -> flask.Response:
    return _a2a(request)
