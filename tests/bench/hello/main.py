"""The floor of `make bench`'s cold start: a bare functions-framework function."""

import flask
import functions_framework


@functions_framework.http
def hello(request: flask.Request) -> str:
    return "hello"
