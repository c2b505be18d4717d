"""A hostile user's tenth round at the operator API, over real HTTP: digits that are not
ASCII, bodies in another encoding, one correlation id sent by two tenants or to three
endpoints at once, one ticket spent five times at once, odd Authorization forms, odd
percent-encoded path ids, and a forgotten run (found: one without a thread was lost)."""

from __future__ import annotations

import asyncio
from typing import TypedDict

import httpx
import pytest
from operator_server import BASE, IDLE_S, Served, eventually
from test_api import unchanged

from tinyagents.graph import END, START, StateGraph

JSON = {"content-type": "application/json"}


async def _post(served: Served, path: str, body: bytes, who: str = "alice") -> httpx.Response:
    return await served.client.post(
        f"{BASE}{path}", content=body, headers={**served.as_(who), **JSON}
    )


@pytest.mark.parametrize("value", ["\u0661\u0660", "\uff15", "\u0e51", "\u00b2", "5\u200b"])
@pytest.mark.parametrize("param", ["limit", "last_event_id"])
async def test_a_number_in_digits_that_are_not_ascii_is_a_422(
    served: Served, param: str, value: str
) -> None:
    """Held: ``int()`` reads Arabic-Indic, fullwidth and Thai digits (``int("\\u0661\\u0660") == 10``),
    and a superscript or a zero-width space after a digit are one more way to smuggle a
    number past a reader that checks ASCII: ``?limit=`` and ``?last_event_id=`` take ASCII
    digits only, anything else a 422 ``invalid_request``."""
    run = await served.start_run("acme", think_s=IDLE_S)
    path = "/events" if param == "last_event_id" else "/runs"
    extra = {"follow": "false"} if param == "last_event_id" else {}
    r = await served.client.get(
        f"{BASE}{path}", params={param: value, **extra}, headers=served.as_("alice")
    )
    assert r.status_code == 422, (r.status_code, r.text[:300])
    assert r.json()["type"] == "invalid_request", r.text[:300]
    await unchanged(served, run)


@pytest.mark.parametrize("value", ["\u0661\u0660", "\uff15"])
async def test_trace_before_in_digits_that_are_not_ascii_is_a_422(
    served: Served, value: str
) -> None:
    """Held: as ``?limit=``, the trace's ``?before=``."""
    run = await served.start_run("acme", think_s=IDLE_S)
    r = await served.client.get(
        f"{BASE}/runs/{run.run_id}/trace", params={"before": value}, headers=served.as_("alice")
    )
    assert r.status_code == 422, (r.status_code, r.text[:300])


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
async def test_a_body_in_another_encoding_without_a_charset_is_a_400(
    served: Served, encoding: str
) -> None:
    """Held: ``json.loads`` of bytes guesses UTF-16 and UTF-32 from their zero bytes; the
    server reads UTF-8 only (a BOM before it is taken, RFC 8259 section 8.1), so a
    body in another encoding is a 400, not a command."""
    run = await served.start_run("acme", think_s=IDLE_S)
    r = await _post(served, f"/runs/{run.run_id}/commands", '{"kind":"pause"}'.encode(encoding))
    assert r.status_code == 400, (r.status_code, r.text[:300])
    await unchanged(served, run)


async def test_one_correlation_id_of_two_tenants_is_two_commands(served: Served) -> None:
    """Held: a correlation id is a tenant's own: globex sending acme's id at the same moment
    is neither told ``duplicate`` (which would tell it acme's id is in use) nor lost."""
    mine = await served.start_run("acme", think_s=IDLE_S)
    theirs = await served.start_run("globex", think_s=IDLE_S)
    body = b'{"kind":"add_instruction","payload":{"text":"hi"},"correlation_id":"same-1"}'
    a, b = await asyncio.gather(
        _post(served, f"/runs/{mine.run_id}/commands", body, "alice"),
        _post(served, f"/runs/{theirs.run_id}/commands", body, "bob"),
    )
    assert [a.json()["status"], b.json()["status"]] == ["accepted", "accepted"], (a.text, b.text)


async def test_one_correlation_id_on_steer_and_commands_at_once_is_one_command(
    served: Served,
) -> None:
    """Held: one correlation id sent at once to ``/steer``, ``/commands`` and ``/pause``
    (three connections, three kinds) is one command: one ``accepted``, two ``duplicate``."""
    run = await served.start_run("acme", think_s=IDLE_S)
    answers = await asyncio.gather(
        _post(served, f"/runs/{run.run_id}/steer", b'{"message":"hi","correlation_id":"c-2"}'),
        _post(served, f"/runs/{run.run_id}/commands", b'{"kind":"pause","correlation_id":"c-2"}'),
        _post(served, f"/runs/{run.run_id}/pause", b'{"correlation_id":"c-2"}'),
    )
    statuses = sorted(r.json()["status"] for r in answers)
    assert statuses.count("accepted") == 1 and statuses.count("duplicate") == 2, statuses
    accepted = [
        e for e in served.runtime.steering_history(run.run_id) if e.type == "steering.accepted"
    ]
    assert len(accepted) == 1


