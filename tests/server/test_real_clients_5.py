"""Real clients, round five: a client made from the published OpenAPI document (a generated
client, a validating proxy) takes the API at the document's word (test_real_clients to _4
have curl, the HTTP libraries, the browser and the CLI)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any, TypedDict

import httpx
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from operator_server import BASE, IDLE_S, Served, eventually

from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.protocol import SteeringKind
from tinyagents.store.checkpoint import MemoryCheckpointer


class Refund(TypedDict, total=False):
    amount: str
    answer: Any


def ask(state: Refund) -> Refund:
    return {"answer": interrupt(f"refund {state['amount']}?")}


def _answer_schema(doc: dict[str, Any], path: str) -> dict[str, Any]:
    """The JSON Schema the document gives ``GET path``'s 200 answer, its ``$ref``s readable
    (the components beside it, as in the document)."""
    (content,) = doc["paths"][path]["get"]["responses"]["200"]["content"].values()
    return {**content["schema"], "components": doc["components"]}


def _properties(doc: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    """The properties an object schema (or the items of an array schema, the non-null one
    of an ``anyOf``) declares."""
    schema = next((s for s in schema.get("anyOf", ()) if s.get("type") != "null"), schema)
    schema = schema.get("items", schema)
    ref = schema.get("$ref")
    if ref is not None:
        schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return set(schema.get("properties", {}))


async def test_a_client_of_the_openapi_document_reads_the_runs_answers_it_declares(
    served: Served,
) -> None:
    """The document declared every read of runs (``/runs``, ``/runs/{id}``, its tree, its
    command history and its trace) as an object of any properties: a client generated from
    it had no field of a snapshot (``status``, ``usage``, ``pending_commands``,
    ``interrupts``...) to read, and a validating proxy nothing to check. Each now declares
    the fields docs/operator.md lists, and what the server answers meets what it declares."""
    parent = await served.start_run("acme", think_s=0.05)
    await served.start_run("acme", parent=parent, name="child", think_s=0.05)
    graph = StateGraph(Refund).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    asked = await served.runtime.start_graph(
        compiled, {"amount": "12 EUR"}, thread_id="refund-openapi", tenant_id="acme"
    )
    alice = served.as_("alice")
    async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:
        doc = (await client.get(f"{BASE}/openapi.json")).json()
        validate(doc)  # a valid OpenAPI document, as a generator reads it

        receipt = await client.post(f"{BASE}/runs/{parent.run_id}/pause", headers=alice)
        assert receipt.json()["status"] == "accepted", receipt.text

        async def waiting() -> Any:
            r = await client.get(f"{BASE}/runs/{asked.run_id}", headers=alice)
            return r.status_code == 200 and r.json()["interrupts"]

        await eventually(waiting)
        declared = {
            "/runs": {"status", "usage", "pending_commands", "interrupts", "owner"},
            "/runs/{run_id}": {"status", "usage", "pending_commands", "interrupts", "owner"},
            "/runs/{run_id}/tree": {"children", "truncated", "status"},
            "/runs/{run_id}/steering": {"kind", "actor", "state", "terminal", "reason"},
            "/runs/{run_id}/trace": {"id", "type", "run_id"},
        }
        for path, fields in declared.items():
            schema = _answer_schema(doc, f"{BASE}{path}")
            assert fields <= _properties(doc, schema), (path, schema)
            checker = Draft202012Validator(schema)
            for run_id in (parent.run_id, asked.run_id):
                r = await client.get(f"{BASE}{path.replace('{run_id}', run_id)}", headers=alice)
                assert r.status_code == 200, (path, r.text)
                problems = [e.message for e in checker.iter_errors(r.json())]
                assert not problems, (path, problems)
        snapshot = doc["components"]["schemas"]["RunSnapshot"]["properties"]
        assert _properties(doc, snapshot["pending_commands"]) >= {"correlation_id", "state"}
        assert _properties(doc, snapshot["interrupts"]) >= {"id", "task_id", "response_schema"}


def _read_json(url: str) -> Any:
    """``url``'s JSON as urllib reads it (in a thread: the server answers in the test's loop)."""
    with urllib.request.urlopen(url, timeout=60) as answer:
        return json.loads(answer.read())


async def test_the_probes_answers_meet_the_shapes_the_document_gives_them(served: Served) -> None:
    """``/healthz`` and ``/readyz`` were declared as any JSON (``{}``), and ``/readyz``'s 503
    as no body at all, though docs/operator.md promises ``{"status": ..., "checks": {...}}``
    naming what does not answer: a balancer's check written from the document read nothing
    of it. Both answers are declared, and what urllib reads of them meets them."""
    async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:
        doc = (await client.get(f"{BASE}/openapi.json")).json()
    for path, fields in (("/healthz", {"status"}), ("/readyz", {"status", "checks"})):
        schema = _answer_schema(doc, path)
        assert fields <= _properties(doc, schema), (path, schema)
        body = await asyncio.to_thread(_read_json, f"{served.url}{path}")
        assert not [e.message for e in Draft202012Validator(schema).iter_errors(body)], body
    (unready,) = doc["paths"]["/readyz"]["get"]["responses"]["503"]["content"].values()
    unready_schema = {**unready["schema"], "components": doc["components"]}
    assert {"status", "checks"} <= _properties(doc, unready_schema)
    down = {"status": "unavailable", "checks": {"runtime": "ok", "store": "unavailable"}}
    assert not list(Draft202012Validator(unready_schema).iter_errors(down))


async def _runs_list(token: str, *argv: str) -> list[dict[str, Any]]:
    """``tinyagents runs list ARGV --json`` in a subprocess, ``token`` in its environment."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tinyagents", "runs", "list", *argv, "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TINYAGENTS_TOKEN": token},
    )  # fmt: skip
    try:
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:  # cancelled (a wait that gave up): not left running
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    return list(json.loads(out))


