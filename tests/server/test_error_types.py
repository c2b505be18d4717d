"""Every error answer of the operator API names its kind in a top-level ``type``, a stable
code a client branches on (``message`` and ``detail`` are for people and may be reworded):
over real HTTP, one request for each kind, and a walk of every route so that a new error
path without a code fails here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from operator_server import BASE, IDLE_S, Served
from starlette.routing import Route

from tinyagents.errors import DamagedData, ReceiptTimeout, StoreError
from tinyagents.server import bind, create_app, serving
from tinyagents.server.problems import CAUSE_TYPES, ERROR_TYPES, LIBRARY_ERRORS


def assert_typed(r: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    """``r`` is the error answer ``status`` with ``type`` ``kind``, as JSON, not sniffed."""
    assert r.status_code == status, (r.request.method, r.request.url, r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    assert r.headers.get_list("x-content-type-options") == ["nosniff"], r.headers
    body = r.json()
    assert body["type"] == kind, body
    assert isinstance(body["message"], str) and body["message"], body  # kept as it was
    assert "detail" in body, body
    return dict(body)


async def _broken(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a bug")


async def _store_down(*args: Any, **kwargs: Any) -> Any:
    raise StoreError("the disk is gone")


async def _damaged(*args: Any, **kwargs: Any) -> Any:
    raise DamagedData(
        "run snapshot of 'r-1': tools is 'secret-bytes'", record="run snapshot of 'r-1'"
    )


async def _owner_silent(*args: Any, **kwargs: Any) -> Any:
    raise ReceiptTimeout("c-1", "w-elsewhere", 5.0)


JSON = {"Content-Type": "application/json"}

#: (what, method, path under /runs/{run}, who, request extras, a patch of Control, status, type)
KINDS = [
    ("no token", "GET", "", None, {}, None, 401, "unauthorized"),
    ("bad token", "GET", "", "not-a-token", {}, None, 401, "unauthorized"),
    ("observe only", "POST", "/pause", "olga", {"json": {}}, None, 403, "forbidden"),
    ("unknown run", "GET", "/../r-nobody", "alice", {}, None, 404, "not_found"),
    ("no such path", "GET", "/nowhere", "alice", {}, None, 404, "not_found"),
    ("wrong method", "DELETE", "", "alice", {}, None, 405, "method_not_allowed"),
    ("not JSON", "POST", "/steer", "alice", {"content": b"{", "headers": JSON}, None, 400, "malformed_request"),
    ("key twice", "POST", "/steer", "alice",
     {"content": b'{"message": "a", "message": "b"}', "headers": JSON}, None, 400,
     "malformed_request"),
    ("unknown kind", "POST", "/commands", "alice", {"json": {"kind": "no-such-kind"}}, None, 422,
     "invalid_request"),
    # well-formed JSON, an invalid command: the cause is the request's meaning, not its syntax
    ("blank steer", "POST", "/steer", "alice", {"json": {"message": " "}}, None, 422,
     "invalid_request"),
    ("too large", "POST", "/steer", "alice", {"content": b"x" * (5 * 2**20)}, None, 413,
     "payload_too_large"),
    ("compressed", "POST", "/steer", "alice",
     {"content": b"{}", "headers": {**JSON, "Content-Encoding": "gzip"}}, None, 415,
     "unsupported_media_type"),
    ("no message", "POST", "/steer", "alice", {"json": {}}, None, 422, "invalid_request"),
    ("not a JSON type", "POST", "/steer", "alice",
     {"content": b'{"message": "a"}', "headers": {"Content-Type": "text/plain"}}, None, 415,
     "unsupported_media_type"),
    ("a bug", "GET", "", "alice", {}, ("get_run", _broken), 500, "internal_error"),
    ("store down", "GET", "", "alice", {}, ("get_run", _store_down), 503, "unavailable"),
    # a retry cannot help: the data is damaged, the service is not unavailable
    ("damaged run", "GET", "", "alice", {}, ("get_run", _damaged), 500, "damaged_data"),
    ("damaged command", "POST", "/pause", "alice", {"json": {}}, ("submit", _damaged), 500,
     "damaged_data"),
    ("owner silent", "POST", "/pause", "alice", {"json": {}}, ("submit", _owner_silent), 504,
     "timeout"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "who", "extra", "patch", "status", "kind"),
    [k[1:] for k in KINDS],
    ids=[k[0] for k in KINDS],
)
async def test_each_kind_of_error_names_its_type(
    served: Served,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    path: str,
    who: str | None,
    extra: dict[str, Any],
    patch: tuple[str, Any] | None,
    status: int,
    kind: str,
) -> None:
    run = await served.start_run("acme", think_s=IDLE_S)  # (it has only to exist: idle)
    if patch is not None:
        monkeypatch.setattr(served.control, *patch)
    headers = {**(served.as_(who) if who else {}), **extra.get("headers", {})}
    url = f"{BASE}/runs/{run.run_id}{path}"
    if path.startswith("/.."):
        url = f"{BASE}/runs/{path.removeprefix('/../')}"
    kwargs = {k: v for k, v in extra.items() if k != "headers"}
    r = await served.client.request(method, url, headers=headers, **kwargs)
    body = assert_typed(r, status, kind)
    if status == 504:  # what the table maps gives the same extras as before
        assert body["correlation_id"], body
    if kind == "damaged_data":  # names the record to repair, never what it holds
        assert "r-1" in body["message"] and "secret-bytes" not in r.text, body


async def test_a_ticket_refused_and_a_422_list_name_their_type(served: Served) -> None:
    r = await served.client.get(f"{BASE}/events", params={"ticket": "junk"})
    assert_typed(r, 401, "unauthorized")
    r = await served.client.get(f"{BASE}/runs?limit=0", headers=served.as_("alice"))
    body = assert_typed(r, 422, "invalid_request")
    assert isinstance(body["detail"], list) and body["detail"][0]["type"], body  # as before


async def test_every_route_answers_its_errors_with_a_type(served: Served) -> None:
    # A walk of the app's routes (a new one is walked too): each asked without a token and
    # with a method it does not take answers an error with a known code, and each status a
    # route documents has one (a new status without a code in ERROR_TYPES fails here).
    app = create_app(served.control, auth=served.auth)
    kinds = set(ERROR_TYPES.values()) | set(CAUSE_TYPES)
    sock = bind("127.0.0.1", 0)
    async with serving(app, sock):
        host, port = sock.getsockname()[:2]
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=60) as client:
            walked = 0
            for route in _routes(app.routes):
                path = route.path.replace("{run_id}", "r-nobody").replace("{task_id}", "t-x")
                for method in sorted((route.methods or set()) - {"HEAD"}):  # (no body)
                    r = await client.request(method, path, params={"follow": "false"})
                    if r.status_code >= 400:
                        assert r.json()["type"] in kinds, (method, path, r.text)
                        assert_typed(r, r.status_code, r.json()["type"])
                        walked += 1
                r = await client.request("PATCH", path)
                assert_typed(r, 405, "method_not_allowed")
                for status in getattr(route, "responses", {}):
                    if int(status) >= 400:
                        assert int(status) in ERROR_TYPES, (route.path, status)
            assert walked >= 13  # each of the API's routes asked for a token
    schema = app.openapi()["components"]["schemas"]["ErrorBody"]
    assert "type" in schema["required"], schema


async def test_the_console_s_errors_name_their_type(served: Served) -> None:
    # the console's files are a mount of their own, outside the routes the walk above asks
    assert_typed(await served.client.get("/no-such-file.js"), 404, "not_found")
    assert_typed(await served.client.post("/no-such-file.js"), 405, "method_not_allowed")


def _routes(routes: Any) -> Iterator[Route]:
    """Every route of ``routes``, those of an included router too."""
    for route in routes:
        included = getattr(route, "original_router", None)  # (FastAPI keeps it nested)
        if included is not None:
            yield from _routes(included.routes)
        elif isinstance(route, Route):
            yield route


def test_no_library_error_is_shadowed_by_a_class_listed_before_it() -> None:
    # the first class that matches gives the status: a subclass listed after its base (a
    # ReceiptTimeout after StoreError) would be answered 503 instead of 504
    for i, (cls, _, _) in enumerate(LIBRARY_ERRORS):
        for earlier, _, _ in LIBRARY_ERRORS[:i]:
            assert not issubclass(cls, earlier), (cls, earlier)
    assert {status for _, status, _ in LIBRARY_ERRORS} <= set(ERROR_TYPES)


def test_each_cause_s_type_is_answered_with_one_status_and_differs_from_every_status_s() -> None:
    # a code never changes its meaning: a cause's own type is no status's default, and each
    # library error's type, where it names one, is listed with the status it is answered with
    for kind, status in CAUSE_TYPES.items():
        assert kind not in ERROR_TYPES.values() and status in ERROR_TYPES, (kind, status)
    for cls, status, kind in LIBRARY_ERRORS:
        assert kind is None or CAUSE_TYPES[kind] == status, (cls, status, kind)
