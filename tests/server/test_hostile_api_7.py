"""A hostile user's seventh round at the operator API, over real HTTP. (The library's probes
of this round are in ``tests/test_hostile_probes_7.py``.)"""

from __future__ import annotations

from operator_server import BASE, IDLE_S, Served

JSON = {"content-type": "application/json"}


async def test_a_ticket_for_a_run_outside_the_root_filtered_on_is_a_422(served: Served) -> None:
    """Found: ``POST /events/tickets`` with a ``run_id`` and a ``root_run_id`` of two trees
    handed out a ticket (201) for a stream that ``GET /events`` then refused (422, both
    filters together keep nothing), the ticket spent; the endpoint says it refuses now what
    the stream would. Now the same 422, at ``["body", "root_run_id"]``, and no ticket."""
    one = await served.start_run("acme", think_s=IDLE_S)
    other = await served.start_run("acme", think_s=IDLE_S)
    child = await served.start_run("acme", parent=one, name="kid", think_s=IDLE_S)
    r = await served.client.post(
        f"{BASE}/events/tickets",
        json={"run_id": child.run_id, "root_run_id": other.run_id},
        headers={**served.as_("alice"), **JSON},
    )
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["type"] == "invalid_request", body
    assert body["detail"][0]["loc"] == ["body", "root_run_id"], body
    assert f"run {child.run_id} is not in the tree of {other.run_id}" in body["message"], body
    assert f"its root is {one.run_id}" in body["message"], body
    # a root_run_id that is no root is told at its place in the body (it said the query's)
    r = await served.client.post(
        f"{BASE}/events/tickets",
        json={"root_run_id": child.run_id},
        headers={**served.as_("alice"), **JSON},
    )
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "root_run_id"], r.text
    # a run of that tree (the root itself too) still gets its ticket, which opens its stream
    for run_id in (child.run_id, one.run_id):
        r = await served.client.post(
            f"{BASE}/events/tickets",
            json={"run_id": run_id, "root_run_id": one.run_id},
            headers={**served.as_("alice"), **JSON},
        )
        assert r.status_code == 201, r.text
        ticket = r.json()["ticket"]
        opened = await served.client.get(
            f"{BASE}/events",
            params={
                "ticket": ticket,
                "run_id": run_id,
                "root_run_id": one.run_id,
                "follow": "false",
            },
        )
        assert opened.status_code == 200, opened.text
