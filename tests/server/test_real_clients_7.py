"""Real clients, round seven: operators who race each other on one run (``requests`` in
threads, ``curl``, httpx at once), and a steer the size of the payload limit sent by ``curl``
(test_real_clients to _6 have the routes, heads, caches, reconnects and the CLI's help)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from typing import Any, TypedDict

import requests
from operator_server import BASE, IDLE_S, Served, eventually

from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.steering.policies import DEFAULT_MAX_TEXT_BYTES

TERMINAL = {"steering.applied", "steering.rejected", "steering.superseded", "steering.failed"}


class Refund(TypedDict, total=False):
    amount: str
    answer: Any


def ask(state: Refund) -> Refund:
    return {"answer": interrupt(f"refund {state['amount']}?")}


async def _history(served: Served, run_id: str) -> dict[str, list[str]]:
    """Each command of ``run_id``'s history (the API's, as an operator reads it): its events."""
    r = await served.client.get(f"{BASE}/runs/{run_id}/steering", headers=served.as_("alice"))
    assert r.status_code == 200, r.text
    return {c["correlation_id"]: c["events"] for c in r.json()}


def _race(*calls: Any) -> list[Any]:
    """Run each call in its own thread, released together; their results in order."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def go(i: int, call: Any) -> None:
        barrier.wait()
        results[i] = call()

    threads = [threading.Thread(target=go, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


async def test_two_operators_answering_one_question_at_once_are_each_told_the_truth(
    served: Served,
) -> None:
    """Alice approves and a colleague (another token of her tenant) rejects the same refund
    question, at the same moment, from two ``requests`` sessions. The question is answered
    once: exactly one of the two commands is applied, and the other is told it was not
    (its history ends failed, saying why); the run's answer is the winner's."""
    served.mint("carol", tenant="acme", rights="agent:observe,agent:control")
    graph = StateGraph(Refund).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    run, pending = await served.start_question(graph, {"amount": "12 EUR"}, thread_id="refund-race")
    url = f"{served.url}{BASE}/runs/{run.run_id}/tasks/{pending['task_id']}/commands"

    def answer(who: str, kind: str) -> requests.Response:
        body = {"kind": kind, "payload": {"interrupt_id": pending["id"], "value": who}}
        with requests.Session() as session:
            return session.post(url, json=body, headers=served.as_(who), timeout=60)

    approve, reject = await asyncio.to_thread(
        _race, lambda: answer("alice", "approve"), lambda: answer("carol", "reject")
    )
    receipts = {"approve": approve.json(), "reject": reject.json()}
    assert approve.status_code == 200 and reject.status_code == 200, receipts
    result = await run.result()
    assert result.status.value == "completed"

    async def settled() -> Any:
        history = await _history(served, run.run_id)
        ends = {kind: history.get(r["correlation_id"], [{}])[-1] for kind, r in receipts.items()}
        return ends if all(end.get("type") in TERMINAL for end in ends.values()) else None

    ends = await eventually(settled)
    applied = [kind for kind, end in ends.items() if end["type"] == "steering.applied"]
    assert len(applied) == 1, ends
    (winner,) = applied
    assert result.output["answer"]["approved"] is (winner == "approve"), (result.output, ends)
    for kind, receipt in receipts.items():
        if kind != winner:
            # accepted at once (both came in before either was applied), then told it lost
            assert receipt["status"] in ("accepted", "rejected"), receipt
            assert ends[kind]["type"] == "steering.failed", ends
            # (the question answered, its task gone on; or its graph run already ended)
            said = ("no pending interrupt", "target finished before delivery")
            assert any(why in ends[kind]["reason"] for why in said), ends


def _curl(*args: str) -> tuple[int, Any]:
    """``curl -s`` with ``args``: its HTTP status and the JSON it read."""
    done = subprocess.run(
        ["curl", "-s", "-w", "\n%{http_code}", *args], capture_output=True, text=True, timeout=60
    )
    body, _, status = done.stdout.rpartition("\n")
    return int(status), json.loads(body)


async def test_one_command_sent_by_two_clients_at_once_is_taken_once(served: Served) -> None:
    """An operator's script retries a steer while the first try is still in flight, with
    the same ``correlation_id`` (what makes a retry safe), one try by ``curl``, the other by
    ``requests``, at the same moment. Exactly one is accepted and the other is answered
    ``duplicate``; the run's history holds the command once, applied once."""
    run = await served.start_run("acme")
    url = f"{served.url}{BASE}/runs/{run.run_id}/steer"
    body = {"message": "focus on billing", "correlation_id": "c-retried-once"}
    auth = served.as_("alice")["Authorization"]

    def by_curl() -> tuple[int, Any]:
        return _curl(
            "-X", "POST", url, "-H", f"Authorization: {auth}",
            "-H", "Content-Type: application/json", "--data-binary", json.dumps(body),
        )  # fmt: skip

    def by_requests() -> tuple[int, Any]:
        r = requests.post(url, json=body, headers={"Authorization": auth}, timeout=60)
        return r.status_code, r.json()

    answers = await asyncio.to_thread(_race, by_curl, by_requests)
    assert [status for status, _ in answers] == [200, 200], answers
    statuses = sorted(receipt["status"] for _, receipt in answers)
    assert statuses == ["accepted", "duplicate"], answers
    assert {receipt["correlation_id"] for _, receipt in answers} == {"c-retried-once"}

    async def applied() -> Any:
        history = await _history(served, run.run_id)
        steps = [e["type"] for e in history.get("c-retried-once", [])]
        return steps if steps and steps[-1] in TERMINAL else None

    steps = await eventually(applied)
    assert steps[-1] == "steering.applied", steps
    assert steps.count("steering.requested") == 1 and steps.count("steering.applied") == 1
    assert list(await _history(served, run.run_id)) == ["c-retried-once"]
    await run.cancel()


async def test_curl_steers_with_an_instruction_the_size_of_the_limit_and_not_a_byte_more(
    served: Served,
) -> None:
    """The payload limit counts its JSON's UTF-8 bytes: ``curl`` sends an instruction whose
    payload is exactly the limit (in two-byte characters, so characters would count half)
    and it is accepted; one byte more is refused with the receipt's reason, which says what
    to do, and changes nothing (its history: requested, then rejected)."""
    run = await served.start_run("acme", think_s=IDLE_S)
    url = f"{served.url}{BASE}/runs/{run.run_id}/steer"
    auth = served.as_("alice")["Authorization"]
    overhead = len(json.dumps({"text": ""}, separators=(",", ":")))
    room = DEFAULT_MAX_TEXT_BYTES - overhead  # bytes left for the text itself
    exact = "é" * (room // 2) + "x" * (room % 2)
    over = exact + "x"

    def send(text: str, cid: str) -> tuple[int, Any]:
        body = json.dumps({"message": text, "correlation_id": cid}, ensure_ascii=False)
        return _curl(
            "-X", "POST", url, "-H", f"Authorization: {auth}",
            "-H", "Content-Type: application/json; charset=utf-8", "--data-binary", body,
        )  # fmt: skip

    status, receipt = await asyncio.to_thread(send, over, "c-over")
    assert status == 200 and receipt["status"] == "rejected", receipt
    assert f"> {DEFAULT_MAX_TEXT_BYTES} bytes" in receipt["reason"], receipt
    assert "summary" in receipt["reason"], receipt
    status, receipt = await asyncio.to_thread(send, exact, "c-exact")
    assert status == 200 and receipt["status"] == "accepted", receipt
    history = await _history(served, run.run_id)
    assert [e["type"] for e in history["c-over"]] == ["steering.requested", "steering.rejected"]
    (kept,) = [c for c in served.runtime.open_commands() if c.correlation_id == "c-exact"]
    assert kept.payload["text"] == exact
    await run.cancel()


def _sse_ids(text: str, run_id: str) -> list[int]:
    """The ids of the SSE messages in ``text`` of ``run_id``'s events."""
    ids = []
    for block in text.split("\n\n"):
        fields = dict(line.partition(": ")[::2] for line in block.splitlines())
        if "id" in fields and json.loads(fields["data"]).get("run_id") == run_id:
            ids.append(int(fields["id"]))
    return ids


async def test_curl_reading_a_long_backlog_slowly_gets_all_of_it_while_runs_go_on(
    served: Served,
) -> None:
    """``curl --limit-rate`` reads a backlog of 1,500 padded events (far more than the
    sockets' buffers hold) at a few dozen KiB a second: the server waits on it (it holds no
    copy of the backlog in memory), and it gets every event once, in the log's order, without
    a gap. A run of the same tenant steps on meanwhile: a slow reader never stalls a run."""
    from tinyagents.events import RunEvent

    pad = "x" * 200
    events = [
        RunEvent(
            type="run.status",
            run_id="r-old",
            root_run_id="r-old",
            tenant_id="acme",
            detail={"pad": pad},
        )
        for _ in range(1500)
    ]
    await served.runtime.store.append_events(events)
    run = await served.start_run("acme", think_s=0.05)
    url = f"{served.url}{BASE}/events?follow=false"
    auth = served.as_("alice")["Authorization"]
    curl = await asyncio.create_subprocess_exec(
        "curl", "-sN", "--limit-rate", "60k", "-H", f"Authorization: {auth}", url,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert curl.stdout is not None
    first = await curl.stdout.readuntil(b"\nid: ")  # its events have begun
    calls_then = run.info.usage.model_calls
    rest, _ = await curl.communicate()
    assert curl.returncode == 0
    calls_after = run.info.usage.model_calls
    ids = _sse_ids((first + rest).decode(), "r-old")
    assert len(ids) == 1500 and ids == sorted(set(ids)), (len(ids), ids[:3], ids[-3:])
    assert ids[-1] - ids[0] == 1499  # the run's events were logged before it: no gap
    assert calls_after > calls_then, (calls_then, calls_after)
    await run.cancel()


async def test_curls_killed_mid_stream_give_their_places_back(served: Served) -> None:
    """Forty ``curl -N`` readers of the live stream, each killed (SIGKILL: no goodbye, the
    kernel closes the socket) while it reads, one user's, more than the 32 streams a user may
    hold: their places come back, and the user's next stream opens (not a 429 for good)."""
    run = await served.start_run("acme", think_s=0.05)
    url = f"{served.url}{BASE}/events?root_run_id={run.run_id}"
    auth = served.as_("alice")["Authorization"]
    for _ in range(40):
        curl = await asyncio.create_subprocess_exec(
            "curl", "-sN", "-H", f"Authorization: {auth}", url, stdout=asyncio.subprocess.PIPE
        )
        assert curl.stdout is not None
        await curl.stdout.readuntil(b"\nid: ")  # it reads the stream's events
        curl.kill()
        await curl.wait()

    async def opens() -> bool:
        async with served.client.stream(
            "GET", f"{BASE}/events", params={"follow": "false"}, headers=served.as_("alice")
        ) as r:
            return r.status_code == 200

    assert await eventually(opens)
    await run.cancel()


async def test_a_pause_and_a_resume_sent_at_once_leave_the_run_as_the_last_applied_says(
    served: Served,
) -> None:
    """Alice pauses a running run while a colleague resumes it, at the same moment, from
    two ``requests`` sessions, several times over. Each is accepted and each reaches its
    end; what the API then says of the run (paused or running) is what the last of them
    applied, by the run's own history, and a run left paused is resumed by one more."""
    served.mint("carol", tenant="acme", rights="agent:observe,agent:control")
    run = await served.start_run("acme", think_s=0.05)
    base = f"{served.url}{BASE}/runs/{run.run_id}"

    def post(who: str, what: str) -> Any:
        with requests.Session() as session:
            r = session.post(f"{base}/{what}", headers=served.as_(who), timeout=60)
        assert r.status_code == 200, r.text
        return r.json()

    for _ in range(5):
        pause, resume = await asyncio.to_thread(
            _race, lambda: post("alice", "pause"), lambda: post("carol", "resume")
        )
        assert pause["status"] == "accepted" and resume["status"] == "accepted"
        mine = {pause["correlation_id"]: "pause", resume["correlation_id"]: "resume"}

        async def ended(mine: dict[str, str] = mine) -> Any:
            history = await _history(served, run.run_id)
            ends = {cid: history.get(cid, [{}])[-1] for cid in mine}
            return ends if all(e.get("type") in TERMINAL for e in ends.values()) else None

        ends = await eventually(ended)
        applied = sorted(
            (end["id"], mine[cid]) for cid, end in ends.items() if end["type"] == "steering.applied"
        )
        assert applied, ends
        last = applied[-1][1]
        want = "paused" if last == "pause" else "running"

        async def settled(want: str = want) -> Any:
            r = await served.client.get(base.removeprefix(served.url), headers=served.as_("alice"))
            return r.json()["status"] == want

        assert await eventually(settled), (ends, want)
        if want == "paused":
            assert (await asyncio.to_thread(post, "alice", "resume"))["status"] == "accepted"
            await eventually(lambda: run.status.value == "running")
    await run.cancel()


async def test_two_cli_retries_of_one_steer_at_once_both_succeed_and_it_is_taken_once(
    served: Served,
) -> None:
    """Two shells run ``tinyagents runs steer --correlation-id`` for the same instruction at
    the same moment (a script's retry racing its first try): both exit 0 (a duplicate is a
    retry that worked), one prints ``accepted`` and the other ``duplicate``, and the run's
    history holds one command."""
    import os
    import sys
    from pathlib import Path

    run = await served.start_run("acme", think_s=IDLE_S)
    cli = str(Path(sys.executable).with_name("tinyagents"))
    env = {**os.environ, "TINYAGENTS_TOKEN": served.tokens["alice"]}
    argv = [cli, "runs", "steer", run.run_id, "check the invoice", "--url", served.url,
            "--correlation-id", "c-cli-retry", "--json"]  # fmt: skip
    shells = [
        await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        for _ in range(2)
    ]
    outputs = [await shell.communicate() for shell in shells]
    assert [shell.returncode for shell in shells] == [0, 0], outputs
    receipts = [json.loads(out) for out, _ in outputs]
    assert sorted(r["status"] for r in receipts) == ["accepted", "duplicate"], receipts
    assert list(await _history(served, run.run_id)) == ["c-cli-retry"]
    await run.cancel()