async def test_one_ticket_spent_five_times_at_once_opens_one_stream(served: Served) -> None:
    """Held: an event-stream ticket is single-use even when five connections spend it in
    the same moment: one stream, four typed 401s."""
    run = await served.start_run("acme", think_s=IDLE_S)
    r = await served.client.post(
        f"{BASE}/events/tickets",
        json={"run_id": run.run_id},
        headers={**served.as_("alice"), **JSON},
    )
    ticket = r.json()["ticket"]
    answers = await asyncio.gather(
        *(
            served.client.get(
                f"{BASE}/events",
                params={"ticket": ticket, "run_id": run.run_id, "follow": "false"},
            )
            for _ in range(5)
        )
    )
    assert sorted(a.status_code for a in answers) == [200, 401, 401, 401, 401], [
        a.text[:200] for a in answers
    ]


#: RFC 9110 section 11: the scheme is case-insensitive and one or more spaces (no tab) follow it.
AUTHORIZATIONS = [
    ("bearer {t}", 200),
    ("BEARER {t}", 200),
    ("Bearer  {t}", 200),
    ("Bearer {t} extra", 401),
    ("Bearer", 401),
    ("Basic {t}", 401),
    ("Token {t}", 401),
    ("Bearer\t{t}", 401),
    ("Bearer {t},Bearer {t}", 401),
]


@pytest.mark.parametrize(("value", "status"), AUTHORIZATIONS)
async def test_an_authorization_of_an_odd_form_is_taken_as_rfc_9110_says_or_a_json_401(
    served: Served, value: str, status: int
) -> None:
    """Held: the scheme in any letter case and more than one space before the token are
    taken; another scheme, a tab, a missing token, a token with more after it or two
    credentials in one header are a typed 401, never a 500."""
    token = served.mint("x", tenant="acme", rights="agent:observe")
    r = await served.client.get(f"{BASE}/runs", headers={"authorization": value.format(t=token)})
    assert r.status_code == status, (r.status_code, r.text[:300])
    if status == 401:
        assert r.json()["type"] == "unauthorized", r.text


@pytest.mark.parametrize(
    "seg", ["%00", "%2F", "%F0%9F%98%80", "%FF", "%C0%80", "%ED%A0%80", "..%2F..", "%25"]
)
async def test_a_path_id_of_odd_percent_encodings_is_a_typed_404_or_422(
    served: Served, seg: str
) -> None:
    """Held: a NUL, a slash, an emoji, bytes that are not UTF-8 (``%FF``, an overlong NUL,
    a surrogate's bytes), a climb and a ``%`` as a run or task id: a typed 404 or 422 on
    reads and commands, never a 500, and nothing sent."""
    run = await served.start_run("acme", think_s=IDLE_S)
    for path in (
        f"/runs/{seg}",
        f"/runs/{seg}/steering",
        f"/runs/{run.run_id}/tasks/{seg}/commands",
    ):
        method = "POST" if path.endswith("commands") else "GET"
        r = await served.client.request(
            method,
            f"{BASE}{path}",
            content=b'{"kind":"approve"}',
            headers={**served.as_("alice"), **JSON},
        )
        assert r.status_code in (404, 422), (path, r.status_code, r.text[:300])
        assert r.json()["type"], r.text
    for path in (f"/runs/{seg}/pause", f"/runs/{seg}/steer"):
        r = await served.client.post(
            f"{BASE}{path}", content=b'{"message":"x"}', headers={**served.as_("alice"), **JSON}
        )
        assert r.status_code in (404, 422), (path, r.status_code, r.text[:300])
    await unchanged(served, run)


class Box(TypedDict, total=False):
    n: int


def once(state: Box) -> Box:
    return {"n": state.get("n", 0) + 1}


