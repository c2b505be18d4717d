"""The operator API over real HTTP: every endpoint, tenant isolation, scopes and attenuated
tokens, and the 422/400 rules (issue 13 items 2 and 3)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

import pytest
from operator_server import BASE, IDLE_S, Served, eventually
from pydantic import BaseModel

from tinyagents import RunHandle
from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.protocol import SteeringActor, SteeringKind
from tinyagents.server import Auth
from tinyagents.store.checkpoint import MemoryCheckpointer


def run_paths(run_id: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    """Every endpoint that names a run: (method, path, json body)."""
    base = f"{BASE}/runs/{run_id}"
    return [
        ("GET", base, None),
        ("GET", f"{base}/tree", None),
        ("GET", f"{base}/trace", None),
        ("GET", f"{base}/steering", None),
        ("GET", f"{BASE}/runs?root_run_id={run_id}", None),
        ("GET", f"{BASE}/events?run_id={run_id}&follow=false", None),
        ("GET", f"{BASE}/events?root_run_id={run_id}&follow=false", None),
        ("POST", f"{base}/pause", None),
        ("POST", f"{base}/resume", {"reason": "go on"}),
        ("POST", f"{base}/abort", {}),
        ("POST", f"{base}/steer", {"message": "finish now"}),
        ("POST", f"{base}/commands", {"kind": "cancel", "payload": {}}),
        ("POST", f"{base}/tasks/t-1/commands", {"kind": "approve", "payload": {}}),
    ]


async def call(s: Served, who: str, method: str, path: str, body: Any = None) -> Any:
    return await s.client.request(method, path, json=body, headers=s.as_(who))


async def unchanged(s: Served, run: RunHandle) -> None:
    """No command reached the run: no steering event, still running."""
    assert s.runtime.steering_history(run.run_id) == []
    assert s.runtime.open_commands() == []
    assert run.info.status.value == "running"


# --------------------------------------------------------------------------- endpoints


async def test_reads_list_snapshot_tree_trace_and_steering(served: Served) -> None:
    root = await served.start_run("acme", name="root")
    child = await served.start_run("acme", parent=root, name="child")
    other = await served.start_run("globex")

    listed = (await call(served, "alice", "GET", f"{BASE}/runs")).json()
    ids = {r["run_id"] for r in listed}
    assert {root.run_id, child.run_id} <= ids and other.run_id not in ids
    only_root = (
        await call(served, "alice", "GET", f"{BASE}/runs?root_run_id={root.run_id}")
    ).json()
    assert {r["run_id"] for r in only_root} == {root.run_id, child.run_id}
    running = (await call(served, "alice", "GET", f"{BASE}/runs?status=completed")).json()
    assert running == []

    snap = (await call(served, "alice", "GET", f"{BASE}/runs/{child.run_id}")).json()
    assert snap["run_id"] == child.run_id and snap["parent_run_id"] == root.run_id
    assert snap["tenant_id"] == "acme" and snap["status"] == "running"
    assert "usage" in snap and "pending_commands" in snap

    tree = (await call(served, "alice", "GET", f"{BASE}/runs/{root.run_id}/tree")).json()
    assert tree["run_id"] == root.run_id
    assert [c["run_id"] for c in tree["children"]] == [child.run_id]

    async def traced() -> Any:
        r = await call(served, "alice", "GET", f"{BASE}/runs/{root.run_id}/trace?limit=3")
        frames = r.json()
        return frames if len(frames) == 3 else None

    frames = await eventually(traced)
    assert all(f["run_id"] == root.run_id for f in frames)
    assert [f["id"] for f in frames] == sorted(f["id"] for f in frames)

    r = await call(served, "alice", "POST", f"{BASE}/runs/{root.run_id}/steer", {"message": "x"})
    cid = r.json()["correlation_id"]

    async def applied() -> Any:
        r = await call(served, "alice", "GET", f"{BASE}/runs/{root.run_id}/steering")
        history = r.json()
        return history if history and history[0]["state"] == "applied" else None

    history = await eventually(applied)
    assert history[0]["correlation_id"] == cid and history[0]["kind"] == "add_instruction"
    assert history[0]["terminal"] is True and 'human "alice"' in history[0]["actor"]


async def test_steering_lists_two_senders_commands_with_one_correlation_id_apart(
    served: Served,
) -> None:
    # A correlation id is unique per sender scope (a tenant's humans; the in-process actors):
    # the parent agent's pause and the operator's instruction under the same id are two
    # commands, and the audit list shows both, each with its own events.
    parent = await served.start_run("acme", name="parent")
    child = await served.start_run("acme", parent=parent, name="child")
    pause = await child.pause(
        actor=SteeringActor.parent_agent(parent.run_id, "parent"), correlation_id="k"
    )
    assert pause.status.value == "accepted"
    body = {"message": "hello", "correlation_id": "k"}
    r = await call(served, "alice", "POST", f"{BASE}/runs/{child.run_id}/steer", body)
    assert r.json()["status"] == "accepted", r.json()

    async def both() -> Any:
        r = await call(served, "alice", "GET", f"{BASE}/runs/{child.run_id}/steering")
        history = r.json()
        return history if len(history) == 2 else None

    history = await eventually(both)
    assert [(c["correlation_id"], c["kind"]) for c in history] == [
        ("k", "pause"),
        ("k", "add_instruction"),
    ]
    assert "parent" in history[0]["actor"] and 'human "alice"' in history[1]["actor"]
    for entry in history:
        assert [e["type"] for e in entry["events"]][:2] == [
            "steering.requested",
            "steering.accepted",
        ]


async def test_commands_take_the_target_from_the_path_and_the_actor_from_the_token(
    served: Served,
) -> None:
    run = await served.start_run("acme")
    r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/pause", None)
    assert r.status_code == 200 and r.json()["status"] == "accepted"
    assert r.json()["run_id"] == run.run_id
    await eventually(lambda: run.info.status.value == "paused")

    r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/resume", {"reason": "ok"})
    assert r.json()["status"] == "accepted"
    await eventually(lambda: run.info.status.value == "running")

    body = {
        "kind": "constrain_tools",
        "payload": {"tools": ["step"]},
        "priority": "high",
        "correlation_id": "ops-1",
    }
    r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/commands", body)
    assert r.status_code == 200 and r.json()["correlation_id"] == "ops-1"
    again = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/commands", body)
    assert again.json()["status"] == "duplicate"
    # a priority as the JSON number operator.md and the OpenAPI schema allow (every number
    # was refused: the strict enum wanted an instance, and the body is validated as Python)
    for number in (0, 50, 100, 200):
        numbered = {**body, "priority": number, "correlation_id": f"ops-n{number}"}
        r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/commands", numbered)
        assert r.status_code == 200, r.text
    r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/pause", {"priority": 200})
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
    sent = {e.correlation_id: e for e in served.runtime.steering_history(run.run_id)}
    assert sent["ops-n200"].kind == "constrain_tools"

    # A body naming a target or an actor is refused: they come from the path and the token.
    for extra in ({"target": {"type": "agent_run", "run_id": "r-x"}}, {"actor": {"type": "test"}}):
        r = await call(
            served,
            "alice",
            "POST",
            f"{BASE}/runs/{run.run_id}/commands",
            {"kind": "pause", **extra},
        )
        assert r.status_code == 422, r.text

    # Steering can only narrow: the receipt says rejected, with the reason (HTTP 200).
    widen = {"kind": "constrain_tools", "payload": {"tools": ["step", "rm_rf"]}}
    r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/commands", widen)
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    assert "only narrow" in r.json()["reason"]

    events = served.runtime.steering_history(run.run_id)
    actors = {e.actor.user_id for e in events}  # type: ignore[union-attr]
    assert actors == {"alice"}
    assert {e.actor.tenant_id for e in events} == {"acme"}  # type: ignore[union-attr]

    r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/abort", None)
    assert r.json()["status"] == "accepted"
    result = await run.result()
    assert result.status.value == "cancelled"


class Refund(TypedDict, total=False):
    amount: str
    answer: Any


def ask(state: Refund) -> Refund:
    return {"answer": interrupt(f"refund {state['amount']}?")}


async def test_a_pending_interrupt_is_listed_and_answered_through_its_task(
    served: Served,
) -> None:
    graph = StateGraph(Refund)
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    run = await served.runtime.start_graph(
        compiled, {"amount": "12 EUR"}, thread_id="refund-1", tenant_id="acme"
    )

    async def asked() -> Any:
        r = await call(served, "alice", "GET", f"{BASE}/runs/{run.run_id}")
        return r.json().get("interrupts")

    (pending,) = await eventually(asked)
    assert pending["value"] == "refund 12 EUR?" and pending["node"] == "ask"
    path = f"{BASE}/runs/{run.run_id}/tasks/{pending['task_id']}/commands"
    # Another tenant cannot answer it.
    r = await call(served, "bob", "POST", path, {"kind": "approve", "payload": {"value": 1}})
    assert r.status_code == 404
    body = {"kind": "approve", "payload": {"interrupt_id": pending["id"], "value": "yes"}}
    r = await call(served, "alice", "POST", path, body)
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
    result = await run.result()
    assert result.status.value == "completed"
    assert result.output["answer"] == {"approved": True, "value": "yes"}


class RefundDecision(BaseModel):
    approved: bool
    value: int


def ask_typed(state: Refund) -> Refund:
    decision = interrupt(f"refund {state['amount']}?", response_schema=RefundDecision)
    return {"answer": decision.value}


async def test_a_pending_interrupt_shows_its_response_schema_and_a_wrong_answer_fails(
    served: Served,
) -> None:
    """A client renders the answer's form from the pending interrupt's ``response_schema``;
    an answer the schema refuses fails, saying why, and the question waits on."""
    graph = StateGraph(Refund).add_node("ask", ask_typed).add_edge(START, "ask")
    compiled = graph.add_edge("ask", END).compile(checkpointer=MemoryCheckpointer())
    run = await served.runtime.start_graph(
        compiled, {"amount": "12 EUR"}, thread_id="refund-typed", tenant_id="acme"
    )

    async def asked() -> Any:
        r = await call(served, "alice", "GET", f"{BASE}/runs/{run.run_id}")
        return r.json().get("interrupts")

    (pending,) = await eventually(asked)
    assert pending["response_schema"] == RefundDecision.model_json_schema()
    path = f"{BASE}/runs/{run.run_id}/tasks/{pending['task_id']}/commands"
    r = await call(served, "alice", "POST", path, {"kind": "approve", "payload": {"value": "x"}})
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
    wrong = r.json()["correlation_id"]

    async def failed() -> Any:
        return next(
            (
                e
                for e in served.runtime.steering_history(run.run_id)
                if e.type == "steering.failed" and e.correlation_id == wrong
            ),
            None,
        )

    event = await eventually(failed)
    assert "value: Input should be a valid integer" in event.reason
    assert run.status.value == "interrupted"
    r = await call(served, "alice", "POST", path, {"kind": "approve", "payload": {"value": 12}})
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
    result = await run.result()
    assert result.status.value == "completed" and result.output["answer"] == 12


async def test_aborting_a_graph_tasks_own_entry_cancels_that_task(served: Served) -> None:
    # the console's Cancel on a task row sent the command to the task's entry as to an agent
    # run: an entry has no loop, so it sat pending until the graph ended ("target finished")
    graph = StateGraph(Refund).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    run = await served.runtime.start_graph(
        compiled, {"amount": "12 EUR"}, thread_id="refund-2", tenant_id="acme"
    )

    async def entry() -> Any:
        kids = served.runtime.runs.tree.children(run.run_id)
        return kids[0].run_id if kids and kids[0].status.value == "interrupted" else None

    task_run_id = await eventually(entry)
    r = await call(served, "alice", "POST", f"{BASE}/runs/{task_run_id}/abort", None)
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
    result = await run.result()  # the task was the graph's last: skipped, the graph ends
    assert result.status.value == "completed"
    applied = [
        e for e in served.runtime.steering_history(run.run_id) if e.type == "steering.applied"
    ]
    assert [e.correlation_id for e in applied] == [r.json()["correlation_id"]]


async def test_a_task_command_sent_to_the_tasks_own_entry_answers_its_interrupt(
    served: Served,
) -> None:
    # `runs list` shows a task's entry (gt-...) as `interrupted`: a task command sent under
    # it was accepted as a command to a graph run of that id, which has no loop, and stayed
    # `accepted` forever while the question went unanswered
    graph = StateGraph(Refund).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    run = await served.runtime.start_graph(
        compiled, {"amount": "12 EUR"}, thread_id="refund-3", tenant_id="acme"
    )

    async def asked() -> Any:
        r = await call(served, "alice", "GET", f"{BASE}/runs/{run.run_id}")
        return r.json().get("interrupts")

    (pending,) = await eventually(asked)
    (entry,) = served.runtime.runs.tree.children(run.run_id)
    assert entry.task_id == pending["task_id"]
    other_task = f"{BASE}/runs/{entry.run_id}/tasks/t-other/commands"
    r = await call(served, "alice", "POST", other_task, {"kind": "approve", "payload": {}})
    assert r.status_code == 404 and "task not found" in r.json()["message"], r.text
    path = f"{BASE}/runs/{entry.run_id}/tasks/{entry.task_id}/commands"
    body = {"kind": "approve", "payload": {"interrupt_id": pending["id"], "value": "yes"}}
    r = await call(served, "alice", "POST", path, body)
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
    result = await run.result()
    assert result.status.value == "completed"
    assert result.output["answer"] == {"approved": True, "value": "yes"}
    assert served.runtime.open_commands() == []


async def test_steer_body_rules_422_and_400(served: Served) -> None:
    run = await served.start_run("acme")
    path = f"{BASE}/runs/{run.run_id}/steer"
    for body in ({}, {"message": ""}, {"message": None}, {"message": 3}, None):
        r = await call(served, "alice", "POST", path, body)
        assert r.status_code == 422, (body, r.text)
        assert "message" in r.json()["message"] or "body" in r.json()["message"]
    # well-formed JSON, an invalid request: a 422, as an empty message is (no 400: that
    # is a body that is no JSON, below)
    r = await call(served, "alice", "POST", path, {"message": "  \n\t "})
    assert r.status_code == 422 and "whitespace" in r.json()["message"], r.text
    assert r.json()["type"] == "invalid_request", r.text
    json_type = {"content-type": "application/json"}
    r = await served.client.post(path, content=b"{not json", headers=served.as_("alice"))
    # not sent as JSON (no Content-Type): its media type is refused, not what it says
    assert r.status_code == 415 and "Content-Type" in r.json()["message"], r.text
    r = await served.client.post(
        path, content=b"{not json", headers={**served.as_("alice"), **json_type}
    )
    assert r.status_code == 400 and "not valid JSON" in r.json()["message"]
    assert r.json()["type"] == "malformed_request", r.text
    # Invalid command fields are 422 with a readable message, never 500.
    bad = [
        {"kind": "nope"},
        {"kind": "constrain_tools", "payload": {"tools": [""]}},
        {"kind": "pause", "delivery": "immediate"},
        {"kind": "pause", "fork": True},
        {"kind": "pause", "priority": 7},
        {"kind": "update_budget", "payload": {}},
    ]
    for body in bad:
        r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/commands", body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["detail"]
    await unchanged(served, run)


# --------------------------------------------------------------------------- auth


async def test_no_token_or_a_foreign_token_is_401(served: Served) -> None:
    run = await served.start_run("acme")
    other_key = Auth(Auth.generate_key()).mint(user="eve", tenant="acme", rights=["iam:admin"])
    for headers in ({}, {"Authorization": "Bearer garbage"}, served.as_(other_key)):
        r = await served.client.get(f"{BASE}/runs/{run.run_id}", headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    # a token in the query is the event stream's only (an EventSource cannot send headers):
    # elsewhere it would only end up in access logs and browser history
    r = await served.client.get(
        f"{BASE}/runs/{run.run_id}", params={"access_token": served.tokens["alice"]}
    )
    assert r.status_code == 401 and "/events" in r.json()["message"]
    expired = served.auth.mint(user="x", tenant="acme", rights=["agent:observe"], ttl_s=0.001)
    await asyncio.sleep(1.1)  # the token's expiry is to the second
    r = await served.client.get(f"{BASE}/runs", headers=served.as_(expired))
    assert r.status_code == 401 and "expired" in r.json()["detail"]


@pytest.mark.parametrize("header", ["Basic YWxpY2U6c2VjcmV0", "Token abc", "Bearer", "bearer"])
async def test_an_authorization_header_that_is_no_bearer_token_says_so(
    served: Served, header: str
) -> None:
    # It was told "no token", as if the header had not been sent: a client sending its
    # token under another scheme (or the scheme alone) did not learn what to change.
    run = await served.start_run("acme")
    for path in (f"/runs/{run.run_id}", "/events"):
        r = await served.client.get(f"{BASE}{path}", headers={"Authorization": header})
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        message = r.json()["message"]
        assert "not a Bearer token" in message and header.split()[0] in message, message
        assert "YWxpY2U6c2VjcmV0" not in r.text  # what was sent is not echoed


@pytest.mark.parametrize("separator", ["\t", "\t "])
async def test_a_bearer_token_after_a_tab_says_the_separator_is_wrong(
    served: Served, separator: str
) -> None:
    # RFC 9110 (section 11.4) puts one or more spaces between the scheme and the token, so a
    # tab is refused, but the 401 said "'Bearer' with no token after it": the client that
    # sent its token did not learn that the separator was what to change.
    run = await served.start_run("acme")
    token = served.tokens["alice"]
    header = f"Bearer{separator}{token}"
    for path in (f"/runs/{run.run_id}", "/events"):
        r = await served.client.get(f"{BASE}{path}", headers={"Authorization": header})
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        message = r.json()["message"]
        assert "tab" in message and "space" in message, message
        assert "no token after it" not in message, message
        assert token not in r.text  # what was sent is not echoed


@pytest.mark.parametrize(
    "code",
    [
        # ~3.6 KB of facts and one check joining them three ways: seconds of the event loop
        # (every tenant's) per request, which the library's time limit did not stop
        "".join(f"n({i});" for i in range(200))
        + "check if n($a), n($b), n($c), $a + $b + $c == -1 or time($t);",
        # a rule derives facts round after round
        "m($x) <- right($x); check if m($y) or time($t);",
    ],
)
async def test_a_token_with_a_costly_attenuation_is_401_before_it_runs(
    served: Served, code: str
) -> None:
    from biscuit_auth import Biscuit, BlockBuilder

    parsed = Biscuit.from_base64(served.tokens["alice"], served.auth._keypair.public_key)
    costly = parsed.append(BlockBuilder(code)).to_base64()
    r = await served.client.get(f"{BASE}/runs", headers=served.as_(costly))
    assert r.status_code == 401 and "attenuation block 1" in r.json()["detail"]
    # what the server's own attenuate writes, several times over, is fine
    token = served.tokens["alice"]
    for _ in range(3):
        token = served.auth.attenuate(token, observe_only=True, ttl_s=60)
    assert (await served.client.get(f"{BASE}/runs", headers=served.as_(token))).status_code == 200


def test_a_token_lifetime_is_never_shorter_than_asked(served: Served) -> None:
    # Biscuit dates are whole seconds: the end is rounded up (rounded down, more than half
    # of the tokens minted with ttl_s=0.5 were expired at once)
    for ttl in (0.5, 1.2):
        for _ in range(20):
            before = datetime.now(UTC)
            token = served.auth.mint(user="x", tenant="acme", rights=["agent:observe"], ttl_s=ttl)
            principal = served.auth.authenticate(token)
            assert principal.expires_at is not None
            assert principal.expires_at >= before + timedelta(seconds=ttl)
            narrowed = served.auth.authenticate(served.auth.attenuate(token, ttl_s=ttl))
            assert narrowed.expires_at is not None and narrowed.expires_at >= before


async def test_an_attenuated_token_past_its_lifetime_is_401_too(served: Served) -> None:
    # a lifetime added by attenuation (`tinyagents token attenuate --ttl`) expires as a
    # minted one does: 401 naming the expiry, not a tenant that looks empty
    run = await served.start_run("acme")
    narrowed = [
        served.auth.attenuate(served.tokens["alice"], ttl_s=0.001),
        served.auth.attenuate(served.tokens["alice"], ttl_s=0.001, run_id=run.run_id),
        served.auth.attenuate(served.tokens["alice"], ttl_s=0.001, observe_only=True),
    ]
    await asyncio.sleep(1.1)  # the expiry is to the second
    for token in narrowed:
        for method, path in [
            ("GET", f"{BASE}/runs"),
            ("GET", f"{BASE}/runs/{run.run_id}"),
            ("POST", f"{BASE}/runs/{run.run_id}/pause"),
            ("GET", f"{BASE}/events?follow=false"),
        ]:
            r = await served.client.request(method, path, headers=served.as_(token))
            assert r.status_code == 401, (method, path, r.status_code, r.text)
            assert r.headers["www-authenticate"] == "Bearer" and "expired" in r.json()["detail"]
    assert run.info.status.value == "running"  # the pause was never sent


async def test_another_tenant_gets_404_everywhere_and_changes_nothing(served: Served) -> None:
    root = await served.start_run("acme")
    child = await served.start_run("acme", parent=root)
    for run in (root, child):
        for method, path, body in run_paths(run.run_id):
            r = await call(served, "bob", method, path, body)
            assert r.status_code == 404, (method, path, r.status_code, r.text)
            assert r.json() == {
                "type": "not_found",
                "detail": "run not found",
                "message": "run not found",
            }
    # Unknown ids answer exactly the same.
    for method, path, body in run_paths("r-does-not-exist"):
        r = await call(served, "alice", method, path, body)
        assert (r.status_code, r.json()) == (
            404,
            {"type": "not_found", "detail": "run not found", "message": "run not found"},
        ), (method, path)
    listed = (await call(served, "bob", "GET", f"{BASE}/runs")).json()
    assert listed == []
    r = await call(served, "bob", "GET", f"{BASE}/events?follow=false")
    assert root.run_id not in r.text and "acme" not in r.text
    await unchanged(served, root)
    await unchanged(served, child)


async def test_observe_only_tokens_read_but_cannot_control(served: Served) -> None:
    run = await served.start_run("acme")
    observe_only = served.auth.attenuate(served.tokens["alice"], observe_only=True)
    for who in ("olga", observe_only):
        assert (await call(served, who, "GET", f"{BASE}/runs/{run.run_id}")).status_code == 200
        assert len((await call(served, who, "GET", f"{BASE}/runs")).json()) == 1
        for method, path, body in run_paths(run.run_id):
            if method == "POST":
                r = await call(served, who, method, path, body)
                assert r.status_code == 403, (path, r.text)
    await unchanged(served, run)


async def test_a_control_only_token_may_steer_but_observes_nothing(served: Served) -> None:
    """A token with agent:control and no agent:observe: every read is the 403 the OpenAPI
    document declares, as the listing already was (single runs answered 404 while a steer
    of the same run was accepted)."""
    run = await served.start_run("acme")
    served.mint("carl", tenant="acme", rights="agent:control")
    for path in (f"{BASE}/runs", f"{BASE}/runs/{run.run_id}", f"{BASE}/runs/{run.run_id}/tree",
                 f"{BASE}/runs/{run.run_id}/steering", f"{BASE}/runs/no-such-run"):  # fmt: skip
        r = await call(served, "carl", "GET", path)
        assert r.status_code == 403, (path, r.text)
        assert r.json()["message"] == "this token does not grant agent:observe"
    steer = await call(
        served, "carl", "POST", f"{BASE}/runs/{run.run_id}/steer", {"message": "finish"}
    )
    assert steer.status_code == 200 and steer.json()["status"] == "accepted"


async def test_a_forged_block_grants_nothing(served: Served) -> None:
    from biscuit_auth import Biscuit, BlockBuilder

    run = await served.start_run("acme")
    parsed = Biscuit.from_base64(served.tokens["olga"], served.auth._keypair.public_key)
    forged = parsed.append(
        BlockBuilder('right("iam:admin"); right("agent:control"); tenant("globex");')
    ).to_base64()
    principal = served.auth.authenticate(forged)
    assert principal.tenant == "acme" and principal.rights == {"agent:observe"}
    r = await call(served, forged, "POST", f"{BASE}/runs/{run.run_id}/pause", None)
    assert r.status_code == 403
    await unchanged(served, run)


async def test_a_token_narrowed_to_a_run_sees_that_run_and_its_subtree_only(
    served: Served,
) -> None:
    root = await served.start_run("acme", name="root")
    child = await served.start_run("acme", parent=root, name="child")
    grandchild = await served.start_run("acme", parent=child, name="grandchild")
    sibling = await served.start_run("acme", parent=root, name="sibling")
    narrowed = served.auth.attenuate(served.tokens["alice"], run_id=child.run_id)

    listed = (await call(served, narrowed, "GET", f"{BASE}/runs")).json()
    assert {r["run_id"] for r in listed} == {child.run_id, grandchild.run_id}
    for visible in (child, grandchild):
        r = await call(served, narrowed, "GET", f"{BASE}/runs/{visible.run_id}")
        assert r.status_code == 200
    for hidden in (root, sibling):
        for method, path, body in run_paths(hidden.run_id):
            r = await call(served, narrowed, method, path, body)
            assert r.status_code == 404, (method, path, r.text)
        await unchanged(served, hidden)
    r = await call(served, narrowed, "POST", f"{BASE}/runs/{grandchild.run_id}/pause", None)
    assert r.json()["status"] == "accepted"
    # Its event stream carries only the runs it may see.
    r = await call(served, narrowed, "GET", f"{BASE}/events?follow=false")
    shown = {
        line.split('"run_id":"')[1].split('"')[0]
        for block in r.text.split("\n\n")
        if block.startswith("id:")  # an event (the stream's opening message has no id)
        for line in block.splitlines()
        if line.startswith("data:")
    }
    assert shown and shown <= {child.run_id, grandchild.run_id}
    # Narrowed to observing that run: it may not control even inside it.
    both = served.auth.attenuate(narrowed, observe_only=True)
    r = await call(served, both, "POST", f"{BASE}/runs/{child.run_id}/pause", None)
    assert r.status_code == 403


async def test_a_tree_shows_only_the_runs_the_token_may_see(served: Served) -> None:
    """A hand-written attenuation may admit a run and not those below it (``run(...)`` is
    one of the facts its checks see): ``/runs/{id}`` of a run below is a 404, and the tree of
    the run above showed that run's whole snapshot among its children."""
    from biscuit_auth import Biscuit, BlockBuilder

    root = await served.start_run("acme", name="root")
    child = await served.start_run("acme", parent=root, name="child")
    grandchild = await served.start_run("acme", parent=child, name="grandchild")
    parsed = Biscuit.from_base64(served.tokens["alice"], served.auth._keypair.public_key)
    two = parsed.append(
        BlockBuilder(f'check if run("{root.run_id}") or run("{grandchild.run_id}");')
    ).to_base64()
    r = await call(served, two, "GET", f"{BASE}/runs/{child.run_id}")
    assert r.status_code == 404, r.text
    r = await call(served, two, "GET", f"{BASE}/runs/{grandchild.run_id}")
    assert r.status_code == 200, r.text
    r = await call(served, two, "GET", f"{BASE}/runs/{root.run_id}/tree")
    assert r.status_code == 200, r.text
    assert r.json()["run_id"] == root.run_id and r.json()["children"] == []
    assert child.run_id not in r.text
    # the tree of a run it may see below a hidden one is its own subtree
    r = await call(served, two, "GET", f"{BASE}/runs/{grandchild.run_id}/tree")
    assert r.status_code == 200 and r.json()["run_id"] == grandchild.run_id
    # a token narrowed to a subtree (tinyagents token attenuate --run) sees it whole
    narrowed = served.auth.attenuate(served.tokens["alice"], run_id=child.run_id)
    r = await call(served, narrowed, "GET", f"{BASE}/runs/{child.run_id}/tree")
    assert [c["run_id"] for c in r.json()["children"]] == [grandchild.run_id]


