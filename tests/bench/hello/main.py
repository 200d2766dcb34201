"""The floor of `make bench`: a bare functions-framework function, served as ours is (an `aio`
function: functions-framework's ASGI stack, uvicorn). Its cold start is the least any
function's can be; under the bench's load (it reads the JSON body and answers a JSON-RPC
result) its CPU, throughput and latency are the least any function's can be."""

import contextlib

import functions_framework.aio
from starlette.requests import Request


@functions_framework.aio.http
async def hello(request: Request) -> dict[str, object]:
    with contextlib.suppress(ValueError):  # the bench's first look is a GET, without a body
        await request.json()
    return {"jsonrpc": "2.0", "id": 1, "result": "hello"}
