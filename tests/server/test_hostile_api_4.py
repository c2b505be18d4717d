"""A hostile user's fourth round at the operator API, over real HTTP: query parameters the
API does not take, and ids stored before the id rule refused bidi and zero-width characters.
(The library's probes of this round are in ``tests/test_hostile_probes_4.py``.)"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from operator_server import BASE, Served
from test_api import unchanged

from tinyagents.store import SqliteStore, Store

JSON = {"content-type": "application/json"}


def snap(run_id: str, *, tenant: str = "acme", at: int = 0) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "root_run_id": run_id,
        "parent_run_id": None,
        "tenant_id": tenant,
        "status": "completed",
        "kind": "agent",
        "created_at": f"2026-01-01T00:00:{at:02d}+00:00",
    }


def _store(served: Served) -> Store:
    store = served.runtime.store
    assert isinstance(store, SqliteStore)
    return store


# -- unknown query parameters ---------------------------------------------------------------

#: Every GET of the API that reads a query, with a typo of one of its parameters.
TYPOS = [
    ("/runs", "limt=5"),
    ("/runs", "stauts=running"),
    ("/runs/{run}", "verbose=true"),
    ("/runs/{run}/tree", "limt=5"),
    ("/runs/{run}/trace", "befor=3"),
    ("/runs/{run}/steering", "limt=1"),
]


@pytest.mark.parametrize(("path", "query"), TYPOS)
async def test_an_unknown_query_parameter_is_a_422_naming_it(
    served: Served, path: str, query: str
) -> None:
    """Found: ``GET /runs?limt=5`` answered the default page, as if no limit was asked for:
    a typo'd filter (``?stauts=running``) answered every run, and a script acting on that
    answer acts on runs it never meant. Now a 422 ``invalid_request`` naming the parameter
    and the ones the endpoint takes."""
    run = await served.start_run("acme", think_s=5.0)
    url = f"{BASE}{path.format(run=run.run_id)}?{query}"
    r = await served.client.get(url, headers=served.as_("alice"))
    assert r.status_code == 422, (url, r.status_code, r.text)
    body = r.json()
    name = query.split("=")[0]
    assert body["type"] == "invalid_request", body
    assert name in body["message"] and "unknown" in body["message"], body
    assert body["detail"][0]["loc"] == ["query", name], body


async def test_an_unknown_query_parameter_of_a_command_is_refused_and_nothing_is_sent(
    served: Served,
) -> None:
    """A command whose URL holds a parameter the endpoint does not take (``?dry_run=true``,
    which a caller may believe makes it a rehearsal) is refused, not sent."""
    run = await served.start_run("acme", think_s=5.0)
    for path, body in (
        ("steer", b'{"message": "stop"}'),
        ("commands", b'{"kind": "pause"}'),
    ):
        r = await served.client.post(
            f"{BASE}/runs/{run.run_id}/{path}?dry_run=true",
            content=body,
            headers={**served.as_("alice"), **JSON},
        )
        assert r.status_code == 422, r.text
        assert "dry_run" in r.json()["message"], r.text
    await unchanged(served, run)


async def test_an_unknown_query_parameter_is_told_only_after_the_token(served: Served) -> None:
    """A caller without a token learns nothing of the endpoint's parameters: a 401 first."""
    r = await served.client.get(f"{BASE}/runs?limt=5")
    assert r.status_code == 401, r.text


async def test_the_parameters_an_endpoint_takes_are_still_taken(served: Served) -> None:
    run = await served.start_run("acme", think_s=5.0)
    for url in (
        f"{BASE}/runs?limit=5&status=running&root_run_id={run.run_id}",
        f"{BASE}/runs/{run.run_id}/trace?limit=2",
        f"{BASE}/runs/{run.run_id}/steering?limit=2",
    ):
        r = await served.client.get(url, headers=served.as_("alice"))
        assert r.status_code == 200, (url, r.text)


async def test_the_event_stream_refuses_an_unknown_parameter(served: Served) -> None:
    """``/events?run=r-1`` (for ``?run_id=``) streamed every run of the tenant."""
    r = await served.client.get(f"{BASE}/events?run=r-1", headers=served.as_("alice"))
    assert r.status_code == 422, r.text
    assert "'run'" in r.json()["message"], r.text


