"""A hostile user's ninth round at the operator API, over real HTTP: two operators at once.
(The library's probes of this round are in ``tests/test_hostile_probes_10.py``.)"""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

from operator_server import BASE, Served, eventually

from tinyagents.graph import END, START, StateGraph, interrupt

JSON = {"content-type": "application/json"}


class Refund(TypedDict, total=False):
    amount: str
    answers: list[Any]


def ask(state: Refund) -> Refund:
    return {"answers": [*state.get("answers", []), interrupt(f"refund {state['amount']}?")]}


async def test_two_operators_answering_one_interrupt_at_once_resume_it_once(
    served: Served,
) -> None:
    """Held: two operators approve and reject the same pending interrupt in the same moment
    (each over its own connection). The task is resumed once, with one answer; the other
    command reaches a terminal state of its own that says why, and both are in the audit
    trail: nothing is applied twice, and nothing is lost without a word."""
    graph = StateGraph(Refund).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    run, pending = await served.start_question(graph, {"amount": "12 EUR"}, thread_id="refund-race")
    path = f"{BASE}/runs/{run.run_id}/tasks/{pending['task_id']}/commands"
    bodies = [
        {"kind": kind, "payload": {"interrupt_id": pending["id"], "value": kind}}
        for kind in ("approve", "reject")
    ]
    answers = await asyncio.gather(
        *(
            served.client.post(path, json=body, headers={**served.as_("alice"), **JSON})
            for body in bodies
        )
    )
    assert [r.status_code for r in answers] == [200, 200], [r.text for r in answers]
    result = await run.result()
    assert result.status.value == "completed", result
    (answer,) = result.output["answers"]  # one answer: the task was resumed once
    sent = {r.json()["correlation_id"]: r.json()["status"] for r in answers}

    async def settled() -> dict[str, str] | None:
        r = await served.client.get(
            f"{BASE}/runs/{run.run_id}/steering", headers=served.as_("alice")
        )
        states = {c["correlation_id"]: c for c in r.json()}
        if set(states) >= set(sent) and all(
            states[cid]["state"] in ("applied", "rejected", "failed", "superseded") for cid in sent
        ):
            return {cid: states[cid]["state"] for cid in sent}
        return None

    states = await eventually(settled)
    assert sorted(states.values()).count("applied") == 1, states
    (loser,) = [cid for cid, state in states.items() if state != "applied"]
    r = await served.client.get(f"{BASE}/runs/{run.run_id}/steering", headers=served.as_("alice"))
    (entry,) = [c for c in r.json() if c["correlation_id"] == loser]
    assert entry["events"][-1]["reason"], entry  # says why it was not applied
    won = next(c for c in r.json() if c["correlation_id"] != loser and c["correlation_id"] in sent)
    assert answer["value"] == won["kind"], (answer, won)
