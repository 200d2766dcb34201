"""A first request served as the server serves it, for scripts that count what a new instance
loads and compiles (tests/system/test_cold_start.py, tests/infra/test_stage.py): they run it in
a fresh interpreter, where nothing of the suite may be imported.

`SERVE_FIRST_SEND` builds the `a2a` function's app as functions-framework does
(`create_app`, which finds the function marked `aio` and makes the ASGI app) and sends it one
blocking SendMessage through the ASGI interface, as uvicorn would; `answer` is its JSON.
"""

SERVE_FIRST_SEND = """
import asyncio, json as _json
import functions_framework
app = functions_framework.create_app(target="a2a", source=MAIN)
_body = _json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message":
    {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}).encode()
_scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
    "method": "POST", "scheme": "http", "path": "/", "raw_path": b"/", "query_string": b"",
    "root_path": "", "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 50000),
    "headers": [(b"host", b"localhost:8080"), (b"content-type", b"application/json"),
                (b"a2a-version", b"1.0"), (b"content-length", str(len(_body)).encode())]}
_sent = []
async def _receive():
    return {"type": "http.request", "body": _body, "more_body": False}
async def _send(message):
    _sent.append(message)
asyncio.run(app(_scope, _receive, _send))
_bodies = [m.get("body", b"") for m in _sent if m["type"] == "http.response.body"]
answer = _json.loads(b"".join(_bodies))
"""
