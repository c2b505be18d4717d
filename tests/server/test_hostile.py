"""The operator API against a hostile client: every malformed body, id, query, token and method
is a 4xx with a JSON body saying what is wrong, never a 500, a hang or a traceback, and it
changes nothing; a run the caller may not see is 404 everywhere (the CLI: test_hostile_cli)."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from operator_server import BASE, IDLE_S, Served, _serve, busy_agent, eventually
from services import drop_pg_schemas, pg_schema, postgres_dsn
from test_api import call, run_paths, unchanged

from tinyagents.errors import ConfigurationError
from tinyagents.server import Auth

JSON = {"content-type": "application/json"}


async def raw(s: Served, who: str, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {**s.as_(who), **kw.pop("headers", {})}
    return await s.client.request(method, path, headers=headers, **kw)


def problem(r: httpx.Response, status: int | tuple[int, ...]) -> dict[str, Any]:
    """The response is ``status`` with a JSON body that says what was wrong."""
    wanted = status if isinstance(status, tuple) else (status,)
    assert r.status_code in wanted, (r.status_code, r.text[:500])
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert body["detail"], body
    return body


# --------------------------------------------------------------------------- bodies

# (endpoint under the run, raw body, content type, status)
BAD_BODIES: list[tuple[str, bytes, str, int | tuple[int, ...]]] = [
    ("commands", b"{not json", "application/json", 400),
    ("commands", b"[1, 2]", "application/json", 422),
    ("commands", b'"pause"', "application/json", 422),
    ("commands", b"null", "application/json", 422),
    ("pause", b"[1]", "application/json", 422),
    ("pause", b"{", "application/json", 400),
    ("pause", b"hello", "text/plain", 415),
    ("steer", b'{"message": "x"}', "text/plain", 415),
    ("steer", b'{"message": "\xff\xfe"}', "application/json", 400),
    # UTF-16 and UTF-32 (which json.loads of bytes reads) are not UTF-8 either: they were taken
    ("steer", '{"message": "x"}'.encode("utf-16"), "application/json", 400),
    ("steer", '{"message": "x"}'.encode("utf-16-le"), "application/json", 400),
    ("commands", '{"kind": "pause"}'.encode("utf-32"), "application/json", 400),
    ("steer", b'{"message": "\xed\xa0\x80"}', "application/json", 400),  # a surrogate's bytes
    ("steer", b'{"message": "\\ud800 hi"}', "application/json", 422),
    # 400 where the JSON parser gives up on the depth, else 422 from the payload's own check
    ("commands", b'{"kind": "pause", "payload": {"x": ' + b"[" * 5000 + b"]" * 5000 + b"}}", "application/json", (400, 422)),
    ("commands", b'{"kind": "pause", "correlation_id": "\\udc00"}', "application/json", 422),
    ("commands", b'{"kind": "pause", "checkpoint_id": "\\udc00"}', "application/json", 422),
    ("pause", b'{"reason": "\\udc00"}', "application/json", 422),
    (
        "commands",
        b'{"kind": "add_instruction", "payload": {"text": "ok", "\\udc00": 1}}',
        "application/json",
        422,
    ),
    ("commands", b'{"kind": "approve", "payload": {"x": "\\ud800"}}', "application/json", 422),
    ("commands", b'{"kind": "approve", "payload": {"x": NaN}}', "application/json", 422),
    ("commands", b'{"kind": "approve", "payload": {"x": -Infinity}}', "application/json", 422),
    ("commands", b'{"kind": "approve", "payload": {"x": 1e400}}', "application/json", 422),
    ("commands", b'{"kind": "pause", "priority": NaN}', "application/json", 422),
    ("commands", b'{"kind": "approve", "payload": {"x": ' + b"1" * 4100 + b"}}", "application/json", 422),
    ("commands", b'{"kind": "approve", "payload": {"x": ' + b"1" * 5000 + b"}}", "application/json", 400),
    ("commands", b'{"kind": "approve", "payload": {"x": [' + b"0," * 1_200_000 + b"0]}}", "application/json", 422),
    ("commands", b"[" * 200_000, "application/json", 400),
    ("commands", b"", "application/json", 422),
    ("commands", b'{"kind": "pause"}', "application/x-www-form-urlencoded", 415),
    ("commands", b'--x\r\nContent-Disposition: form-data; name="kind"\r\n\r\npause\r\n--x--\r\n', "multipart/form-data; boundary=x", 415),
    ("commands", b'{"kind": "pause"}', "text/json", 415),
]  # fmt: skip


@pytest.mark.parametrize(("endpoint", "content", "ctype", "status"), BAD_BODIES)
async def test_a_body_that_is_not_a_valid_json_object_is_refused(
    served: Served, endpoint: str, content: bytes, ctype: str, status: int | tuple[int, ...]
) -> None:
    run = await served.start_run("acme")
    path = f"{BASE}/runs/{run.run_id}/{endpoint}"
    r = await raw(served, "alice", "POST", path, content=content, headers={"content-type": ctype})
    problem(r, status)
    await unchanged(served, run)


@pytest.mark.parametrize(
    ("endpoint", "content", "key"),
    [
        ("commands", b'{"kind": "pause", "kind": "cancel"}', "kind"),
        ("steer", b'{"message": "a", "message": "b"}', "message"),
        ("commands", b'{"kind": "add_instruction", "payload": {"text": "a", "text": "b"}}', "text"),
        (
            "pause",
            b'{"reason": "a", "correlation_id": "k", "correlation_id": "k2"}',
            "correlation_id",
        ),
    ],
)
async def test_a_key_given_twice_in_a_body_is_a_400_that_names_it(
    served: Served, endpoint: str, content: bytes, key: str
) -> None:
    """JSON with a key given twice was read as its last value: ``{"kind": "pause", "kind":
    "cancel"}`` cancelled the run, while a proxy, a log or a reviewer reading the first
    value saw a pause. Which one a reader keeps is up to the reader (RFC 8259): refused."""
    run = await served.start_run("acme")
    path = f"{BASE}/runs/{run.run_id}/{endpoint}"
    r = await raw(served, "alice", "POST", path, content=content, headers=JSON)
    body = problem(r, 400)
    assert f"{key!r} is given twice" in body["detail"], body
    await unchanged(served, run)
    # without a valid token, the token is what is wrong (as for any unreadable body)
    r = await raw(served, "nobody", "POST", path, content=content, headers=JSON)
    problem(r, 401)


BAD_FIELDS: list[tuple[str, dict[str, Any]]] = [
    ("commands", {"kind": "explode"}),
    ("commands", {"kind": 5}),
    ("commands", {}),
    ("commands", {"kind": "pause", "payload": [1]}),
    ("commands", {"kind": "add_instruction", "payload": {}}),
    ("commands", {"kind": "add_instruction", "payload": {"text": 5}}),
    ("commands", {"kind": "add_instruction", "payload": {"text": "a", "zzz": 1}}),
    ("commands", {"kind": "constrain_tools", "payload": {"tools": "abc"}}),
    ("commands", {"kind": "redirect", "payload": {"goto": 5}}),
    ("commands", {"kind": "pause", "priority": "urgent"}),
    ("commands", {"kind": "pause", "priority": 99}),
    ("commands", {"kind": "pause", "priority": True}),
    ("commands", {"kind": "pause", "delivery": "immediate"}),
    ("commands", {"kind": "pause", "delivery": "later"}),
    ("commands", {"kind": "pause", "correlation_id": 5}),
    ("commands", {"kind": "pause", "correlation_id": ""}),
    ("commands", {"kind": "pause", "correlation_id": "c" * 201}),
    ("commands", {"kind": "pause", "correlation_id": "a\x00b"}),
    ("commands", {"kind": "pause", "checkpoint_id": ""}),
    ("commands", {"kind": "pause", "checkpoint_id": "c\x00"}),
    ("commands", {"kind": "pause", "checkpoint_id": "c" * 100_000}),
    ("commands", {"kind": "pause", "fork": "yes"}),
    # lax parsing took these as true, 100 and an abort: JSON has booleans and numbers
    ("commands", {"kind": "pause", "fork": "true"}),
    ("commands", {"kind": "pause", "fork": 1}),
    ("commands", {"kind": "pause", "priority": "100"}),
    ("commands", {"kind": "pause", "priority": " 100 "}),
    ("commands", {"kind": "pause", "priority": "1_00"}),
    ("commands", {"kind": "pause", "priority": 100.0}),
    ("commands", {"kind": "pause", "priority": False}),
    ("commands", {"kind": "cancel", "payload": {"abort": "yes"}}),
    ("commands", {"kind": "cancel", "payload": {"abort": 1}}),
    ("pause", {"priority": "100"}),
    ("commands", {"kind": "pause", "target": {"run_id": "r-x"}}),
    ("commands", {"kind": "pause", "actor": {"kind": "human"}}),
    ("pause", {"reason": 5}),
    ("pause", {"reason": "r" * 2001}),
    ("abort", {"nope": 1}),
    ("steer", {"message": ["a"]}),
    ("steer", {"message": "go", "correlation_id": "x\x00"}),
]


@pytest.mark.parametrize(("endpoint", "body"), BAD_FIELDS)
async def test_a_field_of_the_wrong_type_or_shape_is_422(
    served: Served, endpoint: str, body: dict[str, Any]
) -> None:
    run = await served.start_run("acme")
    r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/{endpoint}", body)
    problem(r, 422)
    await unchanged(served, run)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("correlation_id", "", "at least 1 character"),
        ("correlation_id", "c" * 201, "201 characters; at most 200"),  # the id rule's words
        ("checkpoint_id", "", "at least 1 character"),
    ],
)
async def test_an_id_out_of_bounds_is_a_422_that_counts_characters(
    served: Served, field: str, value: str, says: str
) -> None:
    # the bounds were put on the optional field, so pydantic spoke of "items" of a list
    run = await served.start_run("acme")
    body = {"kind": "pause", field: value}
    r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/commands", body)
    message = problem(r, 422)["message"]
    assert field in message and says in message and "item" not in message, message
    await unchanged(served, run)


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "add_instruction", "payload": {"text": "x", "k" * 1_000_000: 1}},
        {
            "kind": "add_instruction",
            "payload": {"text": "x", **{f"k{i}": i for i in range(50_000)}},
        },
        {"kind": "pause", **{f"e{i}": 1 for i in range(50_000)}},
        {"kind": "pause", "e" * 1_000_000: 1},
    ],
    ids=["long-payload-key", "many-payload-keys", "many-body-keys", "long-body-key"],
)
async def test_a_422_says_its_problems_in_a_few_lines_not_megabytes(
    served: Served, body: dict[str, Any]
) -> None:
    """Each problem quoted what it was about: a body of 50,000 unknown keys (half a
    megabyte) was answered with 6.7 MB, its one-line message 2.2 million characters, and a
    key of a million characters came back twice."""
    run = await served.start_run("acme")
    r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/commands", body)
    found = problem(r, 422)
    assert len(r.content) < 16_384, len(r.content)
    assert len(found["message"]) <= 2_000, len(found["message"])
    assert "Extra inputs are not permitted" in found["message"], found["message"][:300]
    if isinstance(found["detail"], list) and len(found["detail"]) > 1:
        assert "more" in found["message"], found["message"][-300:]
    await unchanged(served, run)


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "add_instruction", "payload": {"text": "x" * 3_000_000}},
        {"kind": "replace_instruction", "payload": {"text": "y" * 3_000_000}},
    ],
)
async def test_megabytes_of_text_are_a_rejected_receipt_not_an_error(
    served: Served, body: dict[str, Any]
) -> None:
    run = await served.start_run("acme")
    r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/commands", body)
    assert r.status_code == 200 and r.json()["status"] == "rejected", r.text[:300]
    assert "too large" in r.json()["reason"]
    history = await call(served, "alice", "GET", f"{BASE}/runs/{run.run_id}/steering")
    assert len(history.content) < 100_000  # the audit trail keeps a summary, not the text


async def test_a_second_command_with_a_used_correlation_id_changes_nothing(
    served: Served,
) -> None:
    run = await served.start_run("acme")
    other = await served.start_run("globex")
    steer = f"{BASE}/runs/{run.run_id}/steer"
    first = await call(served, "alice", "POST", steer, {"message": "one", "correlation_id": "k"})
    assert first.json()["status"] == "accepted"
    for path, body in (
        (steer, {"message": "two", "correlation_id": "k"}),
        (f"{BASE}/runs/{run.run_id}/commands", {"kind": "cancel", "correlation_id": "k"}),
    ):
        r = await call(served, "alice", "POST", path, body)
        assert r.status_code == 200 and r.json()["status"] == "duplicate", r.text
    history = await call(served, "alice", "GET", f"{BASE}/runs/{run.run_id}/steering")
    assert [c["kind"] for c in history.json()] == ["add_instruction"]
    # Another tenant's id space is its own: the same id is news there.
    r = await call(
        served,
        "bob",
        "POST",
        f"{BASE}/runs/{other.run_id}/steer",
        {"message": "x", "correlation_id": "k"},
    )
    assert r.json()["status"] == "accepted", r.text


# --------------------------------------------------------------------------- ids

ODD_IDS = ["r" * 10_000, "ünï€😀", "%ED%A0%80", "%FF%FE", "a%00b", "..%2F..%2Fetc", "%20"]


@pytest.mark.parametrize("run_id", ODD_IDS)
async def test_an_odd_run_id_is_404_on_every_endpoint(served: Served, run_id: str) -> None:
    for method, path, body in run_paths(run_id):
        r = await call(served, "alice", method, path, body)
        # An id in the query that breaks the id rule is 422; "/" in the id matches no route.
        status = 422 if "?" in path and (len(run_id) > 256 or "%00" in run_id) else 404
        assert (
            problem(r, status)["detail"] in ("run not found", "Not Found") or r.status_code == 422
        )


async def test_an_encoded_slash_in_an_id_is_the_apis_not_found(served: Served) -> None:
    """``/runs/a%2Fb`` reached the router as ``/runs/a/b``, a path of no route: FastAPI's own
    ``{"detail": "Not Found"}`` (no ``message``), where every other id that names no run is
    the API's not-found answer. The id is the segment as sent: the token is asked first, and
    the answer is that of any id that names no run."""
    run = await served.start_run("acme")
    slashed, plain = run_paths("a%2Fb"), run_paths("a-b")
    for (method, path, body), (_, plain_path, _) in zip(slashed, plain, strict=True):
        if "?" in path:
            continue  # (in the query, %2F is a "/" of the value: no run either)
        answers = []
        for p in (path, plain_path):
            r = await call(served, "alice", method, p, body)
            answers.append((r.status_code, r.json()))
        assert answers[0] == answers[1], (method, path, answers)
        problem(r, 404)
        assert (await served.client.request(method, path, json=body)).status_code == 401
    for coded in ("a%2Fb", "a%2fb", "%2F"):
        path = f"{BASE}/runs/{run.run_id}/tasks/{coded}/commands"
        body = problem(await call(served, "alice", "POST", path, {"kind": "approve"}), 404)
        assert body["message"].startswith("task not found"), body
    await unchanged(served, run)


@pytest.mark.parametrize("task_id", ["a%00b", "t" * 600])
async def test_an_odd_task_id_is_404(served: Served, task_id: str) -> None:
    run = await served.start_run("acme")
    path = f"{BASE}/runs/{run.run_id}/tasks/{task_id}/commands"
    r = await call(served, "alice", "POST", path, {"kind": "approve"})
    assert "not found" in problem(r, 404)["detail"]
    await unchanged(served, run)


# Ids that break the id rule (tinyagents.protocol.ids: at most 256 characters, no control
# character), as sent in a URL: 257 and 512 characters (512 was the API's own bound, another
# rule than the stores'), C0 and C1 controls, DEL.
RULE_BREAKING_IDS = ["r" * 257, "r" * 512, "a%01b", "a%1Fb", "a%7Fb", "a%C2%85b", "a%C2%9Fb"]


@pytest.mark.parametrize("run_id", RULE_BREAKING_IDS)
async def test_an_id_breaking_the_id_rule_is_404_in_the_path_and_422_in_the_query(
    served: Served, run_id: str
) -> None:
    """The API's ids obey the one id rule: in the path such an id names no run (the 404 of
    every id that names none, the store never asked); in the query it is an invalid parameter
    (a 422 that says the rule). 257 to 512 characters and control characters but NUL were
    looked up in the store, and ?run_id= of 300 characters was a 404 where 600 was a 422."""
    run = await served.start_run("acme")
    for method, path, body in run_paths(run_id):
        r = await call(served, "alice", method, path, body)
        if "?" in path:
            found = problem(r, 422)
            name = "run_id" if "?run_id=" in path else "root_run_id"
            assert found["detail"][0]["loc"] == ["query", name], found
            assert "256" in found["message"] or "control character" in found["message"], found
        else:
            assert problem(r, 404)["message"] == "run not found", (path[:80], r.text[:300])
    task_path = f"{BASE}/runs/{run.run_id}/tasks/{run_id}/commands"
    r = await call(served, "alice", "POST", task_path, {"kind": "approve"})
    assert problem(r, 404)["message"].startswith("task not found"), r.text[:300]
    await unchanged(served, run)


@pytest.mark.parametrize("checkpoint_id", ["c" * 257, "c\x01", "c\x7f", "c\x85"])
async def test_a_checkpoint_id_breaking_the_id_rule_is_a_422(
    served: Served, checkpoint_id: str
) -> None:
    run = await served.start_run("acme")
    body = {"kind": "resume", "checkpoint_id": checkpoint_id}
    r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/commands", body)
    found = problem(r, 422)
    assert found["detail"][0]["loc"] == ["body", "checkpoint_id"], found
    assert "256" in found["message"] or "control character" in found["message"], found
    await unchanged(served, run)


async def test_a_root_run_id_that_is_no_root_is_a_422_naming_the_root(served: Served) -> None:
    # ?root_run_id= of a sub-agent kept nothing: GET /runs answered [] and the event stream
    # stayed silent, as if the visible, running child had no runs and no events
    root = await served.start_run("acme")
    child = await served.start_run("acme", parent=root, name="kid")
    for path in (
        f"{BASE}/runs?root_run_id={child.run_id}",
        f"{BASE}/events?follow=false&root_run_id={child.run_id}",
    ):
        body = problem(await call(served, "alice", "GET", path), 422)
        assert body["detail"][0]["loc"] == ["query", "root_run_id"], body
        assert f"run {child.run_id} is not the root of its tree" in body["message"], body
        assert f"its root is {root.run_id}" in body["message"], body
    # the root itself is a tree, and another tenant's child is the 404 it always was
    r = await call(served, "alice", "GET", f"{BASE}/runs?root_run_id={root.run_id}")
    assert r.status_code == 200 and {x["run_id"] for x in r.json()} >= {root.run_id}, r.text
    problem(await call(served, "bob", "GET", f"{BASE}/runs?root_run_id={child.run_id}"), 404)


async def test_events_of_a_run_outside_the_root_filtered_on_are_a_422(served: Served) -> None:
    # ?run_id= and ?root_run_id= of two different trees kept nothing: the stream stayed
    # silent for ever, as if the visible, running run had no events
    one = await served.start_run("acme")
    other = await served.start_run("acme")
    child = await served.start_run("acme", parent=one, name="kid")
    path = f"{BASE}/events?follow=false&run_id={child.run_id}&root_run_id={other.run_id}"
    body = problem(await call(served, "alice", "GET", path), 422)
    assert body["detail"][0]["loc"] == ["query", "root_run_id"], body
    assert f"run {child.run_id} is not in the tree of {other.run_id}" in body["message"], body
    assert f"its root is {one.run_id}" in body["message"], body
    # a run of that tree (the root itself too) streams as before, once its events are
    # logged (a stream that does not follow reads the log, which the writer fills a moment
    # after the events happen)
    await served.runtime.flush()
    for run_id in (child.run_id, one.run_id):
        path = f"{BASE}/events?follow=false&run_id={run_id}&root_run_id={one.run_id}"
        r = await call(served, "alice", "GET", path)
        assert r.status_code == 200 and f'"run_id":"{run_id}"' in r.text, r.text


@pytest.fixture
async def pg_served(tmp_path: Path) -> AsyncIterator[Served]:
    """As ``served``, over PostgreSQL (which refuses NUL in text, unlike SQLite)."""
    store = f"{postgres_dsn()}?schema={pg_schema()}"
    try:
        async for s in _serve(tmp_path, store=store):
            yield s
    finally:
        await drop_pg_schemas()


async def test_nul_in_an_id_is_404_or_422_over_postgres(pg_served: Served) -> None:
    s = pg_served
    for method, path, body in run_paths("a%00b"):
        # in the path no run's id; in the query an id that breaks the id rule
        problem(await call(s, "alice", method, path, body), 422 if "?" in path else 404)
    run = await s.start_run("acme")
    base = f"{BASE}/runs/{run.run_id}"
    problem(
        await call(s, "alice", "POST", f"{base}/tasks/a%00b/commands", {"kind": "approve"}), 404
    )
    for body in (
        {"kind": "pause", "correlation_id": "x\x00y"},
        {"kind": "pause", "checkpoint_id": "c\x00"},
    ):
        problem(await call(s, "alice", "POST", f"{base}/commands", body), 422)
    await unchanged(s, run)


async def test_a_token_whose_tenant_holds_nul_is_refused_not_a_store_outage(
    pg_served: Served,
) -> None:
    """No run can belong to a tenant whose id holds NUL (``rt.start`` refuses it), yet such a
    token was minted, and over PostgreSQL every listing it asked for was a 503 "the store
    cannot be read now": an outage to wait out, for a request that could never succeed."""
    from biscuit_auth import BiscuitBuilder

    s = pg_served
    with pytest.raises(ConfigurationError, match="tenant"):
        s.auth.mint(user="u", tenant="ac\x00me", rights=["agent:observe"])
    # one minted before mint refused it (as it was built then)
    builder = BiscuitBuilder('user("u"); tenant({t}); right("agent:observe");', {"t": "ac\x00me"})
    token = builder.build(s.auth._keypair.private_key).to_base64()
    for path in ("runs", "events?follow=false"):
        r = await raw(s, token, "GET", f"{BASE}/{path}")
        assert "tenant" in problem(r, 401)["message"], r.text


