"""Real clients, round three: what an operator does with the documented tools, taken at their
word (test_real_clients and test_real_clients_2 have the HTTP clients themselves): the
``runs`` CLI's advice on a typed question, followed literally, is an answer the question
takes; and curl through a second ``serve`` process on the demo's store answering the
demo's question while its graph is paused."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

from operator_server import BASE, Served, eventually
from pydantic import BaseModel
from serve_process import free_port, serving
from test_console_browser import TINYAGENTS, serve_demo
from test_real_clients import needs_curl
from test_serve import ENV

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


@contextlib.contextmanager
def second_server(tmp_path: Path) -> Iterator[str]:
    """A plain ``tinyagents serve`` on the demo server's store (tmp_path/serve.db): its URL.
    It owns none of the demo's runs: it lists them from the store and sends their commands
    through the store's inbox."""
    port = free_port()
    argv = [str(TINYAGENTS), "serve", "--port", str(port),
            "--store", f"sqlite:///{tmp_path / 'serve.db'}"]  # fmt: skip
    with serving(argv, port, env=ENV, cwd=tmp_path):
        yield f"http://127.0.0.1:{port}"


def curl_json(*args: str) -> Any:
    """``curl -s ARGS`` (as the docs write it): its body, read as JSON."""
    done = subprocess.run(
        ["curl", "-s", "--max-time", "30", *args], capture_output=True, check=True, timeout=60
    )
    return json.loads(done.stdout)


@needs_curl
def test_curl_through_a_second_server_answers_a_paused_graphs_question(tmp_path: Path) -> None:
    """Two ``serve`` processes on one SQLite file, the demo's refund graph owned by the
    first; with curl, through the second, as the docs write the requests: pause the graph
    waiting on its question, answer it (from its task's row) while paused (the answer waits,
    open, in the snapshot), resume: the graph completes, each command applied once."""
    with serve_demo(tmp_path) as (url, _printed), second_server(tmp_path) as other:
        token = url.split("#token=")[1]
        bearer = ["-H", f"Authorization: Bearer {token}"]
        api = f"{other}/api/agents"

        def asked() -> Any:
            runs = curl_json(*bearer, f"{api}/runs?status=interrupted&limit=20")
            return next((r for r in runs if r["kind"] == "graph" and r["depth"] == 0), None)

        graph = _until(asked)
        run = graph["run_id"]
        (question,) = graph["interrupts"]
        receipt = curl_json(*bearer, "-X", "POST", f"{api}/runs/{run}/pause")
        assert receipt["status"] == "accepted", receipt
        _until(lambda: curl_json(*bearer, f"{api}/runs/{run}")["status"] == "paused")
        entry = next(
            r["run_id"]
            for r in curl_json(*bearer, f"{api}/runs?root_run_id={run}")
            if r["run_id"] != run
        )
        body = {"kind": "approve", "payload": {"interrupt_id": question["id"], "value": "50"}}
        receipt = curl_json(
            *bearer, "-H", "Content-Type: application/json", "-d", json.dumps(body),
            f"{api}/runs/{entry}/tasks/{question['task_id']}/commands",
        )  # fmt: skip
        assert receipt["status"] == "accepted" and receipt["run_id"] == run, receipt
        approve = receipt["correlation_id"]
        held = _until(
            lambda: (snap := curl_json(*bearer, f"{api}/runs/{run}"))["pending_commands"] and snap
        )
        assert held["status"] == "paused" and len(held["interrupts"]) == 1, held
        assert [p["correlation_id"] for p in held["pending_commands"]] == [approve], held
        receipt = curl_json(*bearer, "-X", "POST", f"{api}/runs/{run}/resume")
        assert receipt["status"] == "accepted", receipt
        done = _until(
            lambda: (
                (snap := curl_json(*bearer, f"{api}/runs/{run}"))["status"] == "completed" and snap
            )
        )
        assert done["pending_commands"] == [] and done["interrupts"] == [], done
        states = {c["kind"]: c["state"] for c in curl_json(*bearer, f"{api}/runs/{run}/steering")}
        assert states == {"pause": "applied", "approve": "applied", "resume": "applied"}


def _until(check: Any, timeout_s: float = 60.0) -> Any:
    """Ask ``check`` until it answers something truthy (a bound on waiting, not a timing)."""
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        assert time.monotonic() < deadline, "nothing came"
        time.sleep(0.2)
    return value


@needs_curl
async def test_curl_of_the_api_address_serve_prints_says_where_the_endpoints_are(
    served: Served,
) -> None:
    """``serve`` prints ``API: http://HOST:PORT/api/agents``; curl of that address (or of a
    path no endpoint has) was a bare ``Not Found``. It is still the 404 ``not_found``, and
    says where the endpoints are listed, without echoing the path sent."""
    for path in (BASE, f"{BASE}/", "/api", f"{BASE}/rnus", "/api/agents/" + "x" * 5000):
        done = await asyncio.create_subprocess_exec(
            "curl", "-s", "--max-time", "30", "-H",
            f"Authorization: Bearer {served.tokens['alice']}", served.url + path,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(done.communicate(), 60)
        body = json.loads(out)
        assert body["type"] == "not_found", (path, body)
        assert body["message"].startswith("no such path"), (path, body)
        assert f"{BASE}/docs" in body["message"] and "x" * 100 not in body["message"], body
