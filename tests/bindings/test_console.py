"""The console's HTTP face (shared/bindings/console.py): off by default, its files under a
strict Content-Security-Policy, and nothing but its own files under /console."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from importlib import resources
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.app import build
from shared.bindings.console import CSP, TYPES
from shared.settings import Settings, SettingsError
from shared.store.memory import MemoryTaskStore
from tests.conftest import Client

FILES = resources.files("shared") / "console"


@pytest.fixture
def console(make_client: Callable[..., Client]) -> Client:
    return make_client(console=True)


def assert_console_headers(response: object) -> None:
    headers = response.headers  # type: ignore[attr-defined]
    assert headers["Content-Security-Policy"] == CSP
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["X-Frame-Options"] == "DENY"


def test_off_by_default_console_paths_are_not_served(client: Client) -> None:
    for path in ("/console", "/console/", "/console/console.js"):
        response = client.http.get(path)
        assert response.status_code == 404
        assert "Content-Security-Policy" not in response.headers
    # POST stays what it was: JSON-RPC at any path a deployment puts in front of it.
    answer = client.post({"jsonrpc": "2.0", "id": 1, "method": "nope"}, path="/console")
    assert answer.json()["error"]["code"] == -32601


@pytest.mark.parametrize("name", sorted(TYPES))
def test_each_file_is_served_with_its_type_and_the_policy(console: Client, name: str) -> None:
    response = console.http.get(f"/console/{name}")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == TYPES[name]
    assert response.content == (FILES / name).read_bytes()
    assert_console_headers(response)


def test_the_page_is_at_console_slash_and_console_redirects_there(console: Client) -> None:
    page = console.http.get("/console/")
    assert page.status_code == 200
    assert page.content == (FILES / "index.html").read_bytes()
    assert_console_headers(page)
    bare = console.http.get("/console")
    assert bare.status_code == 308
    assert bare.headers["Location"] == "console/"  # relative: works under any prefix
    assert_console_headers(bare)


def test_a_trailing_slash_is_the_same_file(console: Client) -> None:
    response = console.http.get("/console/console.css/")
    assert response.status_code == 200
    assert response.content == (FILES / "console.css").read_bytes()


def test_head_answers_without_a_body(console: Client) -> None:
    response = console.http.head("/console/console.js")
    assert response.status_code == 200
    assert response.content == b""
    assert_console_headers(response)


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_other_methods_are_refused_with_allow(console: Client, method: str) -> None:
    headers = {"Content-Type": "application/json"}  # a local agent's rule for any POST
    response = console.http.request(method, "/console/index.html", content="{}", headers=headers)
    assert response.status_code == 405
    assert response.headers["Allow"] == "GET, HEAD"
    assert_console_headers(response)


@pytest.mark.parametrize(
    "path",
    [
        "/console/../shared/settings.py",
        "/console/%2e%2e/shared/settings.py",
        "/console/%2E%2E%2Fsettings.py",
        "/console/..%2fbindings%2fconsole.py",
        "/console//etc/passwd",
        "/console/%2fetc%2fpasswd",
        "/console/./index.html",
        "/console/console.js%00.html",
        "/console/CONSOLE.JS",
        "/console/console.py",
        "/console/index.html/../../app.py",
    ],
)
def test_anything_but_its_files_is_not_found(console: Client, path: str) -> None:
    response = console.http.get(path)
    assert response.status_code == 404, path
    assert response.headers["Content-Type"].startswith("text/plain")
    assert_console_headers(response)


@pytest.fixture(scope="module")
def shared_console() -> Iterator[Client]:
    """One console app for the property test (hypothesis runs it many times)."""
    client = Client(build(Settings(console=True), store=MemoryTaskStore()))
    yield client
    client.app.close()


# Without "\n": Flask's `<path:path>` route (functions-framework's too) never matches it, so
# such a request gets Flask's own 404 before the function runs.
@given(st.text(st.characters(codec="utf-8", exclude_characters="\n"), min_size=1, max_size=40))
def test_no_other_name_reaches_a_file(shared_console: Client, name: str) -> None:
    response = shared_console.http.get("/console/" + quote(name, safe=""))
    if name.rstrip("/") in (*TYPES, ""):  # trailing slashes are the same path to the router
        assert response.status_code == 200
    else:
        assert response.status_code == 404, name
    assert response.headers["Content-Security-Policy"] == CSP


def test_the_files_carry_no_inline_script_or_style() -> None:
    """The policy would block them; the page must not need them."""
    page = (FILES / "index.html").read_text()
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", page, re.S)
    assert scripts == [""], "only <script src=...> with an empty body"
    assert "<style" not in page
    assert not re.search(r"\sstyle=", page)
    assert not re.search(r"\son[a-z]+=", page), "no inline event handlers"
    script = (FILES / "console.js").read_text()
    # Agent text is put on the page as text, never parsed as markup.
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink


def test_the_setting_is_off_unless_set_and_a_bad_value_stops_start_up() -> None:
    assert Settings.from_env({"A2A_CONSOLE": "true"}).console is True
    assert Settings.from_env({}).console is False
    with pytest.raises(SettingsError, match="A2A_CONSOLE"):
        Settings.from_env({"A2A_CONSOLE": "maybe"})