# --------------------------------------------------------------------------- queries


@pytest.mark.parametrize(
    "query",
    [
        "runs/{run}/trace?limit=-1",
        "runs/{run}/trace?limit=0",
        "runs/{run}/trace?limit=99999999999999999999999",
        "runs/{run}/trace?limit=abc",
        "runs?status=runing",
        "runs?status=a%00",
        "events?last_event_id=-5&follow=false",
        "events?last_event_id=abc&follow=false",
        "events?last_event_id=99999999999999999999999999&follow=false",
        f"events?last_event_id={2**63}&follow=false",
        "events?follow=maybe",
        "runs?status=",
        "runs/{run}/trace?limit=",
        "runs/{run}/trace?limit=1.5",
        "runs/{run}/trace?limit=1e3",
        "events?last_event_id=&follow=false",
        "events?last_event_id=1.5&follow=false",
        # read by int() as 30, 3 and 3: an event id is digits only
        "events?last_event_id=3_0&follow=false",
        "events?last_event_id=%2B3&follow=false",
        "events?last_event_id=3.0&follow=false",
        "events?last_event_id=%D9%A3&follow=false",  # an Arabic-Indic 3, which int() reads
        # a limit, as lax parsing read them: 50, 5, 5 and 5 (a proxy or a log may read
        # another number, or none); a limit is digits only, as an event id is
        "runs?limit=5_0",
        "runs/{run}/trace?limit=%2B5",
        "runs/{run}/steering?limit=%205",
        "runs/{run}/tree?limit=5.0",
        "runs/{run}/steering?limit=5%20",
    ],
)
async def test_a_bad_query_parameter_is_422(served: Served, query: str) -> None:
    run = await served.start_run("acme")
    r = await call(served, "alice", "GET", f"{BASE}/" + query.format(run=run.run_id))
    assert "query" in problem(r, 422)["message"]