async def test_iam_admin_sees_and_steers_every_tenant(served: Served) -> None:
    acme = await served.start_run("acme")
    globex = await served.start_run("globex")
    listed = (await call(served, "root", "GET", f"{BASE}/runs")).json()
    assert {acme.run_id, globex.run_id} <= {r["run_id"] for r in listed}
    r = await call(served, "root", "POST", f"{BASE}/runs/{acme.run_id}/pause", None)
    assert r.json()["status"] == "accepted"
    await eventually(lambda: acme.info.status.value == "paused")
    (event,) = [
        e for e in served.runtime.steering_history(acme.run_id) if e.type.endswith("requested")
    ]
    assert event.actor.tenant_id == "acme" and "iam:admin" in event.actor.scopes  # type: ignore[union-attr]
    observe_admin = served.auth.attenuate(served.tokens["root"], observe_only=True)
    r = await call(served, observe_admin, "POST", f"{BASE}/runs/{globex.run_id}/pause", None)
    assert r.status_code == 403
    assert globex.info.status.value == "running"


@pytest.mark.parametrize("kind", [SteeringKind.PAUSE])
async def test_the_openapi_document_is_published(served: Served, kind: SteeringKind) -> None:
    doc = (await served.client.get(f"{BASE}/openapi.json")).json()
    paths = set(doc["paths"])
    assert {
        "/api/agents/runs",
        "/api/agents/runs/{run_id}",
        "/api/agents/runs/{run_id}/tree",
        "/api/agents/runs/{run_id}/trace",
        "/api/agents/runs/{run_id}/steering",
        f"/api/agents/runs/{{run_id}}/{kind.value}",
        "/api/agents/runs/{run_id}/resume",
        "/api/agents/runs/{run_id}/abort",
        "/api/agents/runs/{run_id}/steer",
        "/api/agents/runs/{run_id}/commands",
        "/api/agents/runs/{run_id}/tasks/{task_id}/commands",
        "/api/agents/events",
    } <= paths
    assert "HTTPBearer" in doc["components"]["securitySchemes"]


