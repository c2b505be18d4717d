"""A hostile user's eighth round at the operator API, over real HTTP. (The library's probes
of this round are in ``tests/test_hostile_probes_8.py``.)"""

from __future__ import annotations

from operator_server import BASE, IDLE_S, Served

JSON = {"content-type": "application/json"}


async def test_a_command_naming_many_unknown_tools_is_answered_with_a_short_reason(
    served: Served,
) -> None:
    """Found: ``POST /runs/{id}/commands`` with a ``constrain_tools`` naming 20,000 tools the
    run lacks was answered 200 ``rejected`` with a reason of some 190,000 characters quoting
    each name (the allowlist runs before the payload bound), stored in the steering log and
    sent on every event stream. The reason now quotes ten and counts the rest."""
    run = await served.start_run("acme", think_s=IDLE_S)
    r = await served.client.post(
        f"{BASE}/runs/{run.run_id}/commands",
        json={"kind": "constrain_tools", "payload": {"tools": [f"t{i}" for i in range(20_000)]}},
        headers={**served.as_("alice"), **JSON},
    )
    assert r.status_code == 200, r.text[:500]
    body = r.json()
    assert body["status"] == "rejected" and body["policy_id"] == "allowlist", body
    assert len(body["reason"]) < 1_000 and "(and 19,990 more)" in body["reason"], body