async def test_a_query_parameter_given_twice_is_a_422_naming_it(served: Served) -> None:
    """``?limit=1&limit=1000`` or ``/events?run_id=A&run_id=B`` was answered for the last
    value, where a proxy, a cache key or an access log may read the first (the reason a
    body's key given twice is refused). Every parameter of one value, as the OpenAPI
    document lists them, given twice is a 422 naming it; ``status``, a list, may repeat."""
    root = await served.start_run("acme")
    await served.start_run("acme")
    first = await call(served, "alice", "GET", f"{BASE}/runs?limit=1")
    cursor = first.links["next"]["url"].split("cursor=", 1)[1]
    given = {
        "limit": ("1", "2"),
        "cursor": (cursor, cursor),
        "before": ("1", "5"),
        "root_run_id": (root.run_id, root.run_id),
        "run_id": (root.run_id, root.run_id),
        "last_event_id": ("0", "5"),
        "follow": ("false", "false"),
        "access_token": (served.tokens["alice"], served.tokens["alice"]),
        "ticket": ("t", "t"),
    }
    doc = (await served.client.get(f"{BASE}/openapi.json")).json()
    asked = 0
    for path, methods in doc["paths"].items():
        for param in methods.get("get", {}).get("parameters", []):
            schema = param["schema"]
            if param["in"] != "query" or "array" in json.dumps(schema):
                continue
            name = param["name"]
            assert name in given, f"{path}: a value to send for ?{name}="
            a, b = given[name]
            url = f"{path.format(run_id=root.run_id)}?{name}={a}&{name}={b}"
            if path.endswith("/events"):
                url += "&follow=false" if name != "follow" else ""
            headers = {} if name == "access_token" else served.as_("alice")
            body = problem(await served.client.get(url, headers=headers), 422)
            assert [e["loc"] for e in body["detail"]] == [["query", name]], (url, body)
            assert f"?{name}= is given 2 times" in body["message"], body
            asked += 1
    assert asked == 14, asked  # (limit and before of /trace and /steering, /tree?limit too)
    r = await call(served, "alice", "GET", f"{BASE}/runs?status=running&status=paused")
    assert r.status_code == 200 and {x["run_id"] for x in r.json()} >= {root.run_id}, r.text
    r = await served.client.get(f"{BASE}/runs?limit=1&limit=2")
    problem(r, 401)  # the token first, as for every other problem


