"""Event-stream tickets over real HTTP: ``POST /events/tickets`` (the token in the header)
gives a short-lived ticket that opens one stream, once, so the long-lived token never sits in
a URL (access logs, browser history)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from operator_server import BASE, Served, eventually
from test_serve import serve
from test_sse import parse

from tinyagents.errors import StoreError
from tinyagents.server import Auth
from tinyagents.server.auth import ticket_claims


async def _ticket(served: Served, who: str, **stream: str) -> str:
    r = await served.client.post(f"{BASE}/events/tickets", json=stream, headers=served.as_(who))
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["expires_in"] == 60 and body["stream"] == {
        "run_id": stream.get("run_id"),
        "root_run_id": stream.get("root_run_id"),
    }
    assert served.tokens[who] not in body["ticket"]
    return str(body["ticket"])


async def test_a_ticket_opens_its_stream_once(served: Served) -> None:
    run = await served.start_run("acme")
    await served.client.post(
        f"{BASE}/runs/{run.run_id}/steer", json={"message": "hi"}, headers=served.as_("alice")
    )
    query = {"run_id": run.run_id, "follow": "false"}

    async def steered() -> list[dict[str, object]]:
        ticket = await _ticket(served, "olga", run_id=run.run_id)
        r = await served.client.get(f"{BASE}/events", params={**query, "ticket": ticket})
        assert r.status_code == 200, r.text
        return [m for m in parse(r.text) if m["event"] == "steering.applied"]

    await eventually(steered)
    ticket = await _ticket(served, "olga", run_id=run.run_id)
    first = await served.client.get(f"{BASE}/events", params={**query, "ticket": ticket})
    assert first.status_code == 200 and parse(first.text)
    again = await served.client.get(f"{BASE}/events", params={**query, "ticket": ticket})
    assert again.status_code == 401
    assert "already used" in again.json()["message"]


async def test_a_ticket_opens_no_other_stream(served: Served) -> None:
    run = await served.start_run("acme")
    other = await served.start_run("acme")
    ticket = await _ticket(served, "alice", run_id=run.run_id)
    for params in (
        {"run_id": other.run_id},
        {"root_run_id": run.run_id},
        {},
    ):
        r = await served.client.get(
            f"{BASE}/events", params={**params, "follow": "false", "ticket": ticket}
        )
        assert r.status_code == 401, params
        assert "another stream" in r.json()["message"]
    # refused for another stream, it still opens its own (a refusal does not use it up)
    r = await served.client.get(
        f"{BASE}/events", params={"run_id": run.run_id, "follow": "false", "ticket": ticket}
    )
    assert r.status_code == 200


async def test_a_ticket_keeps_its_tenant_and_its_tokens_rights(served: Served) -> None:
    globex = await served.start_run("globex")
    for stream in ({"run_id": globex.run_id}, {"root_run_id": globex.run_id}):
        # as alice's token is answered: not a run of hers, at once
        r = await served.client.post(
            f"{BASE}/events/tickets", json=stream, headers=served.as_("alice")
        )
        assert r.status_code == 404, r.text
    # a ticket for a stream of her tenant, used for another tenant's run: the same 404
    stream = (globex.run_id, None)
    ticket = served.auth.sse_ticket(
        served.tokens["alice"], stream=stream, expires_at=datetime.now(UTC) + timedelta(seconds=30)
    )
    r = await served.client.get(
        f"{BASE}/events", params={"run_id": globex.run_id, "follow": "false", "ticket": ticket}
    )
    assert r.status_code == 404


async def test_a_ticket_is_no_bearer_token_and_no_token_is_a_ticket(served: Served) -> None:
    ticket = await _ticket(served, "alice")
    for path in ("/runs", "/events?follow=false"):
        r = await served.client.get(f"{BASE}{path}", headers=served.as_(ticket))
        assert r.status_code == 401
        assert "ticket" in r.json()["message"]
    r = await served.client.get(
        f"{BASE}/events", params={"follow": "false", "ticket": served.tokens["alice"]}
    )
    assert r.status_code == 401
    assert "not an event-stream ticket" in r.json()["message"]


async def test_an_expired_ticket_is_refused(served: Served) -> None:
    past = datetime.now(UTC) - timedelta(seconds=5)
    ticket = served.auth.sse_ticket(served.tokens["alice"], stream=(None, None), expires_at=past)
    r = await served.client.get(f"{BASE}/events", params={"follow": "false", "ticket": ticket})
    assert r.status_code == 401
    assert "expired" in r.json()["message"]


async def test_a_ticket_and_a_token_together_are_refused(served: Served) -> None:
    ticket = await _ticket(served, "alice")
    r = await served.client.get(
        f"{BASE}/events",
        params={"follow": "false", "ticket": ticket},
        headers=served.as_("alice"),
    )
    assert r.status_code == 401
    assert "one of them" in r.json()["message"]


async def test_minting_a_ticket_needs_the_token_in_the_header(served: Served) -> None:
    r = await served.client.post(f"{BASE}/events/tickets", json={})
    assert r.status_code == 401
    r = await served.client.post(
        f"{BASE}/events/tickets", params={"access_token": served.tokens["alice"]}, json={}
    )
    assert r.status_code == 401
    r = await served.client.post(
        f"{BASE}/events/tickets", json={"run_id": "a\nb"}, headers=served.as_("alice")
    )
    assert r.status_code == 422


async def test_a_ticket_of_a_narrowed_token_keeps_its_narrowing(served: Served) -> None:
    run = await served.start_run("acme")
    other = await served.start_run("acme")
    narrowed = served.auth.attenuate(served.tokens["alice"], run_id=run.run_id)
    served.tokens["narrowed"] = narrowed
    r = await served.client.post(
        f"{BASE}/events/tickets", json={"run_id": other.run_id}, headers=served.as_(narrowed)
    )
    assert r.status_code == 404  # outside its run: as the token is answered

    async def its_run_only() -> bool:
        ticket = await _ticket(served, "narrowed")  # the tenant's stream: its run's only
        r = await served.client.get(f"{BASE}/events", params={"follow": "false", "ticket": ticket})
        assert r.status_code == 200, r.text
        runs = {m["data"]["run_id"] for m in parse(r.text)}
        assert other.run_id not in runs
        return run.run_id in runs

    await eventually(its_run_only)


async def test_a_forged_ticket_is_refused_saying_where_tickets_come_from(served: Served) -> None:
    forged = Auth(Auth.generate_key())
    token = forged.mint(user="eve", tenant="acme", rights=["iam:admin"])
    ticket = forged.sse_ticket(
        token, stream=(None, None), expires_at=datetime.now(UTC) + timedelta(seconds=30)
    )
    r = await served.client.get(f"{BASE}/events", params={"follow": "false", "ticket": ticket})
    assert r.status_code == 401
    said = r.json()["message"]
    assert said.startswith("?ticket=: ") and "POST /events/tickets" in said, said


def test_a_tickets_lifetime_bounds_its_opening_not_its_stream(served: Served) -> None:
    # the stream asks the token again every second (``valid``): were the ticket's 60 s a
    # check of the token, every console stream would end a minute after it opened
    past = datetime.now(UTC) - timedelta(seconds=5)
    ticket = served.auth.sse_ticket(served.tokens["olga"], stream=(None, None), expires_at=past)
    p = served.auth.authenticate(ticket)
    [claim] = ticket_claims(p.token)
    assert p.expires_at is None  # olga's token never expires; the ticket's end is not its
    assert served.auth.allows(replace(p, ticket=claim), "observe")
    assert not served.auth.allows(p, "observe")  # without the fact: a ticket is no token


def test_a_ticket_used_on_one_server_is_used_on_every_server_of_its_store(
    tmp_path: Path,
) -> None:
    """Two servers (``serve --workers N``, or processes behind one balancer) on one SQLite
    store: the used ticket is recorded in the store, so a leaked ticket opens one stream in
    all, not one on each server within its 60 s."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    with (
        serve("--store", store, cwd=tmp_path) as (first, token, _),
        serve("--store", store, cwd=tmp_path) as (second, _, _),
    ):
        assert token is not None
        bearer = {"Authorization": f"Bearer {token}"}
        r = httpx.post(f"{first}{BASE}/events/tickets", json={}, headers=bearer, timeout=60)
        assert r.status_code == 201, r.text
        params = {"follow": "false", "ticket": r.json()["ticket"]}
        opened = httpx.get(f"{first}{BASE}/events", params=params, timeout=60)
        assert opened.status_code == 200, opened.text
        again = httpx.get(f"{second}{BASE}/events", params=params, timeout=60)
        assert again.status_code == 401, again.text
        assert "already used" in again.json()["message"]


