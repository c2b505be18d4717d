"""Real clients, round three: what an operator does with the documented tools, taken at their
word (test_real_clients and test_real_clients_2 have the HTTP clients themselves): the
``runs`` CLI's advice on a typed question, followed literally, is an answer the question
takes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, TypedDict

from operator_server import BASE, Served, eventually
from pydantic import BaseModel

from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.store.checkpoint import MemoryCheckpointer


class Refund(TypedDict, total=False):
    amount: str
    answer: Any


class Decision(BaseModel):
    approved: bool
    value: int


def ask_typed(state: Refund) -> Refund:
    decision = interrupt(f"refund {state['amount']}?", response_schema=Decision)
    return {"answer": decision.value}


async def runs_cli(served: Served, *argv: str) -> tuple[int, str, str]:
    """``tinyagents runs ARGV --url <the server>`` in a subprocess, as alice (acme, control)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tinyagents",
        "runs",
        *argv,
        "--url",
        served.url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={
            **os.environ,
            "TINYAGENTS_TOKEN": served.tokens["alice"],
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "COLUMNS": "400",  # one table row a line
        },
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_runs_show_says_how_an_approves_value_meets_a_typed_question(
    served: Served,
) -> None:
    """``runs show`` of a typed question said ``--value meeting {schema}``, but the schema is
    that of the whole answer an approve makes, ``{"approved": true, "value": <--value>}``:
    an operator who gave ``--value`` the schema's shape had it refused (``value`` must be an
    integer). The line says where ``--value`` goes, and doing what it says is taken."""
    graph = StateGraph(Refund).add_node("ask", ask_typed).add_edge(START, "ask")
    compiled = graph.add_edge("ask", END).compile(checkpointer=MemoryCheckpointer())
    run = await served.runtime.start_graph(
        compiled, {"amount": "12 EUR"}, thread_id="refund-cli", tenant_id="acme"
    )

    async def asked() -> Any:
        r = await served.client.get(f"{BASE}/runs/{run.run_id}", headers=served.as_("alice"))
        return r.json().get("interrupts")

    (pending,) = await eventually(asked)
    code, out, err = await runs_cli(served, "show", run.run_id)
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if "answer" in line]
    schema = json.dumps(pending["response_schema"])
    assert schema in line, line
    # the answer an approve makes, with --value in its "value" and --reason in its "reason"
    assert '{"approved": true (false with --reject), "value": --value' in line, line
    assert '"reason": --reason' in line, line

    code, out, err = await runs_cli(served, "approve", run.run_id, "--value", "12")
    assert code == 0, (out, err)
    result = await run.result()
    assert result.status.value == "completed" and result.output["answer"] == 12