@pytest.mark.parametrize(
    "header",
    ["garbage", "-3", "9" * 40, str(2**63), "9" * 5000, "1e3", "1.5", "3_0", "+3", "3.0"],
)
async def test_a_last_event_id_header_that_is_no_event_id_is_422(
    served: Served, header: str
) -> None:
    """As the query parameter is: it was ignored, so the client got the tenant's whole log
    again from the start, every event it had already seen shown twice."""
    await served.start_run("acme")
    r = await raw(
        served, "alice", "GET", f"{BASE}/events?follow=false", headers={"Last-Event-ID": header}
    )
    body = problem(r, 422)
    assert "last-event-id" in body["message"].lower(), body


async def test_an_empty_last_event_id_header_is_no_id_the_stream_starts_at_the_beginning(
    served: Served,
) -> None:
    """The SSE spec's empty id is "no last event id" (an ``id:`` field with no value resets
    it, and a client holding none sends no header): an empty header was a 422, so a client
    that sends the header it holds, empty before it has seen an id, could not connect."""
    run = await served.start_run("acme")
    await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/steer", {"message": "x"})
    await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/abort", None)
    await run.result()
    url = f"{BASE}/events?follow=false&run_id={run.run_id}"

    async def logged() -> httpx.Response | None:
        r = await raw(served, "alice", "GET", url)
        assert r.status_code == 200, r.text
        return r if "event: run.cancelled" in r.text else None

    plain = await eventually(logged)  # the whole run, written to the log
    empty = await raw(served, "alice", "GET", url, headers={"Last-Event-ID": ""})
    assert empty.status_code == 200, empty.text[:300]
    assert empty.text == plain.text


async def test_a_last_event_id_of_0_in_the_query_is_an_id(served: Served) -> None:
    """``?last_event_id=0`` asks for everything: it was read as no answer (0 is falsy), and
    the header's id was used instead. (Both given, the later id is where the stream goes on:
    ``test_sse.py::test_an_eventsource_reconnecting_to_a_url_with_last_event_id_...``.)"""
    run = await served.start_run("acme")
    await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/steer", {"message": "x"})

    async def ids(query: str, header: str) -> list[str]:
        r = await raw(
            served,
            "alice",
            "GET",
            f"{BASE}/events?follow=false&run_id={run.run_id}{query}",
            headers={"Last-Event-ID": header},
        )
        assert r.status_code == 200, r.text[:300]
        return [line for line in r.text.splitlines() if line.startswith("id:")]

    everything = await eventually(lambda: ids("", "0"))  # (the run goes on logging)
    last = everything[-1]
    assert (await ids("&last_event_id=0", ""))[: len(everything)] == everything
    assert (await ids("&last_event_id=0", "0"))[: len(everything)] == everything
    assert last not in await ids("", last.removeprefix("id: "))
    assert last not in await ids("&last_event_id=0", last.removeprefix("id: "))


async def test_a_last_event_id_header_given_twice_is_a_422_naming_it(served: Served) -> None:
    """Two ``Last-Event-ID`` headers were read as the first, silently, where a proxy or a log
    may read the other (a query parameter of one value given twice is a 422 for that)."""
    await served.start_run("acme")
    for first, second in (("0", "5"), ("3", "3")):
        headers = [
            *served.as_("alice").items(),
            ("Last-Event-ID", first),
            ("Last-Event-ID", second),
        ]
        r = await served.client.get(f"{BASE}/events?follow=false", headers=headers)
        body = problem(r, 422)
        assert [e["loc"] for e in body["detail"]] == [["header", "last-event-id"]], body
        assert "given 2 times" in body["message"], body
    r = await served.client.get(
        f"{BASE}/events?follow=false", headers=[("Last-Event-ID", "0"), ("Last-Event-ID", "1")]
    )
    problem(r, 401)  # the token first, as for every other problem