async def test_the_openapi_document_is_valid_and_lists_what_the_server_answers(
    served: Served,
) -> None:
    # a client generated from the document met statuses it did not list (400 and 413 on
    # every POST, 403 on the reads, 503 on /readyz), and a validator refused it (the Link
    # header had no schema)
    from openapi_spec_validator import validate

    doc = (await served.client.get(f"{BASE}/openapi.json")).json()
    validate(doc)
    paths = doc["paths"]
    for path, item in paths.items():
        for method, operation in item.items():
            answers = set(operation["responses"])
            if method == "post":
                assert {"400", "401", "403", "404", "413", "422"} <= answers, (path, answers)
            elif path.startswith(f"{BASE}/runs") or path == f"{BASE}/events":
                assert {"401", "403"} <= answers, (path, answers)
    assert "503" in paths["/readyz"]["get"]["responses"]
    # every error answer of the API has one declared body: message and detail
    error = doc["components"]["schemas"]["ErrorBody"]
    assert {"message", "detail"} <= set(error["required"]), error
    for path, item in paths.items():
        if not path.startswith(BASE):
            continue
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    schema = response.get("content", {}).get("application/json", {})
                    assert schema.get("schema") == {"$ref": "#/components/schemas/ErrorBody"}, (
                        path,
                        method,
                        status,
                        response,
                    )
            names = {p["name"] for p in operation.get("parameters", ())}
            assert ("access_token" in names) == (path == f"{BASE}/events"), (path, names)


