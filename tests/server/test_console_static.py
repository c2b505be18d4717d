"""The web console's files: package data (tests/test_packaging.py finds them in the wheel),
served at ``/`` over real HTTP, loading nothing from anywhere but this server, and never
writing run text as HTML."""

from __future__ import annotations

import re
import tomllib
import typing
from collections.abc import AsyncIterator
from fnmatch import fnmatch
from html.parser import HTMLParser
from importlib.resources import files
from pathlib import Path

import pytest

import tinyagents.events.models as event_models
from tinyagents import Runtime

ROOT = Path(__file__).resolve().parents[2]
STATIC = files("tinyagents.server") / "static"
FILES = ("index.html", "console.js", "console.css")


def text(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def test_the_console_files_are_package_data() -> None:
    for name in FILES:
        assert (STATIC / name).is_file(), f"tinyagents/server/static/{name} is missing"
    assert not (STATIC / ".keep").is_file()
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    # static/ is a package of data: every console file matches one of its patterns
    assert "tinyagents.server.static" in setuptools["packages"]
    patterns = setuptools["package-data"]["tinyagents.server.static"]
    for name in FILES:
        assert any(fnmatch(name, p) for p in patterns), f"{name} is not package data"


class Assets(HTMLParser):
    """Every URL index.html loads (scripts, styles, icons, images, frames)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href", "action", "poster", "srcset") and value is not None:
                self.urls.append(value)


def test_the_page_loads_only_its_own_files() -> None:
    parser = Assets()
    parser.feed(text("index.html"))
    assert set(parser.urls) >= {"console.js", "console.css"}
    for url in parser.urls:
        local = url in FILES or url == "data:,"
        assert local, f"index.html loads {url!r}: the console loads only its own files"
    for name in ("console.js", "console.css"):
        body = text(name)
        assert not re.search(r"https?://|//cdn|@import|url\(", body), f"{name} reaches out"
    js = text("console.js")
    # Only this server's API is called; the token goes in a header (SSE: the query, as
    # EventSource cannot send headers).
    assert re.findall(r'const API = "([^"]*)"', js) == ["/api/agents"]
    assert "headers.Authorization = `Bearer ${state.token}`" in js


def test_run_text_is_never_written_as_html() -> None:
    js = text("console.js")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in js, f"console.js uses {sink}: run data must be set as text"


def _event_types() -> set[str]:
    found: set[str] = set()
    for cls in vars(event_models).values():
        if isinstance(cls, type) and issubclass(cls, event_models.Event):
            hint = typing.get_type_hints(cls).get("type")
            found.update(a for a in typing.get_args(hint) if isinstance(a, str))
    return found


def test_the_timeline_listens_for_every_event_type() -> None:
    # The server names each SSE message after its event type, and EventSource hands a named
    # message only to a listener registered for that name: a type missing here never shows.
    # read from the list the listeners are registered from, EVENT_TYPES: a type named
    # elsewhere in the file (OUTCOME_TEXT names the steering ones) is no listener
    found = re.search(r"const EVENT_TYPES = \[(.*?)\];", text("console.js"), re.DOTALL)
    assert found is not None, "console.js has no EVENT_TYPES list"
    assert "for (const type of EVENT_TYPES) source.addEventListener(type, onEvent)" in text(
        "console.js"
    )
    listed = set(re.findall(r'"([a-z_]+\.[a-z_]+)"', found.group(1)))
    types = _event_types()
    assert "steering.applied" in types and "run.paused" in types
    assert types <= listed, f"console.js does not listen for {sorted(types - listed)}"


def _js_strings(name: str, brackets: str) -> set[str]:
    """The string literals of console.js's ``const <name> = <open>...<close>``."""
    opening, closing = (re.escape(c) for c in brackets)
    found = re.search(rf"const {name} = (?:new Set\()?{opening}(.*?){closing}", text("console.js"))
    assert found is not None, f"console.js has no {name}"
    return set(re.findall(r'"([a-z_]+)"', found.group(1)))


def test_the_consoles_run_statuses_are_the_servers() -> None:
    # The console keeps its own copy of the vocabulary (a plain file, no build step): a
    # status added to RunStatus and not here was neither polled as live (LIVE) nor shown as
    # finished (FINISHED): its controls enabled on a run that takes no more commands.
    from tinyagents.protocol import UNFINISHED_RUN_STATUSES, RunStatus

    live = _js_strings("LIVE", "[]")
    finished = _js_strings("FINISHED", "[]")
    assert live == {str(s) for s in UNFINISHED_RUN_STATUSES}, live
    assert finished == {str(s) for s in RunStatus} - live, finished


def test_the_consoles_command_states_are_the_servers() -> None:
    # a command's outcome is "terminal" (no longer followed, its poll stopped) by TERMINAL,
    # and worded by OUTCOME_TEXT: a state added to CommandState and not here was followed
    # for good, or shown as its raw event type
    from tinyagents.protocol import CommandState

    def events(names: set[str]) -> set[str]:
        return {name.removeprefix("steering.") for name in names}

    found = re.search(r"const TERMINAL = new Set\(\[(.*?)\]\)", text("console.js"))
    assert found is not None, "console.js has no TERMINAL"
    terminal = events(set(re.findall(r'"(steering\.[a-z_]+)"', found.group(1))))
    assert terminal == {str(s) for s in CommandState if s.terminal}, terminal
    words = re.search(r"const OUTCOME_TEXT = \{(.*?)\};", text("console.js"), re.DOTALL)
    assert words is not None, "console.js has no OUTCOME_TEXT"
    worded = events(set(re.findall(r'"(steering\.[a-z_]+)":', words.group(1))))
    assert worded == {str(s) for s in CommandState}, worded


def test_the_consoles_payload_bound_is_the_servers() -> None:
    # the instruction's field says "too long" (and sends nothing) past this bound
    from tinyagents.steering.policies import DEFAULT_MAX_TEXT_BYTES

    found = re.search(r"const MAX_PAYLOAD_BYTES = (\d+);", text("console.js"))
    assert found is not None, "console.js has no MAX_PAYLOAD_BYTES"
    assert int(found.group(1)) == DEFAULT_MAX_TEXT_BYTES


@pytest.fixture
async def base_url() -> AsyncIterator[str]:
    from tinyagents.server import Control, bind, create_app, serving
    from tinyagents.server.serve import url_of

    async with Runtime() as runtime:
        control = Control(runtime)
        sock = bind("127.0.0.1", 0)
        try:
            async with serving(create_app(control, auth=None), sock):
                yield url_of(sock)
        finally:
            control.close()


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
@pytest.mark.parametrize("path", ["/", "/console.js", "/index.html"])
async def test_a_wrong_method_on_the_console_names_the_methods_it_takes(
    base_url: str, method: str, path: str
) -> None:
    import httpx

    # the 405 of the console's files had an empty `Allow:`, which tells a client (and a
    # proxy) that no method at all is taken there
    async with httpx.AsyncClient(base_url=base_url) as client:
        r = await client.request(method, path)
        assert r.status_code == 405, r.text
        assert r.headers["allow"] == "GET, HEAD"
        assert r.json()["message"]
        for other in r.headers["allow"].split(", "):
            assert (await client.request(other, path)).status_code == 200


@pytest.mark.parametrize(
    "path", ["/console.js/", "/index.html/", "/console.css/", "/console.js//", "/api-docs.html/"]
)
async def test_a_console_file_with_a_trailing_slash_is_not_found(base_url: str, path: str) -> None:
    import httpx

    # StaticFiles normalised "console.js/" to "console.js" and served the file: a slash names
    # a folder, and the file's relative links then resolved under it (/console.js/console.css)
    async with httpx.AsyncClient(base_url=base_url) as client:
        for method in ("GET", "HEAD"):
            r = await client.request(method, path)
            assert r.status_code == 404, (method, path, r.status_code)
        r = await client.get(path)
        assert r.headers["content-type"] == "application/json"
        assert r.json()["message"] and r.json()["detail"]
        assert (await client.get("/")).status_code == 200  # the console's one folder: itself


async def test_the_app_serves_the_console_at_the_root(base_url: str) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=base_url) as client:
        page = await client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert page.text == text("index.html")
        # shown in no other site's frame (clickjacking), loading this server's files only
        assert page.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert "default-src 'self'" in page.headers["content-security-policy"]
        for name, kind in (("console.js", "javascript"), ("console.css", "text/css")):
            served = await client.get(f"/{name}")
            assert served.status_code == 200
            assert kind in served.headers["content-type"]
            assert served.text == text(name)
        # The API the page calls is there beside it.
        runs = await client.get("/api/agents/runs")
        assert runs.status_code == 200 and runs.json() == []
        paths = set((await client.get("/api/agents/openapi.json")).json()["paths"])
    js = text("console.js")
    for verb in ("pause", "resume", "abort", "steer", "commands"):
        assert f"/{verb}`" in js
        assert f"/api/agents/runs/{{run_id}}/{verb}" in paths
    assert "/api/agents/runs/{run_id}/tasks/{task_id}/commands" in paths
    assert "/api/agents/events" in paths and "/api/agents/runs" in paths


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 200),  # curl, the CLI: no Origin
        ({"Origin": "http://127.0.0.1:1234"}, 200),  # a page of this machine
        ({"Origin": "http://localhost:8000"}, 200),
        ({"Host": "localhost:8000"}, 200),
        ({"Host": "[::1]:8000"}, 200),
        # DNS rebinding: a name of another site's that resolves to 127.0.0.1
        ({"Host": "attacker.example"}, 403),
        ({"Host": "attacker.example:8000", "Origin": "http://attacker.example:8000"}, 403),
        # a cross-site form or fetch (a "simple" request needs no preflight)
        ({"Origin": "https://evil.example"}, 403),
        ({"Origin": "null"}, 403),  # a sandboxed frame
    ],
)
async def test_an_insecure_dev_server_answers_this_machine_only(
    base_url: str, headers: dict[str, str], status: int
) -> None:
    # a server without tokens (serve --insecure-dev) bound to 127.0.0.1 answered any Host
    # and any Origin: a page of another site could list and abort runs through the
    # developer's browser
    import httpx

    async with httpx.AsyncClient(base_url=base_url) as client:
        r = await client.get("/api/agents/runs", headers=headers)
        assert r.status_code == status, r.text
        post = await client.post(
            "/api/agents/runs/r-none/abort",
            headers={**headers, "Content-Type": "text/plain"},
            content=b"",
        )
        assert (post.status_code == 403) == (status == 403)
        if status == 403:
            assert "--insecure-dev" in r.json()["detail"]
            # answered before the app, with the kind every error body of the API names
            assert r.json()["type"] == post.json()["type"] == "forbidden", (r.text, post.text)