async def test_a_content_type_header_given_twice_is_a_422_naming_it(served: Served) -> None:
    """Two ``Content-Type`` headers were read as the first: JSON then text was taken as JSON
    (the command sent), text then JSON refused as no JSON, while a proxy or a log may read
    the other. Either order is now a 422 naming the header, the token checked first."""
    run = await served.start_run("acme")
    url = f"{BASE}/runs/{run.run_id}/commands"
    body = json.dumps({"kind": "pause"}).encode()
    for pair in (("application/json", "text/plain"), ("text/plain", "application/json")):
        headers = [*served.as_("alice").items(), *(("Content-Type", ct) for ct in pair)]
        r = await served.client.post(url, content=body, headers=headers)
        answer = problem(r, 422)
        assert [e["loc"] for e in answer["detail"]] == [["header", "content-type"]], answer
        assert "given 2 times" in answer["message"], answer
    assert run.info.status.value == "running" and not served.runtime.router.open_commands()
    r = await served.client.post(
        url,
        content=body,
        headers=[("Content-Type", "application/json"), ("Content-Type", "application/json")],
    )
    problem(r, 401)  # the token first, as for every other problem
    r = await served.client.post(
        url, content=body, headers={**served.as_("alice"), "Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text


# --------------------------------------------------------------------------- tokens


async def test_a_stream_sent_two_different_tokens_is_a_401(served: Served) -> None:
    """``/events`` with a Bearer header and another token in ``?access_token=`` streamed as
    the header's, silently, while a proxy or a log may have judged it by the query's (as two
    Authorization headers). Two different tokens are a 401; the same one twice still streams."""
    run = await served.start_run("acme")
    alice, bob = served.tokens["alice"], served.tokens["bob"]
    for header, query in ((alice, bob), (bob, alice)):
        r = await served.client.get(
            f"{BASE}/events?follow=false&access_token={query}",
            headers={"Authorization": f"Bearer {header}"},
        )
        body = problem(r, 401)
        assert "?access_token=" in body["message"] and "Authorization" in body["message"], body
    await served.runtime.flush()
    r = await served.client.get(
        f"{BASE}/events?follow=false&access_token={alice}",
        headers={"Authorization": f"Bearer {alice}"},
    )
    assert r.status_code == 200 and run.run_id in r.text, r.text


async def test_two_authorization_headers_are_a_401_whichever_comes_first(served: Served) -> None:
    """Two ``Authorization`` headers were read as the first, silently: bob's token then
    alice's read alice's run as bob's (a 404), alice's then bob's showed it, while a proxy
    or a log in front may have judged the request by the other token."""
    run = await served.start_run("acme")
    alice, bob = served.as_("alice")["Authorization"], served.as_("bob")["Authorization"]
    for pair in ((alice, bob), (bob, alice), (alice, alice)):
        headers = [("Authorization", value) for value in pair]
        for method, path, body in run_paths(run.run_id):
            r = await served.client.request(method, path, json=body, headers=headers)
            message = problem(r, 401)["message"]
            assert "Authorization header is given 2 times" in message, (path, message)
            assert r.headers["www-authenticate"] == "Bearer"
    await unchanged(served, run)


async def test_bad_tokens_are_401_and_observe_only_tokens_cannot_control(served: Served) -> None:
    run = await served.start_run("acme")
    other = await served.start_run("globex")
    reader = served.auth.attenuate(served.tokens["alice"], observe_only=True)
    bob_reader = served.auth.attenuate(served.tokens["bob"], observe_only=True)
    for method, path, body in run_paths(run.run_id):
        for headers in (
            {"Authorization": "Bearer garbage!!"},
            {"Authorization": "Basic Zm9vOmJhcg=="},
            {"Authorization": "Bearer"},
            served.as_(served.auth.mint(user="e", tenant="acme", rights=["agent:control"])[:-4]),
        ):
            r = await served.client.request(method, path, json=body, headers=headers)
            problem(r, 401)
            assert r.headers["www-authenticate"] == "Bearer"
        r = await call(served, bob_reader, method, path, body)
        assert problem(r, 404)["detail"] == "run not found"
        r = await call(served, reader, method, path, body)
        assert r.status_code == (403 if method == "POST" else 200), (path, r.text)
    r = await served.client.get(f"{BASE}/runs/{run.run_id}?access_token=%00%FF")
    problem(r, 401)
    for method, path, body in run_paths(other.run_id):
        assert problem(await call(served, reader, method, path, body), 404)
    await unchanged(served, run)
    await unchanged(served, other)


# --------------------------------------------------------------------------- methods


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("OPTIONS", "runs/{run}"),
        ("DELETE", "runs/{run}"),
        ("PUT", "runs/{run}/commands"),
        ("GET", "runs/{run}/pause"),
        ("GET", "runs/{run}/steer"),
        ("PATCH", "runs"),
        ("POST", "events"),
        ("HEAD", "events?follow=false"),  # a stream: no HEAD (it would never end)
        ("OPTIONS", "runs"),
        ("OPTIONS", "runs/{run}/commands"),
        ("TRACE", "runs"),
        ("FOO", "runs/{run}/pause"),
    ],
)
async def test_a_wrong_method_is_405(served: Served, method: str, path: str) -> None:
    run = await served.start_run("acme")
    url = f"{BASE}/" + path.format(run=run.run_id)
    r = await raw(served, "alice", method, url)
    assert r.status_code == 405, (r.status_code, r.text)
    if method != "HEAD":
        problem(r, 405)
    # Allow names every method the path takes (HEAD beside GET; it named GET alone), and
    # each of them is taken.
    allowed = r.headers["allow"].split(", ")
    assert allowed == sorted(allowed) and method not in allowed
    assert ("HEAD" in allowed) == ("GET" in allowed and not path.startswith("events")), allowed
    taken = url if "?" in url else f"{url}?follow=false"  # (a followed stream never ends)
    for other in allowed:  # (a body no command takes: a 422 that changes nothing)
        got = await raw(served, "alice", other, taken, json=[])
        assert got.status_code != 405, (other, url, got.text[:300])
    await unchanged(served, run)


@pytest.mark.parametrize(
    "path", ["runs", "runs/{run}", "runs/{run}/tree", "runs/{run}/trace", "runs/{run}/steering"]
)
async def test_head_answers_as_get_does_without_a_body(served: Served, path: str) -> None:
    """HTTP has every GET answer HEAD (curl -I, uptime checkers); it was a 405."""
    run = await served.start_run("acme")
    url = f"{BASE}/" + path.format(run=run.run_id)
    got = await raw(served, "alice", "GET", url)
    head = await raw(served, "alice", "HEAD", url)
    assert (head.status_code, head.content) == (got.status_code, b"")
    assert head.headers["content-type"] == got.headers["content-type"]
    # the same refusals: no token, another tenant's run
    assert (await served.client.head(url)).status_code == 401
    if "{run}" in path:
        assert (await raw(served, "bob", "HEAD", url)).status_code == 404
    await unchanged(served, run)


@pytest.mark.parametrize("path", ["nope", "runs/{run}/nope", "runs/{run}/tasks", ""])
async def test_an_unknown_api_path_is_a_json_404(served: Served, path: str) -> None:
    run = await served.start_run("acme")
    problem(await raw(served, "alice", "GET", f"{BASE}/" + path.format(run=run.run_id)), 404)


async def test_a_command_to_a_finished_run_still_reaches_a_terminal_state(served: Served) -> None:
    run = await served.start_run("acme")
    r = await call(
        served, "alice", "POST", f"{BASE}/runs/{run.run_id}/steer", {"message": "finish"}
    )
    assert r.status_code == 200
    await run.result()
    for method, path, body in run_paths(run.run_id):
        r = await call(served, "alice", method, path, body)
        assert r.status_code in (200, 404), (path, r.text)
    # Accepted ones fail ("target finished before delivery"): none stays open.
    await eventually(lambda: served.runtime.open_commands() == [])


async def _chunks(data: bytes, size: int = 65536) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_past_the_size_limit_is_413_before_it_is_read_whole(
    served: Served, chunked: bool
) -> None:
    """Megabytes of text are a rejected receipt (above); a body past ``max_body_bytes``
    (4 MiB) is refused at the door with 413, whether or not it says its length, and records
    nothing."""
    run = await served.start_run("acme")
    body = b'{"kind": "add_instruction", "payload": {"text": "' + b"z" * 5_000_000 + b'"}}'
    content: Any = _chunks(body) if chunked else body
    path = f"{BASE}/runs/{run.run_id}/commands"
    r = await raw(served, "alice", "POST", path, content=content, headers=JSON)
    assert "4194304" in problem(r, 413)["detail"]
    await unchanged(served, run)
    ok = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/steer", {"message": "hi"})
    assert ok.status_code == 200 and ok.json()["status"] == "accepted"  # the server goes on


async def test_a_task_command_to_an_agent_run_is_404_not_a_command_that_fails_later(
    served: Served,
) -> None:
    run = await served.start_run("acme")
    path = f"{BASE}/runs/{run.run_id}/tasks/t-1/commands"
    body = problem(await call(served, "alice", "POST", path, {"kind": "approve"}), 404)
    assert "agent run" in body["detail"] and f"/runs/{run.run_id}/commands" in body["detail"]
    await unchanged(served, run)


# --------------------------------------------------------------------------- said clearly


@pytest.mark.parametrize(
    ("endpoint", "content", "said"),
    [
        ("commands", b'{"kind": "approve", "payload": {"x": ' + b"1" * 5000 + b"}}", "digits"),
        ("commands", b"[" * 200_000, "nested"),
        ("steer", b'{"message": "\xff\xfe"}', "UTF-8"),
    ],
)
async def test_a_body_the_json_reader_gives_up_on_says_why(
    served: Served, endpoint: str, content: bytes, said: str
) -> None:
    """The reader's own refusals (not a JSON syntax error, which is a 400 with its position)
    are a 400 that says what stopped it, not only "There was an error parsing the body"."""
    run = await served.start_run("acme")
    path = f"{BASE}/runs/{run.run_id}/{endpoint}"
    r = await raw(served, "alice", "POST", path, content=content, headers=JSON)
    body = problem(r, 400)
    assert said in body["detail"] and body["message"] == body["detail"], body
    await unchanged(served, run)


