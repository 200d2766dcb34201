"""The floor of `make bench`: a bare functions-framework function. Its cold start is the
least any function's can be; under the bench's load (it reads the JSON body and answers a
JSON-RPC result) its CPU, throughput and latency are the least any function's can be."""

import flask
import functions_framework


@functions_framework.http
def hello(request: flask.Request) -> dict[str, object]:
    request.get_json(silent=True)
    return {"jsonrpc": "2.0", "id": 1, "result": "hello"}