async def test_a_ticket_refused_for_its_requests_other_parameters_is_not_used_up(
    served: Served,
) -> None:
    """A request the server refuses for anything besides its ticket (a parameter that is no
    valid value, a run it may not see) leaves the ticket unused: it still opens its stream."""
    run = await served.start_run("acme")
    ticket = await _ticket(served, "alice", run_id=run.run_id)
    stream = {"run_id": run.run_id, "ticket": ticket}
    for params, headers in (
        ({"follow": "maybe"}, {}),
        ({"last_event_id": "-1"}, {}),
        ({"follow": "false"}, {"Last-Event-ID": "not-a-number"}),
    ):
        r = await served.client.get(f"{BASE}/events", params={**stream, **params}, headers=headers)
        assert r.status_code == 422, (params, r.text)
    r = await served.client.get(f"{BASE}/events", params={**stream, "follow": "false"})
    assert r.status_code == 200, r.text
    # a run it may not see (here: none at all) is a 404, and the ticket is left unclaimed
    expires_at = datetime.now(UTC) + timedelta(seconds=30)
    ticket = served.auth.sse_ticket(
        served.tokens["alice"], stream=("r-nowhere", None), expires_at=expires_at
    )
    r = await served.client.get(
        f"{BASE}/events", params={"run_id": "r-nowhere", "follow": "false", "ticket": ticket}
    )
    assert r.status_code == 404, r.text
    [claim] = ticket_claims(served.auth.authenticate(ticket).token)
    assert await served.control.claim_nonce(claim.nonce, expires_at=expires_at) is True