@pytest.mark.parametrize(
    ("priority", "got"),
    [("100", '"100"'), (100.0, "100.0"), (True, "true"), (7, "7"), ("urgent", '"urgent"')],
)
async def test_a_bad_priority_is_one_plain_message(served: Served, priority: Any, got: str) -> None:
    """One message naming what a priority may be and what was sent, never pydantic's union
    internals ("function-before[_a_json_integer(), literal[...]]")."""
    run = await served.start_run("acme")
    path = f"{BASE}/runs/{run.run_id}/commands"
    body = problem(
        await call(served, "alice", "POST", path, {"kind": "pause", "priority": priority}), 422
    )
    assert body["message"] == (
        "body.priority: a JSON integer (0, 50, 100, 200) or a name (low, normal, high, "
        f"critical); got {got}"
    ), body
    assert [e["loc"] for e in body["detail"]] == [["body", "priority"]]
    await unchanged(served, run)


async def test_a_body_that_is_not_json_is_a_400_that_says_where(served: Served) -> None:
    """A JSON syntax error is the docs' 400 "not UTF-8 JSON", with where and what, not a 422
    "body.11: JSON decode error"."""
    run = await served.start_run("acme")
    path = f"{BASE}/runs/{run.run_id}/steer"
    r = await raw(served, "alice", "POST", path, content=b'{"message":', headers=JSON)
    body = problem(r, 400)
    assert body["message"].startswith("the body is not valid JSON (at character 11): "), body
    assert body["detail"] == body["message"]
    await unchanged(served, run)


@pytest.mark.parametrize(
    "content", [b'{"message":', b"{not json", b'{"message": "\xff\xfe"}', b"[" * 200_000]
)
@pytest.mark.parametrize("token", [None, "forged"])
async def test_a_bad_body_without_a_valid_token_is_a_401(
    served: Served, content: bytes, token: str | None
) -> None:
    """The token is checked before the body is read as JSON: a caller without one learns
    nothing about the body (nor that the endpoint parses it), only that it needs a token."""
    run = await served.start_run("acme")
    headers = dict(JSON)
    if token is not None:
        headers["Authorization"] = "Bearer " + Auth(Auth.generate_key()).mint(
            user="eve", tenant="acme", rights=["iam:admin"]
        )
    path = f"{BASE}/runs/{run.run_id}/steer"
    r = await served.client.post(path, content=content, headers=headers)
    problem(r, 401)
    assert r.headers["www-authenticate"] == "Bearer"
    await unchanged(served, run)


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "x-custom, identity"])
@pytest.mark.parametrize("endpoint", ["commands", "steer", "pause"])
async def test_a_compressed_body_is_a_415_not_a_body_that_is_not_utf8(
    served: Served, coding: str, endpoint: str
) -> None:
    """A client that compresses its bodies (``Content-Encoding: gzip``) was told "the body
    could not be read as JSON: it is not UTF-8 text", a 400 blaming its JSON: the server
    reads a body as sent. It is a 415 naming the coding, with ``Accept-Encoding: identity``
    (RFC 9110); after the token check, and nothing is recorded."""
    run = await served.start_run("acme")
    sent = {"commands": {"kind": "pause"}, "steer": {"message": "hi"}, "pause": {"reason": "x"}}
    content = gzip.compress(json.dumps(sent[endpoint]).encode())
    path = f"{BASE}/runs/{run.run_id}/{endpoint}"
    headers = {**JSON, "content-encoding": coding}
    r = await raw(served, "alice", "POST", path, content=content, headers=headers)
    body = problem(r, 415)
    assert body["message"] == body["detail"] and repr(coding) in body["message"], body
    assert "uncompressed" in body["message"], body
    assert r.headers["accept-encoding"] == "identity"
    await unchanged(served, run)
    r = await served.client.post(path, content=content, headers=headers)
    problem(r, 401)
    await unchanged(served, run)
    r = await raw(
        served, "alice", "POST", path, json=sent[endpoint], headers={"content-encoding": "identity"}
    )
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text


@pytest.mark.parametrize(
    "ctype",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
@pytest.mark.parametrize("endpoint", ["commands", "steer", "pause"])
async def test_json_sent_without_a_json_content_type_is_told_so(
    served: Served, ctype: str | None, endpoint: str
) -> None:
    """``curl -d '{...}'`` sends a form content type: the answer names the header to send,
    not only "Input should be a valid dictionary". It is a 415 ``unsupported_media_type``
    (the body's type is what is refused, as HTTP has it), with ``Accept`` naming the type
    taken: it was a 422 ``invalid_request``, as if the JSON had been read and found wrong.
    A body with no Content-Type is not guessed at: it is the same 415."""
    run = await served.start_run("acme")
    content = b'{"kind": "pause", "message": "x"}' if endpoint != "pause" else b'{"reason": "x"}'
    headers = {} if ctype is None else {"content-type": ctype}
    path = f"{BASE}/runs/{run.run_id}/{endpoint}"
    r = await raw(served, "alice", "POST", path, content=content, headers=headers)
    body = problem(r, 415)
    assert body["type"] == "unsupported_media_type", body
    assert "Content-Type: application/json" in body["message"], body
    assert r.headers["accept"] == "application/json", r.headers
    await unchanged(served, run)
    # the same without a valid token is the 401, as a 400 or a 413 is
    r = await served.client.post(path, content=content, headers=headers)
    problem(r, 401)


@pytest.mark.parametrize(
    "ctype",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON;charset=UTF-8",
        "application/merge-patch+json",
        "application/vnd.tinyagents+json; charset=utf-8",
    ],
)
async def test_a_json_content_type_with_parameters_or_a_json_suffix_is_taken(
    served: Served, ctype: str
) -> None:
    run = await served.start_run("acme", think_s=IDLE_S)
    path = f"{BASE}/runs/{run.run_id}/commands"
    r = await raw(
        served, "alice", "POST", path, content=b'{"kind": "pause"}', headers={"content-type": ctype}
    )
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text


@pytest.mark.parametrize("ctype", [None, "text/plain"])
async def test_a_command_sent_with_no_body_is_taken_whatever_its_content_type(
    served: Served, ctype: str | None
) -> None:
    # no body, no media type to refuse: ``curl -X POST .../pause`` (and with -H) pauses
    run = await served.start_run("acme", think_s=IDLE_S)
    headers = {} if ctype is None else {"content-type": ctype}
    path = f"{BASE}/runs/{run.run_id}/pause"
    r = await raw(served, "alice", "POST", path, content=b"", headers=headers)
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text


async def test_a_raw_path_with_dot_segments_is_a_json_404(served: Served) -> None:
    """A path as sent on the wire (httpx would remove the dot segments) reaches no file and
    no run. One that named the console files' own folder (``/console.css/..``) was answered
    by Starlette's ``StaticFiles`` with a 307 to an absolute ``http://`` URL built from the
    request's ``Host`` header: a redirect the API never makes (wrong behind a TLS proxy), to
    a host the client chose."""
    from test_transport_limits import raw_request

    run = await served.start_run("acme")
    for path in (
        "/../../etc/passwd",
        "/static/../../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/console.css/..",
        "/x/..",
        "/.",
        "/x/../index.html",
        "/./console.js",
        f"{BASE}/runs/../runs",
        f"{BASE}/runs/{run.run_id}/../../runs",
        f"{BASE}/runs/{run.run_id}/tree/..",
    ):
        answer = await raw_request(served, served.as_("alice"), path)
        assert answer is not None and answer[0] == 404, (path, answer)
        assert b"content-type: application/json" in answer[1], (path, answer)
        assert b"root:" not in answer[2]
    await unchanged(served, run)