async def test_runs_list_keeps_every_status_it_is_given(served: Served, tmp_path: Path) -> None:
    """``runs list --status running --status paused`` listed the paused runs alone: the last
    ``--status`` replaced the others, silently, where the API's repeated ``?status=`` (and the
    console's live trees) mean any of them. Each ``--status`` given is kept, through the
    server and through the store."""
    running = await served.start_run("acme", think_s=IDLE_S)
    paused = await served.start_run("acme", think_s=0.05)
    receipt = await served.client.post(
        f"{BASE}/runs/{paused.run_id}/pause", headers=served.as_("alice")
    )
    assert receipt.json()["status"] == "accepted", receipt.text

    async def listed_paused() -> Any:
        r = await served.client.get(f"{BASE}/runs/{paused.run_id}", headers=served.as_("alice"))
        return r.json()["status"] == "paused"

    await eventually(listed_paused)
    both = {running.run_id: "running", paused.run_id: "paused"}
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    for where in (("--url", served.url), ("--store", store, "--tenant", "acme")):

        async def shown(where: tuple[str, ...] = where) -> Any:
            runs = await _runs_list(
                served.tokens["alice"], "--status", "running", "--status", "paused", *where
            )
            return {r["run_id"]: r["status"] for r in runs} == both

        await eventually(shown)


async def test_a_wrong_method_is_the_apis_error_naming_the_methods_the_path_takes(
    served: Served,
) -> None:
    """A 405's message was a bare ``Method Not Allowed``: a client showing the API's
    ``message`` (the CLI, the console's toasts) told its user nothing of what to send instead,
    though the ``Allow`` header knew. Its message names the methods the path takes, in the
    API's one error shape, under the API and at the console's files alike."""
    run = await served.start_run("acme", think_s=0.05)
    async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:
        for method, path in (
            ("DELETE", f"{BASE}/runs/{run.run_id}"),
            ("GET", f"{BASE}/runs/{run.run_id}/pause"),
            ("POST", "/console.js"),
        ):
            r = await client.request(method, path, headers=served.as_("alice"))
            assert r.status_code == 405, (method, path, r.text)
            allowed = [m.strip() for m in r.headers["Allow"].split(",")]
            body = r.json()
            assert set(body) == {"type", "detail", "message"}, body
            assert body["type"] == "method_not_allowed"
            assert body["detail"] == body["message"]
            assert body["message"] != "Method Not Allowed"
            assert method in body["message"], body
            assert all(m in body["message"] for m in allowed), (allowed, body)


async def test_the_damaged_runs_header_is_declared_where_it_is_sent(served: Served) -> None:
    """``GET /runs`` counts the runs it lists from a damaged row in ``X-Damaged-Runs``
    (docs/operator.md), but the OpenAPI document declared the ``Link`` header alone: a client
    generated from it had no header to read, and a validating proxy could strip it. It is
    declared on ``/runs``' answer, as a count, and on no route that never sends it."""
    async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:
        doc = (await client.get(f"{BASE}/openapi.json")).json()
    validate(doc)
    declared = {
        (path, method)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if "X-Damaged-Runs" in op.get("responses", {}).get("200", {}).get("headers", {})
    }
    assert declared == {(f"{BASE}/runs", "get")}, declared
    header = doc["paths"][f"{BASE}/runs"]["get"]["responses"]["200"]["headers"]["X-Damaged-Runs"]
    assert header["schema"]["type"] == "integer", header
    assert "damaged" in header["description"], header


