"""A hostile user's fifth round at the operator API, over real HTTP: the correlation id
against the id rule, and bodies, numbers, keys, media types, pages and concurrent retries
that must each get a typed answer, never a 500 or a hang. (The library's probes of this
round are in ``tests/test_hostile_probes_5.py``.)"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

import pytest
from operator_server import BASE, IDLE_S, Served, busy_agent, eventually
from test_api import unchanged

from tinyagents import Agent, RunLimits
from tinyagents.protocol.ids import ID_PATTERN

JSON = {"content-type": "application/json"}


async def _post(served: Served, path: str, body: bytes, **headers: str) -> Any:
    return await served.client.post(
        f"{BASE}{path}", content=body, headers={**served.as_("alice"), **JSON, **headers}
    )


# -- the correlation id keeps the id rule ----------------------------------------------------

BAD_CORRELATION_IDS = {
    "nfd": ("c-cafe\u0301", "NFC"),
    "soft-hyphen": ("c-\u00ad1", "U+00AD"),
    "override": ("c-\u202e1", "U+202E"),
    "escape": ("c-\x1b[2J", "control character"),
    "long": ("c" * 201, "at most 200"),
}


@pytest.mark.parametrize("name", BAD_CORRELATION_IDS)
async def test_a_correlation_id_breaking_the_id_rule_is_a_422_and_nothing_is_sent(
    served: Served, name: str
) -> None:
    """Found: the body's ``correlation_id`` was checked for NUL and 200 characters only, and
    the command's own rule (printable text) then took one not in NFC: ``c-cafe\\u0301`` and
    ``c-caf\\u00e9`` were two commands shown as one id. Now the body keeps the id rule, as
    every id does: a 422 ``invalid_request`` at ``["body", "correlation_id"]`` saying
    what breaks it, before anything reaches the run."""
    bad, says = BAD_CORRELATION_IDS[name]
    run = await served.start_run("acme", think_s=IDLE_S)
    for path, body in (
        ("commands", {"kind": "pause", "correlation_id": bad}),
        ("steer", {"message": "look", "correlation_id": bad}),
        ("pause", {"correlation_id": bad}),
    ):
        r = await _post(served, f"/runs/{run.run_id}/{path}", json.dumps(body).encode())
        assert r.status_code == 422, (path, r.status_code, r.text)
        answer = r.json()
        assert answer["type"] == "invalid_request", answer
        assert answer["detail"][0]["loc"] == ["body", "correlation_id"], answer
        assert says in answer["message"], answer
    await unchanged(served, run)


async def test_the_published_schema_says_the_correlation_id_rule(served: Served) -> None:
    """The OpenAPI document said only ``maxLength: 200`` of the correlation id: a client
    generated from it sent ids the server then refused."""
    doc = (await served.client.get(f"{BASE}/openapi.json")).json()
    field = doc["components"]["schemas"]["CommandBody"]["properties"]["correlation_id"]
    (text,) = [s for s in field["anyOf"] if s.get("type") == "string"]
    assert text == {"type": "string", "minLength": 1, "maxLength": 200, "pattern": ID_PATTERN}


# -- bodies and numbers a command cannot hold (guards: each held) ----------------------------

BODIES = {
    "nested-deep": (
        b'{"kind":"update_state","payload":{"update":' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
        400,
        "nested too deep",
    ),
    "nested-past-payload-depth": (
        b'{"kind":"update_state","payload":{"update":{"x":' + b"[" * 900 + b"]" * 900 + b"}}}",
        422,
        "levels deep",
    ),
    "float-overflow": (b'{"kind":"update_state","payload":{"update":{"x":1e400}}}', 422, "finite"),
    "nan": (b'{"kind":"update_state","payload":{"update":{"x":NaN}}}', 422, "finite"),
    "infinity-budget": (
        b'{"kind":"update_budget","payload":{"deadline_s":Infinity}}',
        422,
        "finite",
    ),
    "nan-budget": (b'{"kind":"update_budget","payload":{"deadline_s":NaN}}', 422, "finite"),
    "int-too-long": (
        b'{"kind":"update_state","payload":{"update":{"x":' + b"9" * 5000 + b"}}}",
        400,
        "more digits",
    ),
    "priority-too-long": (b'{"kind":"pause","priority":' + b"9" * 5000 + b"}", 400, "more digits"),
    "priority-inf": (b'{"kind":"pause","priority":1e400}', 422, "got inf"),
    "duplicate-key": (b'{"kind":"pause","kind":"cancel"}', 400, "given twice"),
    "duplicate-payload-key": (
        b'{"kind":"pause","payload":{"reason":"a","reason":"b"}}',
        400,
        "given twice",
    ),
    "not-an-object": (b'"pause"', 422, "dictionary"),
    "trailing-data": (b'{"kind":"pause"} x', 400, "Extra data"),
}


@pytest.mark.parametrize("name", BODIES)
async def test_a_body_no_command_can_hold_is_a_typed_4xx_and_nothing_is_sent(
    served: Served, name: str
) -> None:
    """Held: JSON nested 100,000 deep, NaN, infinities and 1e400 (in a payload, a budget or
    the priority), integers of 5,000 digits, a key given twice, a body that is no object:
    each a 400 ``malformed_request`` or a 422 ``invalid_request`` saying why, none a 500."""
    body, status, says = BODIES[name]
    run = await served.start_run("acme", think_s=IDLE_S)
    r = await _post(served, f"/runs/{run.run_id}/commands", body)
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert says in r.json()["message"], r.text[:300]
    await unchanged(served, run)


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
async def test_a_body_that_is_not_json_by_its_type_is_a_415(
    served: Served, content_type: str | None
) -> None:
    run = await served.start_run("acme", think_s=IDLE_S)
    headers = served.as_("alice") | ({"content-type": content_type} if content_type else {})
    r = await served.client.post(
        f"{BASE}/runs/{run.run_id}/commands", content=b'{"kind":"pause"}', headers=headers
    )
    assert r.status_code == 415, r.text
    assert r.json()["type"] == "unsupported_media_type", r.text
    await unchanged(served, run)


@pytest.mark.parametrize(
    ("path", "query", "says"),
    [
        ("/runs", "limit=-1", "greater than or equal to 1"),
        ("/runs", "limit=0", "greater than or equal to 1"),
        ("/runs", "limit=" + "9" * 40, "less than or equal to 1000"),
        ("/runs", "cursor=" + "x" * 10_000, "cursor"),
        ("/runs/{run}/trace", "before=-1", "greater than or equal to 1"),
        ("/runs/{run}/trace", "before=9223372036854775808", "less than or equal"),
        ("/runs/{run}/steering", "limit=" + "9" * 40, "less than or equal to 1000"),
        ("/runs/{run}/tree", "limit=-5", "greater than or equal to 1"),
    ],
)
async def test_a_page_asked_for_past_its_bounds_is_a_422(
    served: Served, path: str, query: str, says: str
) -> None:
    run = await served.start_run("acme", think_s=IDLE_S)
    r = await served.client.get(
        f"{BASE}{path.format(run=run.run_id)}?{query}", headers=served.as_("alice")
    )
    assert r.status_code == 422, (r.status_code, r.text[:300])
    assert says in r.json()["message"], r.text[:300]


async def test_a_next_link_of_a_run_id_no_header_can_carry_is_percent_encoded(
    served: Served,
) -> None:
    """Held: a run id of any printable text (a quote, a ``>``, an emoji) is never written
    into the ``Link`` header as it is: a header is ASCII, and ``<...>; rel=`` is its syntax."""
    run_id = 'r-"><x>; rel="evil"-\U0001f600'
    await served.runtime.start(busy_agent(think_s=IDLE_S), "w", run_id=run_id, tenant_id="acme")
    url = f"{BASE}/runs/{quote(run_id, safe='')}/trace?limit=1"
    for _ in range(2):  # events enough for a second page
        await _post(served, f"/runs/{quote(run_id, safe='')}/steer", b'{"message":"look"}')

    async def linked() -> str | None:
        r = await served.client.get(url, headers=served.as_("alice"))
        assert r.status_code == 200, r.text
        return r.headers.get("link")

    link = await eventually(linked)
    assert link.isascii() and link.count("<") == 1 and link.count(">") == 1, link
    assert 'rel="evil"' not in link and link.endswith('>; rel="next"'), link


# -- concurrent retries, budgets, long reasons ------------------------------------------------


async def test_twenty_simultaneous_sends_of_one_correlation_id_make_one_command(
    served: Served,
) -> None:
    """Held: one ``accepted``, nineteen ``duplicate``; one ``steering.accepted`` event, one
    terminal state; a later send of another kind under that id is ``duplicate`` too."""
    run = await served.start_run("acme", think_s=IDLE_S)
    body = b'{"kind":"add_instruction","payload":{"text":"hi"},"correlation_id":"dup-1"}'
    answers = await asyncio.gather(
        *[_post(served, f"/runs/{run.run_id}/commands", body) for _ in range(20)]
    )
    assert sorted(r.json()["status"] for r in answers) == ["accepted"] + ["duplicate"] * 19
    r = await _post(
        served, f"/runs/{run.run_id}/commands", b'{"kind":"pause","correlation_id":"dup-1"}'
    )
    assert r.json()["status"] == "duplicate", r.text
    accepted = [
        e for e in served.runtime.steering_history(run.run_id) if e.type == "steering.accepted"
    ]
    assert [e.correlation_id for e in accepted] == ["dup-1"]


async def test_a_budget_past_the_parents_is_refused_by_the_budget_policy(served: Served) -> None:
    """Held: a child's ``update_budget`` above what its parent has left (a count, a deadline
    of 1e308 s, a count of 40 digits) is a ``rejected`` receipt from ``budget`` naming the
    parent; the child's limits stay as they were."""
    model = busy_agent(think_s=IDLE_S).model
    parent = await served.runtime.start(
        Agent("p", model, limits=RunLimits(max_model_calls=10, deadline_s=100.0)),
        "w",
        tenant_id="acme",
    )
    child = await served.start_run("acme", parent=parent, think_s=IDLE_S)
    before = child.info.limits
    for payload in (
        b'{"max_model_calls":50}',
        b'{"deadline_s":1e308}',
        b'{"max_model_calls":' + b"9" * 40 + b"}",
    ):
        r = await _post(
            served,
            f"/runs/{child.run_id}/commands",
            b'{"kind":"update_budget","payload":' + payload + b"}",
        )
        assert r.status_code == 200, r.text
        receipt = r.json()
        assert receipt["status"] == "rejected" and receipt["policy_id"] == "budget", receipt
        assert parent.run_id in receipt["reason"], receipt
    assert child.info.limits == before


async def test_a_reason_too_long_is_refused_and_the_answer_does_not_echo_it(
    served: Served,
) -> None:
    """Held: a pause's ``reason`` of 100,000 characters is a 422 (at most 2,000), one in a
    command's payload a ``rejected`` receipt (``payload too large``); neither answer quotes
    the text back, and a body past 4 MiB is a 413."""
    run = await served.start_run("acme", think_s=IDLE_S)
    long = b"x" * 100_000
    r = await _post(served, f"/runs/{run.run_id}/pause", b'{"reason":"' + long + b'"}')
    assert r.status_code == 422 and len(r.content) < 5_000, (r.status_code, len(r.content))
    r = await _post(
        served,
        f"/runs/{run.run_id}/commands",
        b'{"kind":"pause","payload":{"reason":"' + long + b'"}}',
    )
    receipt = r.json()
    assert receipt["status"] == "rejected" and "too large" in receipt["reason"], receipt
    assert len(r.content) < 5_000
    r = await _post(served, f"/runs/{run.run_id}/steer", b'{"message":"' + b"x" * 5_000_000 + b'"}')
    assert r.status_code == 413, r.status_code