@pytest.mark.parametrize("thread_id", ["t-forgotten", None], ids=["thread", "no-thread"])
async def test_a_finished_then_forgotten_run_is_read_from_the_store_and_refuses_commands(
    served: Served, thread_id: str | None
) -> None:
    """Found: a graph run started without a thread and without a checkpointer (it saves
    nothing, so it has no thread: ``thread_id`` ``""``) could not be saved on a durable
    runtime once the store checked a snapshot's ids: ``thread_id is blank; nothing was
    saved``. Released (``Runtime.forget``), it was gone: every read and command a 404
    ``run not found``, and the runtime's close raised ``ArgumentError``. Now it is saved
    as any run; with a thread or without, a released run reads from the store, a command
    to it is ``rejected`` (target finished), a correlation id it took before is
    ``duplicate``, and nothing is left open."""
    graph = StateGraph(Box).add_node("once", once).add_edge(START, "once").add_edge("once", END)
    run = await served.runtime.start_graph(
        graph.compile(), {"n": 0}, thread_id=thread_id, tenant_id="acme"
    )
    await run.result()
    first = await _post(
        served, f"/runs/{run.run_id}/commands", b'{"kind":"pause","correlation_id":"f-1"}'
    )
    assert first.json()["status"] == "accepted", first.text
    await eventually(lambda: served.runtime.open_commands() == [])
    served.runtime.forget(run.run_id)
    await served.runtime.flush()
    again = await _post(
        served, f"/runs/{run.run_id}/commands", b'{"kind":"pause","correlation_id":"f-1"}'
    )
    assert again.status_code == 200 and again.json()["status"] == "duplicate", again.text
    for path, body in (
        ("commands", b'{"kind":"pause","correlation_id":"f-2"}'),
        ("steer", b'{"message":"hi"}'),
        ("pause", b"{}"),
        ("abort", b"{}"),
        ("tasks/t-1/commands", b'{"kind":"approve"}'),
    ):
        r = await _post(served, f"/runs/{run.run_id}/{path}", body)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        assert r.json()["status"] == "rejected", r.text
        assert "target finished" in r.json()["reason"], r.text
    for path in ("", "/steering", "/trace", "/tree"):
        r = await served.client.get(f"{BASE}/runs/{run.run_id}{path}", headers=served.as_("alice"))
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
    r = await served.client.get(f"{BASE}/runs/{run.run_id}", headers=served.as_("alice"))
    assert r.json()["status"] == "completed", r.text[:300]
    assert served.runtime.open_commands() == []


TICKET_BODIES = [
    (b"[" * 200_000, 400),
    (b'{"run_id": "r-1", "run_id": "r-2"}', 400),
    (b'{"run_id": "\\ud800"}', 422),
    (b'{"run_id": NaN}', 422),
    (b'{"run_id": ' + b"9" * 5000 + b"}", 400),
    (b'{"run_id": "r-1", "extra": 1}', 422),
    (b'{"root_run_id": {"a": ' + b"[" * 3000 + b"]" * 3000 + b"}}", 400),
]


@pytest.mark.usefixtures("default_recursion_limit")
@pytest.mark.parametrize(("body", "status"), TICKET_BODIES, ids=range(len(TICKET_BODIES)))
async def test_a_ticket_asked_for_with_a_hostile_body_is_a_typed_4xx(
    served: Served, body: bytes, status: int
) -> None:
    """Held: ``POST /events/tickets`` reads its body as the command endpoints do: JSON
    nested past the reader, a key given twice or an integer of 5,000 digits a 400
    ``malformed_request``; a lone surrogate, NaN or an unknown field a 422; no ticket."""
    r = await _post(served, "/events/tickets", body)
    assert r.status_code == status, (r.status_code, r.text[:300])
    kind = "malformed_request" if status == 400 else "invalid_request"
    assert r.json()["type"] == kind and "ticket" not in r.json(), r.text[:300]


async def test_another_tenants_correlation_id_on_its_run_is_a_404_not_duplicate(
    served: Served,
) -> None:
    """Held: globex resending acme's command (its correlation id) to acme's run learns
    nothing: the 404 of a run it cannot see, not ``duplicate``."""
    mine = await served.start_run("acme", think_s=IDLE_S)
    body = b'{"kind":"pause","correlation_id":"acme-secret"}'
    first = await _post(served, f"/runs/{mine.run_id}/commands", body)
    assert first.json()["status"] == "accepted", first.text
    r = await _post(served, f"/runs/{mine.run_id}/commands", body, "bob")
    assert r.status_code == 404 and r.json()["type"] == "not_found", r.text
    assert "acme-secret" not in r.text and "duplicate" not in r.text, r.text


@pytest.mark.parametrize("header", ["Last-Event-ID", "Authorization"])
async def test_a_header_of_bytes_that_are_not_ascii_is_a_typed_4xx(
    served: Served, header: str
) -> None:
    """Held: a ``Last-Event-ID`` or ``Authorization`` of Latin-1 bytes (``\\xff\\xfe1``)
    is a 422 naming the header or a 401 saying the scheme, never a 500."""
    headers = {**served.as_("alice")} if header != "Authorization" else {}
    r = await served.client.get(
        f"{BASE}/events?follow=false",
        headers=[*headers.items(), (header.encode(), b"\xff\xfe1")],
    )
    status = 401 if header == "Authorization" else 422
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.json()["type"] == ("unauthorized" if status == 401 else "invalid_request"), r.text