async def test_every_error_body_says_its_problem_in_one_message_line(served: Served) -> None:
    # operator.md: "detail lists the problems, message says them in one line"; a command the
    # protocol refused (a pause delivered immediately) came back as {"detail": "<text>"}
    run = await served.start_run("acme")
    bad = {"kind": "pause", "delivery": "immediate"}
    r = await call(served, "alice", "POST", f"{BASE}/runs/{run.run_id}/commands", bad)
    assert r.status_code == 422, r.text
    body = r.json()
    assert isinstance(body["detail"], list) and body["detail"][0]["msg"] == body["message"]
    assert "immediate" in body["message"]
    for method, path in (("GET", f"{BASE}/runs/nope"), ("DELETE", f"{BASE}/runs")):
        r = await call(served, "alice", method, path, None)
        assert r.status_code in (404, 405) and r.json()["message"] == r.json()["detail"]


def test_a_token_of_text_that_is_not_utf8_is_a_configuration_error(served: Served) -> None:
    # the library raised a TypeError ("failed to extract enum PyTerm") for a lone surrogate
    from tinyagents.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"tenant .* is not UTF-8"):
        served.auth.mint(user="u", tenant="\udce9", rights=["agent:observe"])
    with pytest.raises(ConfigurationError, match=r"run id .* is not UTF-8"):
        served.auth.attenuate(served.tokens["alice"], run_id="r-\udcff")


