"""The browser console's HTTP face: `/console` and its static files (`shared/console/`).

It owns which files the console is (read once, at build time: a fixed table of names, so no
path a client sends ever reaches the file system), their content types, and the headers every
console answer carries, errors included: a strict Content-Security-Policy (no inline script or
style, no other origin), `nosniff`, no framing, no referrer. The console is static files that
call the agent's own A2A API; it has no API of its own. `http.py` routes here only when
A2A_CONSOLE is on.
"""

from __future__ import annotations

from importlib import resources

from shared.bindings.wire import Answer, Request

PREFIX = "/console"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    # The files change with the deployment; a browser asks again (cheap: they are small).
    "Cache-Control": "no-cache",
}
TYPES = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}


def _files() -> dict[str, bytes]:
    """The console's files by name, from the package (installed or staged with `shared`)."""
    folder = resources.files("shared") / "console"
    return {name: (folder / name).read_bytes() for name in TYPES}


class Console:
    """Answers the requests under /console; `owns(path)` says which those are."""

    def __init__(self) -> None:
        self.files = _files()

    @staticmethod
    def owns(path: str) -> bool:
        return path == PREFIX or path.startswith(PREFIX + "/")

    def __call__(self, request: Request, path: str) -> Answer:
        """`path` is the router's (http.py): the request's path under the function, trailing
        slashes stripped; `request.path` keeps them, which is how /console differs from
        /console/."""
        if request.method not in ("GET", "HEAD"):
            response = _plain(405, "the console is read with GET")
            response.headers["Allow"] = "GET, HEAD"
            return response
        if path == PREFIX and not request.path.endswith("/"):
            # Relative, so that the page's relative URLs (its files, the card, the API)
            # resolve under any prefix a proxy serves the function at.
            return Answer(308, {"Location": "console/", **HEADERS})
        name = path.removeprefix(PREFIX).removeprefix("/") or "index.html"
        body = self.files.get(name)
        if body is None:
            return _plain(404, f"the console has no file {name!r}")
        return Answer(200, {"Content-Type": TYPES[name], **HEADERS}, body)


def _plain(status: int, message: str) -> Answer:
    """A console error: for a person in a browser, so plain text, under the same headers."""
    return Answer(status, {"Content-Type": "text/plain", **HEADERS}, (message + "\n").encode())