# -- ids stored before the rule refused bidi and zero-width characters ---------------------


@pytest.mark.parametrize("char", ["\u202e", "\u200b", "\ufeff", "\u2066"])
async def test_a_run_stored_with_a_spoofing_id_is_listed_read_and_refused_commands(
    served: Served, char: str
) -> None:
    """A run whose id holds U+202E or a zero-width space, saved before the rule refused them,
    is listed and read (its id JSON-escaped only as JSON escapes it); a command to it is a
    422 naming the character, never a 500, and nothing is stored for it."""
    legacy = f"run{char}-1"
    await _store(served).save_runs([snap(legacy)])
    listed = await served.client.get(f"{BASE}/runs", headers=served.as_("alice"))
    assert listed.status_code == 200, listed.text
    assert legacy in [r["run_id"] for r in listed.json()]
    path = f"{BASE}/runs/{quote(legacy, safe='')}"
    read = await served.client.get(path, headers=served.as_("alice"))
    assert read.status_code == 200 and read.json()["run_id"] == legacy, read.text
    filtered = await served.client.get(
        f"{BASE}/runs", params={"root_run_id": legacy}, headers=served.as_("alice")
    )
    assert [r["run_id"] for r in filtered.json()] == [legacy], filtered.text
    sent = await served.client.post(
        f"{path}/commands", content=b'{"kind": "pause"}', headers={**served.as_("alice"), **JSON}
    )
    assert sent.status_code == 422, sent.text
    assert f"U+{ord(char):04X}" in sent.json()["message"], sent.text
    steering = await served.client.get(f"{path}/steering", headers=served.as_("alice"))
    assert steering.status_code == 200 and steering.json() == [], steering.text


# -- NaN and infinities in a body -----------------------------------------------------------


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
async def test_a_body_with_nan_or_an_infinity_is_refused_naming_it_and_nothing_is_sent(
    served: Served, constant: str
) -> None:
    """Probed, held: the body reader takes ``NaN`` and ``Infinity`` (Python's ``json`` reads
    them), and each place they land refuses them with a 422 saying so (a payload's value "is
    not a finite number", a priority is one of four numbers or a name): none reaches the
    steering log, which the API's own JSON (``allow_nan=False``) could not write back."""
    run = await served.start_run("acme", think_s=5.0)
    for path, body in (
        ("commands", f'{{"kind": "update_state", "payload": {{"values": {{"x": {constant}}}}}}}'),
        ("commands", f'{{"kind": "provide_context", "payload": {{"text": "t", "x": {constant}}}}}'),
        ("commands", f'{{"kind": "pause", "priority": {constant}}}'),
        ("steer", f'{{"message": "go", "priority": {constant}}}'),
    ):
        r = await served.client.post(
            f"{BASE}/runs/{run.run_id}/{path}",
            content=body.encode(),
            headers={**served.as_("alice"), **JSON},
        )
        assert r.status_code == 422, (body, r.status_code, r.text)
        assert r.json()["type"] == "invalid_request", r.text
        said = r.json()["message"].lower()
        assert constant.lstrip("-")[:3].lower() in said or "priority" in said, said
    await unchanged(served, run)


async def test_a_page_ending_at_a_run_with_a_spoofing_id_links_to_the_next(
    served: Served,
) -> None:
    """The next page's cursor holds the last run's id: one stored with U+202E (before the
    rule refused it) still makes a cursor the API takes back."""
    store = _store(served)
    await store.save_runs([snap("older", at=1), snap("run\u202e-1", at=2)])
    first = await served.client.get(f"{BASE}/runs?limit=1", headers=served.as_("alice"))
    assert [r["run_id"] for r in first.json()] == ["run\u202e-1"], first.text
    link = first.headers["link"].split(">")[0].lstrip("<")
    second = await served.client.get(link, headers=served.as_("alice"))
    assert second.status_code == 200, second.text
    assert "older" in [r["run_id"] for r in second.json()], second.text