async def test_a_function_nodes_task_entry_says_which_commands_its_graph_run_takes(
    served: Served,
) -> None:
    """A graph task's entry (``gt-...``) of a function node looked like any run, though its
    graph run refuses a pause, a resume, an instruction or a narrowing of tools for it (only
    an agent node's run takes them): a client (the console) offered each, to be refused. Its
    snapshot names the kinds it takes (``accepts``, declared in the document), from the rule
    the server refuses by: what it leaves out is refused, what it names is not."""
    graph = StateGraph(Refund).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    asked = await served.runtime.start_graph(
        compiled, {"amount": "3 EUR"}, thread_id="refund-accepts", tenant_id="acme"
    )
    alice = served.as_("alice")
    async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:

        async def entry() -> Any:
            r = await client.get(f"{BASE}/runs/{asked.run_id}/tree", headers=alice)
            tasks = [c for c in r.json()["children"] if c.get("task_id")]
            return tasks and tasks[0]["status"] == "interrupted" and tasks[0]

        task = await eventually(entry)
        doc = (await client.get(f"{BASE}/openapi.json")).json()
        snapshot = (await client.get(f"{BASE}/runs/{task['run_id']}", headers=alice)).json()
        assert "accepts" in doc["components"]["schemas"]["RunSnapshot"]["properties"]
        accepts = snapshot["accepts"]
        assert task["accepts"] == accepts
        assert {"cancel", "approve", "reject"} <= set(accepts), accepts
        for kind, payload in (
            ("pause", {}),
            ("resume", {}),
            ("add_instruction", {"text": "be brief"}),
            ("constrain_tools", {"tools": []}),
        ):
            assert kind not in accepts
            r = await client.post(
                f"{BASE}/runs/{task['run_id']}/commands",
                json={"kind": kind, "payload": payload},
                headers=alice,
            )
            receipt = r.json() if r.status_code == 200 else r.json().get("receipt") or {}
            assert receipt.get("status") == "rejected", (kind, r.status_code, r.text)
            assert "not an agent node" in receipt["reason"], receipt
        r = await client.post(
            f"{BASE}/runs/{task['run_id']}/commands",
            json={"kind": "request_status", "payload": {}},
            headers=alice,
        )
        assert "request_status" in accepts
        assert r.json()["status"] != "rejected", r.text


#: A payload the API takes for each steering kind, to send a graph run itself.
_PAYLOADS: dict[str, dict[str, Any]] = {
    "add_instruction": {"text": "be brief"},
    "replace_instruction": {"text": "be brief"},
    "ask_clarifying_question": {"question": "which refund?"},
    "provide_context": {"text": "the customer is known"},
    "constrain_tools": {"tools": []},
    "constrain_model": {"models": ["fake"]},
    "pause": {},
    "resume": {},
    "cancel": {},
    "approve": {},
    "reject": {},
    "redirect": {"goto": "ask"},
    "request_status": {},
    "update_budget": {"max_model_calls": 3},
    "update_state": {"update": {"amount": "4 EUR"}},
}


async def test_a_graph_runs_own_entry_says_which_commands_it_takes(served: Served) -> None:
    """A graph run's own entry showed Steer and Narrow tools, which its graph run refuses for
    itself (only an agent node's run takes them): its snapshot names the kinds it takes
    (``accepts``, from ``lowering.run_takes``, the rule ``never_applied`` refuses by). Each
    kind it leaves out is refused for that reason; each it names is not (each sent to a run of
    its own, resting on its one question, so no earlier command changes what it asks)."""
    assert set(_PAYLOADS) == {kind.value for kind in SteeringKind}
    graph = StateGraph(Refund).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    alice = served.as_("alice")
    async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:

        async def resting(thread: str) -> dict[str, Any]:
            run = await served.runtime.start_graph(
                compiled, {"amount": "3 EUR"}, thread_id=thread, tenant_id="acme"
            )

            async def asks() -> Any:
                r = await client.get(f"{BASE}/runs/{run.run_id}", headers=alice)
                return r.json().get("interrupts") and r.json()

            return await eventually(asks)

        async def send(run_id: str, kind: str) -> dict[str, Any]:
            r = await client.post(
                f"{BASE}/runs/{run_id}/commands",
                json={"kind": kind, "payload": _PAYLOADS[kind]},
                headers=alice,
            )
            return r.json() if r.status_code == 200 else r.json().get("receipt") or {}

        snapshot = await resting("graph-accepts")
        accepts = snapshot["accepts"]
        tree = (await client.get(f"{BASE}/runs/{snapshot['run_id']}/tree", headers=alice)).json()
        assert tree["accepts"] == accepts
        assert {"pause", "resume", "cancel", "approve", "update_state"} <= set(accepts)
        for kind in sorted(set(_PAYLOADS) - set(accepts)):
            receipt = await send(snapshot["run_id"], kind)
            assert receipt.get("status") == "rejected", (kind, receipt)
            assert "cannot be applied to graph run" in receipt["reason"], receipt
        for kind in accepts:
            run_id = (await resting(f"graph-accepts-{kind}"))["run_id"]
            receipt = await send(run_id, kind)
            assert receipt.get("status") != "rejected", (kind, receipt)