async def test_a_ticket_of_a_plain_token_is_authorized_tenant_wide_as_its_token(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ticket's own block names no run: a stream it opens for a token that is not
    narrowed asks the authorizer about the tenant, as the token's own stream does, not about
    each run in the log (the path of a narrowed token, whose checks may name runs)."""
    await served.start_run("acme")
    await served.start_run("acme")
    asked: list[object] = []
    allows = served.auth.allows

    def counted(p: Any, op: Any, run: Any = None, **kw: Any) -> bool:
        asked.append(run)
        return allows(p, op, run, **kw)

    monkeypatch.setattr(served.auth, "allows", counted)

    async def streamed(who: str) -> list[dict[str, Any]]:
        ticket = await _ticket(served, who)
        r = await served.client.get(f"{BASE}/events", params={"follow": "false", "ticket": ticket})
        assert r.status_code == 200, r.text
        return [m for m in parse(r.text) if m["event"] != "stream"]

    async def both_runs_logged() -> bool:
        return len({m["data"]["run_id"] for m in await streamed("alice")}) >= 2

    await eventually(both_runs_logged)
    asked.clear()
    assert await streamed("alice")
    assert asked and all(run is None for run in asked)  # the tenant, never a run
    run = await served.start_run("acme")
    served.tokens["narrowed"] = served.auth.attenuate(served.tokens["alice"], run_id=run.run_id)
    asked.clear()
    await streamed("narrowed")
    assert any(run is not None for run in asked)  # (the other path, which a run names)


async def test_a_ticket_whose_use_the_store_cannot_record_is_a_503_to_retry(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert served.control.store is not None
    claim = served.control.store.claim_nonce

    async def failing(nonce: str, *, expires_at: datetime) -> bool:
        raise StoreError("disk I/O error")

    monkeypatch.setattr(served.control.store, "claim_nonce", failing)
    ticket = await _ticket(served, "alice")
    params = {"follow": "false", "ticket": ticket}
    r = await served.client.get(f"{BASE}/events", params=params)
    assert r.status_code == 503, r.text
    assert r.headers["Retry-After"] == "5" and "disk I/O error" in r.json()["message"]
    monkeypatch.setattr(served.control.store, "claim_nonce", claim)
    r = await served.client.get(f"{BASE}/events", params=params)
    assert r.status_code == 200, r.text