async def test_the_api_docs_page_loads_nothing_from_another_host(base_url: str) -> None:
    # FastAPI's page loads Swagger UI from a CDN: blank offline, and a third party sees
    # every operator who opens it. Ours is one self-contained page over openapi.json.
    import httpx

    async with httpx.AsyncClient(base_url=base_url) as client:
        page = await client.get("/api/agents/docs")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.headers["x-frame-options"] == "DENY"
        document = (await client.get("/api/agents/openapi.json")).json()
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/|@import", page.text), (
        "the docs page names another host"
    )
    parser = Assets()
    parser.feed(page.text)
    # one link, to the document beside it, and an icon of no bytes; nothing else (scripts,
    # styles) from anywhere
    assert parser.urls == ["data:,", "openapi.json"], f"the docs page loads {parser.urls}"
    assert "api-docs.html" in {p.name for p in STATIC.iterdir()}  # package data: *.html
    assert '"openapi.json"' in page.text  # beside it, wherever the API is mounted
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in page.text, f"the docs page uses {sink}: write text, not HTML"
    assert "/api/agents/runs/{run_id}/steer" in document["paths"]


async def test_the_api_docs_file_beside_the_console_leads_to_the_docs_page(
    base_url: str,
) -> None:
    # /api-docs.html was the file itself, served under the console's policy: its inline
    # script was blocked (a blank page) and its "openapi.json" pointed at /openapi.json (a 404)
    import httpx

    async with httpx.AsyncClient(base_url=base_url) as client:
        moved = await client.get("/api-docs.html")
        assert moved.status_code == 308
        assert moved.headers["location"] == "api/agents/docs"  # relative: wherever it is mounted
        page = await client.get("/api-docs.html", follow_redirects=True)
        assert page.status_code == 200 and str(page.url).endswith("/api/agents/docs")
        assert "script-src" not in page.headers["content-security-policy"]
        assert page.text == (await client.get("/api/agents/docs")).text


class Icons(HTMLParser):
    """The ``href`` of every ``<link rel="icon">`` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "link" and "icon" in (found.get("rel") or "").lower().split():
            self.hrefs.append(found.get("href"))


@pytest.mark.parametrize("path", ["/", "/api/agents/docs"])
async def test_a_page_names_its_icon_so_the_browser_asks_for_no_favicon(
    base_url: str, path: str
) -> None:
    # a page that names no icon makes the browser ask for /favicon.ico, which this server
    # answers 404: every load of the API docs page logged that 404 in the browser's console
    import httpx

    async with httpx.AsyncClient(base_url=base_url) as client:
        page = await client.get(path)
        assert page.status_code == 200
        assert (await client.get("/favicon.ico")).status_code == 404  # why the icon is named
    parser = Icons()
    parser.feed(page.text)
    assert parser.hrefs == ["data:,"], f"{path} names the icons {parser.hrefs}"