async def test_a_trailing_slash_is_a_404_that_names_the_path_not_a_redirect(
    served: Served,
) -> None:
    # It was a 307 to an absolute http:// URL: wrong behind a TLS proxy (and a client that
    # follows it sends its token to another scheme).
    run = await served.start_run("acme")
    for method, path in (
        ("GET", f"{BASE}/runs/"),
        ("GET", f"{BASE}/runs/{run.run_id}/"),
        ("POST", f"{BASE}/runs/{run.run_id}/pause/"),
    ):
        r = await call(served, "alice", method, path)
        assert r.status_code == 404, (path, r.status_code)
        assert "location" not in r.headers
        right = path.rstrip("/")
        assert r.json()["message"] == r.json()["detail"]
        assert f"use {right}" in r.json()["message"] and "trailing slash" in r.json()["message"]
    r = await call(served, "alice", "GET", f"{BASE}/nothing/")
    assert r.status_code == 404 and "trailing slash" not in r.json()["message"]
    assert run.info.status.value == "running"


# --------------------------------------------------------------------------- headers


async def test_every_answer_of_the_api_is_read_only_as_the_type_it_says(served: Served) -> None:
    # The console's files carried X-Content-Type-Options: nosniff, the API's JSON did not: a
    # browser could sniff an answer echoing a run's text (a name, a message) as HTML or script.
    # A run that only has to exist, idle: a busy one steps in this loop between the requests,
    # each step dearer than the last, so on a loaded machine the slower the test ran the more
    # work it had left (it timed out at 120 s once, under heavy CI load)
    run = await served.start_run("acme", think_s=IDLE_S)
    alice = served.as_("alice")
    answers = [
        await served.client.get(f"{BASE}/runs", headers=alice),  # 200
        await served.client.get(f"{BASE}/openapi.json"),
        await served.client.get(f"{BASE}/runs/{run.run_id}"),  # 401
        await served.client.get(f"{BASE}/runs/r-nobody", headers=alice),  # 404
        await served.client.delete(f"{BASE}/runs/{run.run_id}", headers=alice),  # 405
        await served.client.get(f"{BASE}/runs?limit=0", headers=alice),  # 422
        await served.client.post(  # 413, answered before the app reads the body
            f"{BASE}/runs/{run.run_id}/steer", headers=alice, content=b"x" * (5 * 2**20)
        ),
        await served.client.get(f"{BASE}/nowhere"),  # FastAPI's own 404
        await served.client.get(f"{BASE}/events?run_id={run.run_id}&follow=false", headers=alice),
        await served.client.get("/"),  # the console's page had it: once still
    ]
    assert [r.status_code for r in answers] == [200, 200, 401, 404, 405, 422, 413, 404, 200, 200]
    assert answers[8].headers["content-type"].startswith("text/event-stream")
    for r in answers:
        assert r.headers.get_list("x-content-type-options") == ["nosniff"], r.request.url
    assert run.info.usage.model_calls <= 1, run.info.usage  # idle all along: in its first call


async def test_an_unhandled_error_is_a_json_500_read_only_as_json(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Starlette answers an exception no handler took outside every middleware the app adds:
    # its plain-text 500 lacked the nosniff header every other answer carries
    run = await served.start_run("acme")

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret-detail-of-the-bug")

    monkeypatch.setattr(served.control, "get_run", broken)
    r = await served.client.get(f"{BASE}/runs/{run.run_id}", headers=served.as_("alice"))
    assert r.status_code == 500, r.text
    assert r.headers.get_list("x-content-type-options") == ["nosniff"], r.headers
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert set(body) == {"type", "detail", "message"} and body["detail"] == body["message"], body
    assert body["type"] == "internal_error", body
    assert "log" in body["message"], body  # where to look
    assert "secret-detail-of-the-bug" not in r.text  # never the error itself