async def test_a_raw_path_with_an_empty_segment_is_a_json_404(served: Served) -> None:
    """``//console.js`` (or ``/%2Fconsole.js``, a slash the server decodes) is no path of the
    console, as ``//api/agents/runs`` is none of the API's: StaticFiles read the doubled
    slash away and served the file, so ``//api-docs.html`` even served the raw docs file
    that ``/api-docs.html`` redirects away from (its inline script blocked by the console's
    policy). Every such path is the one JSON 404 the API gives it."""
    from test_transport_limits import raw_request

    run = await served.start_run("acme")
    api_answer = await raw_request(served, served.as_("alice"), f"/{BASE}/runs")
    assert api_answer is not None and api_answer[0] == 404, api_answer
    for path in (
        "//",
        "///",
        "//console.js",
        "///console.js",
        "//index.html",
        "//console.css",
        "//api-docs.html",
        "/%2Fconsole.js",
        "/%2f%2fconsole.js",
        "//healthz",
        f"/{BASE}/docs",
    ):
        answer = await raw_request(served, served.as_("alice"), path)
        assert answer is not None and answer[0] == 404, (path, answer)
        assert b"content-type: application/json" in answer[1], (path, answer)
        assert answer[2] == api_answer[2], (path, answer)
    for path in ("/", "/console.js", "/index.html"):  # the one-slash paths still serve
        answer = await raw_request(served, served.as_("alice"), path)
        assert answer is not None and answer[0] == 200, (path, answer)
    await unchanged(served, run)


async def test_another_tenants_run_and_no_run_get_the_same_bytes(served: Served) -> None:
    """Not only the same status and body: the same headers too (nothing, not even a length,
    tells a run of another tenant from an id that names none)."""
    theirs = await served.start_run("acme")
    fake = "r-" + "0" * (len(theirs.run_id) - 2)
    for (method, path, body), (_, fake_path, _) in zip(
        run_paths(theirs.run_id), run_paths(fake), strict=True
    ):
        answers = []
        for p in (path, fake_path):
            r = await call(served, "bob", method, p, body)
            headers = sorted((k, v) for k, v in r.headers.items() if k != "date")
            answers.append((r.status_code, headers, r.content))
        assert answers[0] == answers[1], (method, path, answers)
        assert answers[0][0] == 404
    await unchanged(served, theirs)


async def test_another_tenants_run_is_looked_up_as_long_as_no_run(served: Served) -> None:
    """The same bytes, after the same work: a run of this process was answered from memory
    (another tenant's: 404 at once) while an id that names none asked the store first, so a
    404 that came sooner told another tenant the run exists. Counted as lookups, not timed."""
    store = served.runtime.store
    asked: list[str] = []
    load_run = store.load_run

    async def counted(run_id: str) -> dict[str, Any] | None:
        asked.append(run_id)
        return await load_run(run_id)

    store.load_run = counted  # type: ignore[method-assign]  # the same store, counted
    theirs = await served.start_run("acme")
    fake = "r-" + "0" * (len(theirs.run_id) - 2)
    for suffix in ("", "/tree", "/trace", "/steering"):
        lookups = []
        for run_id in (theirs.run_id, fake):
            asked.clear()
            problem(await call(served, "bob", "GET", f"{BASE}/runs/{run_id}{suffix}", None), 404)
            lookups.append(len(asked))
        assert lookups[0] == lookups[1] > 0, (suffix, lookups)


async def test_a_run_outside_a_narrowed_token_is_looked_up_as_long_as_no_run(
    served: Served,
) -> None:
    """A token narrowed to one run (an attenuation) was answered 404 for a run of its tenant
    outside that subtree as soon as it was found in this process's memory, while an id that
    names no run asked the store first and, for a command, looked again for the listing wait:
    the time told the token which runs of its tenant exist. Counted as lookups, not timed."""
    store = served.runtime.store
    asked: list[str] = []
    load_run = store.load_run

    async def counted(run_id: str) -> dict[str, Any] | None:
        asked.append(run_id)
        return await load_run(run_id)

    store.load_run = counted  # type: ignore[method-assign]  # the same store, counted
    root = await served.start_run("acme", name="root")
    child = await served.start_run("acme", parent=root, name="child")
    sibling = await served.start_run("acme", parent=root, name="sibling")
    narrowed = served.auth.attenuate(served.tokens["alice"], run_id=child.run_id)
    fake = "r-" + "0" * (len(sibling.run_id) - 2)
    for method, suffix in (("GET", ""), ("GET", "/steering"), ("POST", "/pause")):
        lookups = []
        for run_id in (sibling.run_id, fake):
            asked.clear()
            r = await call(served, narrowed, method, f"{BASE}/runs/{run_id}{suffix}", None)
            assert problem(r, 404)["message"] == "run not found"
            lookups.append(asked.count(run_id))
        if method == "GET":
            assert lookups[0] == lookups[1] > 0, (suffix, lookups)
        else:  # looked for again until the listing wait ends (how often: the clock's say)
            assert lookups[0] > 1 and lookups[1] > 1, (suffix, lookups)
    await unchanged(served, sibling)


async def test_nul_in_command_text_is_kept_over_postgres(pg_served: Served) -> None:
    """PostgreSQL refuses NUL in text columns: a command whose text holds one is still
    accepted, applied and shown in the audit trail as sent (nothing lost on the way)."""
    s = pg_served
    run = await s.start_run("acme")
    base = f"{BASE}/runs/{run.run_id}"
    for path, body in (
        (f"{base}/commands", {"kind": "add_instruction", "payload": {"text": "a\x00b"}}),
        (f"{base}/steer", {"message": "c\x00d"}),
        (f"{base}/pause", {"reason": "e\x00f"}),
    ):
        r = await call(s, "alice", "POST", path, body)
        assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
        # one at a time: an instruction still waiting for a model step when the pause
        # lands is applied only after a resume
        await eventually(lambda: s.runtime.open_commands() == [])
    history = (await call(s, "alice", "GET", f"{base}/steering")).json()
    texts = [next(iter(c["payload_summary"].values())) for c in history]
    assert texts == ["a\x00b", "c\x00d", "e\x00f"], history
    assert all(c["events"][-1]["type"] == "steering.applied" for c in history), history

    async def paused_in_the_log() -> bool:
        path = f"{BASE}/events?run_id={run.run_id}&follow=false"
        r = await call(s, "alice", "GET", path)
        assert r.status_code == 200, r.text
        return "event: run.paused" in r.text

    await eventually(paused_in_the_log)


# --------------------------------------------------------------------------- a second probe


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("runs?root_run_id=", "root_run_id"),
        ("events?run_id=&follow=false", "run_id"),
        ("events?root_run_id=&follow=false", "root_run_id"),
    ],
)
async def test_a_blank_id_in_the_query_is_a_422_naming_it(
    served: Served, path: str, name: str
) -> None:
    """``?run_id=`` (blank) was looked up as an id and answered 404 "run not found", where
    every other id that breaks the rule in the query is a 422 naming the parameter."""
    await served.start_run("acme")
    body = problem(await call(served, "alice", "GET", f"{BASE}/{path}"), 422)
    assert [e["loc"] for e in body["detail"]] == [["query", name]], body
    assert body["message"].startswith(f"query.{name}: "), body


@pytest.mark.parametrize(
    "value", ["yes", "no", "on", "off", "1", "0", "t", "f", "y", "n", "", "true ", "tRuE1"]
)
async def test_a_boolean_in_the_query_is_true_or_false_only(served: Served, value: str) -> None:
    """``?follow=`` took pydantic's loose booleans (``yes``, ``on``, ``1``, ``t``...), which
    a proxy, a log or another framework may read otherwise (or not at all)."""
    r = await call(served, "alice", "GET", f"{BASE}/events?follow={value}")
    body = problem(r, 422)
    assert [e["loc"] for e in body["detail"]] == [["query", "follow"]], body
    assert "true or false" in body["message"], body


@pytest.mark.parametrize("value", ["false", "False", "FALSE"])
async def test_false_in_any_letter_case_ends_the_stream_after_the_backlog(
    served: Served, value: str
) -> None:
    r = await call(served, "alice", "GET", f"{BASE}/events?follow={value}")
    assert r.status_code == 200, r.text  # (it ended: ``follow=true`` would never return)
    assert "event: stream" in r.text, r.text[:200]


async def _send_headers(served: Served, head: str) -> tuple[bytes, asyncio.StreamWriter]:
    """Send ``head`` (a request's line and headers) on a raw connection and read what the
    server answers before any body is sent: (the answer, the writer to close)."""
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head.encode("latin-1"))
    await writer.drain()
    async with asyncio.timeout(60):
        answer = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", answer)
        if length is not None:
            answer += await reader.readexactly(int(length.group(1)))
    return answer, writer


@pytest.mark.parametrize("token", [None, "forged", "Basic abc"])
async def test_a_post_expecting_100_continue_without_a_valid_token_is_a_401_before_its_body(
    served: Served, token: str | None
) -> None:
    """A client that sends ``Expect: 100-continue`` waits for the go-ahead before sending its
    body (curl does for bodies past 1 KiB): without a valid token it was told to go on, sent
    up to 4 MiB, and only then was answered 401. The token is asked first: the 401 comes
    instead of ``100 Continue``."""
    run = await served.start_run("acme")
    authorization = ""
    if token == "forged":
        forged = Auth(Auth.generate_key()).mint(user="eve", tenant="acme", rights=["iam:admin"])
        authorization = f"Authorization: Bearer {forged}\r\n"
    elif token is not None:
        authorization = f"Authorization: {token}\r\n"
    head = (
        f"POST {BASE}/runs/{run.run_id}/steer HTTP/1.1\r\nHost: {served.url[7:]}\r\n"
        f"{authorization}Content-Type: application/json\r\nContent-Length: 3000000\r\n"
        "Expect: 100-continue\r\n\r\n"
    )
    answer, writer = await _send_headers(served, head)
    writer.close()
    await writer.wait_closed()
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:300]
    assert b"100 Continue" not in answer, answer[:300]
    await unchanged(served, run)


async def test_a_post_expecting_100_continue_with_a_valid_token_goes_on(served: Served) -> None:
    run = await served.start_run("acme")
    body = b'{"message": "hi"}'
    head = (
        f"POST {BASE}/runs/{run.run_id}/steer HTTP/1.1\r\nHost: {served.url[7:]}\r\n"
        f"Authorization: Bearer {served.tokens['alice']}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
    )
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head.encode())
    await writer.drain()
    async with asyncio.timeout(60):
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 100 ")
        writer.write(body)
        await writer.drain()
        answer = await reader.read()
    writer.close()
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    assert b'"accepted"' in answer, answer


@pytest.mark.parametrize("token", [None, "forged"])
async def test_a_chunked_post_expecting_100_continue_without_a_valid_token_is_a_401_first(
    served: Served, token: str | None
) -> None:
    """A chunked body says no length, so the body limit cannot judge it before it comes; the
    token can: the 401 comes instead of ``100 Continue`` (the go-ahead was sent as soon as the
    limit began reading the body, before any endpoint asked for the token)."""
    run = await served.start_run("acme")
    authorization = ""
    if token == "forged":
        forged = Auth(Auth.generate_key()).mint(user="eve", tenant="acme", rights=["iam:admin"])
        authorization = f"Authorization: Bearer {forged}\r\n"
    head = (
        f"POST {BASE}/runs/{run.run_id}/steer HTTP/1.1\r\nHost: {served.url[7:]}\r\n"
        f"{authorization}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
        "Expect: 100-continue\r\n\r\n"
    )
    answer, writer = await _send_headers(served, head)
    writer.close()
    await writer.wait_closed()
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:300]
    assert b"100 Continue" not in answer, answer[:300]
    await unchanged(served, run)


async def test_a_post_expecting_100_continue_whose_length_is_past_the_limit_is_a_413_first(
    served: Served,
) -> None:
    run = await served.start_run("acme")
    head = (
        f"POST {BASE}/runs/{run.run_id}/steer HTTP/1.1\r\nHost: {served.url[7:]}\r\n"
        f"Authorization: Bearer {served.tokens['alice']}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {4 * 2**20 + 1}\r\nExpect: 100-continue\r\n\r\n"
    )
    answer, writer = await _send_headers(served, head)
    writer.close()
    await writer.wait_closed()
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:300]
    assert b"100 Continue" not in answer and b"4194304" in answer, answer[:300]
    await unchanged(served, run)


async def test_a_chunked_post_expecting_100_continue_is_cut_at_the_limit_with_a_413(
    served: Served,
) -> None:
    """With a valid token the chunked body is asked for (``100 Continue``) and read up to the
    limit: the 413 comes while the client is still sending, not after the whole body."""
    run = await served.start_run("acme")
    head = (
        f"POST {BASE}/runs/{run.run_id}/steer HTTP/1.1\r\nHost: {served.url[7:]}\r\n"
        f"Authorization: Bearer {served.tokens['alice']}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
    )
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head.encode())
    await writer.drain()
    chunk = b"z" * 65536
    sent = 0
    async with asyncio.timeout(60):
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 100 ")
        answered = asyncio.ensure_future(reader.readuntil(b"\r\n\r\n"))
        # far past the limit (4 MiB): the client stops once the answer came
        while not answered.done() and sent < 64 * 2**20:
            try:
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
            except ConnectionError:
                break
            sent += len(chunk)
            await asyncio.sleep(0)
        answer = await answered
    writer.close()
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:300]
    assert sent < 64 * 2**20  # answered before the whole body was sent
    await unchanged(served, run)


@pytest.mark.parametrize("charset", ["iso-8859-1", "windows-1252", '"latin1"'])
async def test_a_body_in_a_declared_charset_other_than_utf8_is_told_only_utf8_is_read(
    served: Served, charset: str
) -> None:
    """A body declared (and sent) in ISO-8859-1 got the generic "it is not UTF-8 text": the
    400 now names the charset it declared and says JSON is read as UTF-8 only (RFC 8259).
    Such a declaration on a body that is UTF-8 (ASCII, say) changes nothing: it is read."""
    run = await served.start_run("acme")
    path = f"{BASE}/runs/{run.run_id}/steer"
    headers = {"content-type": f"application/json; charset={charset}"}
    content = '{"message": "café"}'.encode("latin-1")
    body = problem(await raw(served, "alice", "POST", path, content=content, headers=headers), 400)
    assert charset.strip('"') in body["message"] and "UTF-8 only" in body["message"], body
    assert "RFC 8259" in body["message"], body
    await unchanged(served, run)
    r = await raw(served, "alice", "POST", path, content=b'{"message": "hi"}', headers=headers)
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text


@pytest.mark.parametrize("user", ["ev\x1b[31me", "u\x00", "a\nb", "x" * 300])
async def test_a_token_whose_user_breaks_the_id_rule_is_a_401_saying_so(
    served: Served, user: str
) -> None:
    """``token mint`` refuses a user with a control character (it is the actor id of the
    token's commands, shown in terminals and logs); one minted before that was still taken."""
    from biscuit_auth import BiscuitBuilder

    with pytest.raises(ConfigurationError, match="user"):
        served.auth.mint(user=user, tenant="acme", rights=["agent:control"])
    builder = BiscuitBuilder(
        'user({u}); tenant("acme"); right("agent:observe"); right("agent:control");', {"u": user}
    )
    token = builder.build(served.auth._keypair.private_key).to_base64()
    run = await served.start_run("acme")
    for method, path, sent in run_paths(run.run_id):
        r = await raw(served, token, method, path, json=sent)
        message = problem(r, 401)["message"]
        assert "user" in message and "mint another token" in message, message
    await unchanged(served, run)


@pytest.mark.parametrize("sep", ["\u2028", "\u2029"])
async def test_an_id_holding_a_line_or_paragraph_separator_is_no_run_s(
    served: Served, sep: str
) -> None:
    """The id rule refuses U+2028 and U+2029 as it refuses a newline (a run cannot be given
    such an id): in the path it is the unknown run's 404, in the query the 422 of an id that
    breaks the rule."""
    from urllib.parse import quote

    from tinyagents.errors import InvalidIdError

    with pytest.raises(InvalidIdError, match="paragraph separator"):
        await served.runtime.start(busy_agent("x"), "work", run_id=f"r{sep}1", tenant_id="acme")
    unknown = await raw(served, "alice", "GET", f"{BASE}/runs/r-none")
    r = await raw(served, "alice", "GET", f"{BASE}/runs/{quote(f'r{sep}1')}")
    assert unknown.status_code == 404 and (r.status_code, r.json()) == (404, unknown.json())
    r = await raw(served, "alice", "GET", f"{BASE}/runs", params={"root_run_id": f"r{sep}1"})
    assert problem(r, 422)["type"] == "invalid_request"
