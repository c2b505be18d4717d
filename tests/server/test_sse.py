"""``GET /api/agents/events`` over real HTTP: steering events arrive in order, as they happen,
and a client that reconnects with Last-Event-ID gets exactly what came after."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
from operator_server import BASE, IDLE_S, Served, _serve, eventually

from tinyagents import RunInfo
from tinyagents.errors import AuthError
from tinyagents.events import RunEvent
from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.server.sse import event_stream
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import FakeClock, use_clock


def parse(text: str) -> list[dict[str, Any]]:
    """SSE messages (those with an id) as {id, event, data}."""
    messages = []
    for block in text.split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
        if "id" in fields:
            messages.append(
                {
                    "id": int(fields["id"]),
                    "event": fields["event"],
                    "data": json.loads(fields["data"]),
                }
            )
    return messages


async def follow(
    client: httpx.AsyncClient, params: dict[str, Any], headers: dict[str, str], until: Any
) -> list[dict[str, Any]]:
    """Read a live stream until ``until(messages)`` holds, then hang up."""
    buffer, messages = "", []
    async with client.stream("GET", f"{BASE}/events", params=params, headers=headers) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        async for chunk in r.aiter_text():
            buffer += chunk
            done, _, buffer = buffer.rpartition("\n\n")
            if done:
                messages.extend(parse(done + "\n\n"))
                if until(messages):
                    return messages
    raise AssertionError(f"the stream ended early after {len(messages)} messages")


def applied(messages: list[dict[str, Any]], n: int) -> bool:
    return sum(m["event"] == "steering.applied" for m in messages) >= n


async def test_steering_events_stream_in_order_as_they_happen(served: Served) -> None:
    run = await served.start_run("acme")
    headers = served.as_("alice")

    async def steer_three() -> list[str]:
        ids = []
        for text in ("first", "second", "third"):
            r = await served.client.post(
                f"{BASE}/runs/{run.run_id}/steer", json={"message": text}, headers=headers
            )
            ids.append(r.json()["correlation_id"])
        return ids

    async with asyncio.TaskGroup() as group:
        reader = group.create_task(
            follow(served.client, {"run_id": run.run_id}, headers, lambda m: applied(m, 3))
        )
        await asyncio.sleep(0.1)  # the stream is open (it needs no wait to be correct)
        correlation_ids = await steer_three()
    messages = reader.result()

    ids = [m["id"] for m in messages]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(m["data"]["run_id"] == run.run_id for m in messages)
    assert all(m["event"] == m["data"]["type"] for m in messages)
    steering = [m for m in messages if m["event"].startswith("steering.")]
    for cid in correlation_ids:
        states = [m["event"] for m in steering if m["data"]["correlation_id"] == cid]
        assert states == [
            "steering.requested",
            "steering.accepted",
            "steering.delivered",
            "steering.applied",
        ]
    order = [m["data"]["correlation_id"] for m in steering if m["event"] == "steering.applied"]
    assert order == correlation_ids


async def test_a_reconnecting_client_resumes_after_its_last_event_id(served: Served) -> None:
    run = await served.start_run("acme")
    headers = served.as_("alice")
    for text in ("one", "two"):
        await served.client.post(
            f"{BASE}/runs/{run.run_id}/steer", json={"message": text}, headers=headers
        )

    async def backlog() -> list[dict[str, Any]] | None:
        r = await served.client.get(
            f"{BASE}/events", params={"run_id": run.run_id, "follow": "false"}, headers=headers
        )
        messages = parse(r.text)
        return messages if applied(messages, 2) else None

    everything = await eventually(backlog)
    # A live client that saw the first few events and hung up...
    first = await follow(served.client, {"run_id": run.run_id}, headers, lambda m: len(m) >= 4)
    seen = first[3]["id"]
    assert first[:4] == everything[:4]
    # ...comes back with Last-Event-ID and gets exactly the rest, in order, then new ones.
    rest_len = len(everything) - 4
    resumed = await follow(
        served.client,
        {"run_id": run.run_id},
        {**headers, "Last-Event-ID": str(seen)},
        lambda m: len(m) >= rest_len,
    )
    assert resumed[:rest_len] == everything[4:]
    assert all(m["id"] > seen for m in resumed)
    # The query parameter does the same (for clients that cannot set the header).
    r = await served.client.get(
        f"{BASE}/events",
        params={"run_id": run.run_id, "follow": "false", "last_event_id": seen},
        headers=headers,
    )
    assert parse(r.text)[:rest_len] == everything[4:]


async def test_an_eventsource_reconnecting_to_a_url_with_last_event_id_goes_on_from_its_header(
    served: Served,
) -> None:
    """A stream opened with ``?last_event_id=N`` (the console reopens a closed stream so)
    that an ``EventSource`` reconnects sends the same URL and ``Last-Event-ID: M``, the last
    id it saw since (M > N). The query won: each reconnect replayed every event after N
    again, more at each one. The later of the two ids is where the stream resumes."""
    run = await served.start_run("acme")
    headers = served.as_("alice")

    async def backlog() -> list[dict[str, Any]] | None:
        r = await served.client.get(
            f"{BASE}/events", params={"run_id": run.run_id, "follow": "false"}, headers=headers
        )
        messages = [m for m in parse(r.text) if "id" in m]
        return messages if len(messages) >= 6 else None

    everything = await eventually(backlog)
    n, m = everything[1]["id"], everything[4]["id"]
    for query, header in ((n, m), (m, n)):
        r = await served.client.get(
            f"{BASE}/events",
            params={"run_id": run.run_id, "follow": "false", "last_event_id": query},
            headers={**headers, "Last-Event-ID": str(header)},
        )
        assert r.status_code == 200, r.text
        resumed = [x for x in parse(r.text) if "id" in x]
        assert resumed and resumed[0]["id"] == everything[5]["id"], (query, header)
        assert all(x["id"] > m for x in resumed)


async def test_the_stream_takes_the_token_from_the_query_and_keeps_tenants_apart(
    served: Served,
) -> None:
    acme = await served.start_run("acme")
    globex = await served.start_run("globex")

    async def both_started() -> bool:
        r = await served.client.get(
            f"{BASE}/events", params={"follow": "false", "access_token": served.tokens["root"]}
        )
        runs = {m["data"]["run_id"] for m in parse(r.text)}
        return {acme.run_id, globex.run_id} <= runs

    await eventually(both_started)  # the admin sees both tenants
    r = await served.client.get(
        f"{BASE}/events", params={"follow": "false", "access_token": served.tokens["alice"]}
    )
    messages = parse(r.text)
    assert messages and {m["data"]["tenant_id"] for m in messages} == {"acme"}
    r = await served.client.get(f"{BASE}/events", params={"follow": "false"})
    assert r.status_code == 401


async def _read_to_the_end(
    served: Served, params: dict[str, Any], mint: Callable[[], str]
) -> tuple[str, str]:
    """A token from ``mint`` and its whole stream, until the server ends it (bounded: a
    stream that outlived its token would run until the timeout). A short-lived token a
    loaded machine let expire before the stream opened (a 401 past its expiry) is minted
    again: the stream of a token that held when it opened is what is tested."""

    async def read(token: str) -> tuple[int, str]:
        text = ""
        async with served.client.stream(
            "GET", f"{BASE}/events", params=params, headers=served.as_(token)
        ) as r:
            async for chunk in r.aiter_text():
                text += chunk
            return r.status_code, text

    for _ in range(5):
        token = mint()
        try:
            expires_at = served.auth.authenticate(token).expires_at
        except AuthError:  # expired already
            continue
        assert expires_at is not None
        status, text = await asyncio.wait_for(read(token), 60)
        if status == 200:
            return token, text
        assert status == 401 and datetime.now(UTC) >= expires_at, (status, text)
    raise AssertionError("every token expired before its stream opened")


async def test_a_stream_ends_when_its_token_expires(served: Served) -> None:
    """The token is asked again while the stream is open: once it expired, an ``expired``
    message ends the stream, and the browser's reconnect is a 401."""
    run = await served.start_run("acme")
    # minted after the run's start, which took of its 2 s before the stream was opened
    token, text = await _read_to_the_end(
        served,
        {"follow": "true"},
        lambda: served.auth.mint(user="eve", tenant="acme", rights=["agent:observe"], ttl_s=2),
    )
    assert "event: expired" in text and "mint a new one" in text
    again = await served.client.get(
        f"{BASE}/events", params={"follow": "false"}, headers=served.as_(token)
    )
    assert again.status_code == 401
    del run


@pytest.mark.parametrize("narrowing", ["observe_only", "run_scoped", "ttl_only"])
async def test_a_stream_ends_when_an_attenuated_lifetime_ends(
    served: Served, narrowing: str
) -> None:
    """A lifetime an attenuation added ends the stream as a minted one does (the stream of
    an observe-only or run-scoped token stayed open and silent past it)."""
    run = await served.start_run("acme")
    kwargs: dict[str, Any] = {"ttl_s": 2}
    if narrowing == "observe_only":
        kwargs["observe_only"] = True
    elif narrowing == "run_scoped":
        kwargs["run_id"] = run.run_id
    _, text = await _read_to_the_end(
        served, {"follow": "true"}, lambda: served.auth.attenuate(served.tokens["alice"], **kwargs)
    )
    assert "event: expired" in text and "mint a new one" in text


async def test_a_run_scoped_stream_shows_nothing_once_its_token_expired(served: Served) -> None:
    """A token narrowed to one run (and given a lifetime) sees that run's events while it
    holds, and none that are logged after it expired."""
    run = await served.start_run("acme")
    scoped = served.auth.attenuate(served.tokens["alice"], run_id=run.run_id, ttl_s=2)
    headers = served.as_(scoped)
    seen: list[dict[str, Any]] = []
    buffer = ""
    async with served.client.stream(
        "GET", f"{BASE}/events", params={"follow": "true"}, headers=headers
    ) as r:
        assert r.status_code == 200

        async def read() -> None:
            nonlocal buffer
            async for chunk in r.aiter_text():
                buffer += chunk
                done, _, buffer = buffer.rpartition("\n\n")
                if done:
                    seen.extend(parse(done + "\n\n"))

        reader = asyncio.create_task(read())
        await eventually(lambda: len(seen) > 0)
        # past the token's lifetime (2 s, rounded up to a whole second: at most 3 s after
        # it was minted, before the stream opened) and one more recheck (every second);
        # 3.5 s left half a second for a recheck late on a loaded machine
        await asyncio.sleep(4.5)
        count = len(seen)
        steer = {"message": "after expiry"}
        ok = await served.client.post(
            f"{BASE}/runs/{run.run_id}/steer", json=steer, headers=served.as_("alice")
        )
        assert ok.status_code == 200
        await asyncio.sleep(1.5)  # the stream polls every 50 ms: it had time to show them
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    assert len(seen) == count  # nothing logged after the expiry was shown


async def test_a_client_that_hangs_up_stops_its_stream(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    """A client gone in the middle of a long backlog stops the stream: the server neither
    goes on reading the log for nobody nor writes into the closed socket (asyncio logs
    "socket.send() raised exception." for each write)."""
    big = "x" * 2000  # a backlog far larger than the socket buffers
    events = [
        RunEvent(type="run.status", run_id="r-big", tenant_id="acme", detail={"pad": big})
        for _ in range(6000)
    ]
    await served.runtime.store.append_events(events)
    reads = 0
    read_events = served.control.read_events

    async def counted(**kw: Any) -> Any:
        nonlocal reads
        reads += 1
        return await read_events(**kw)

    served.control.read_events = counted  # type: ignore[method-assign]
    caplog.set_level(logging.WARNING)
    async with served.client.stream("GET", f"{BASE}/events", headers=served.as_("alice")) as r:
        async for _chunk in r.aiter_bytes():
            break  # hang up after the first bytes
    await asyncio.sleep(1.5)
    assert reads < 12, reads  # 12 batches of 500 is the whole backlog
    assert not [rec for rec in caplog.records if "socket.send()" in rec.getMessage()]


async def test_the_backlog_is_not_read_on_for_a_client_that_is_gone(served: Served) -> None:
    """The stream asks whether its client is still there between batches of the backlog,
    not only once it caught up: a console closed during a long replay stops the reading."""
    await served.runtime.store.append_events(
        [RunEvent(type="run.status", run_id="r-big", tenant_id="acme") for _ in range(6000)]
    )

    class Hangs:
        gone = False

        async def is_disconnected(self) -> bool:
            return self.gone

    request, sent = Hangs(), 0
    async for message in event_stream(served.control, request, tenant_id="acme"):
        sent += message.startswith("id: ")
        if sent == 10:
            request.gone = True
    assert sent < 1000, sent  # at most the batch it was in (500), not the 6000


async def test_a_streams_token_is_asked_again_by_the_clock_not_by_its_polls(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token's lifetime was asked again once the stream had slept ``recheck_s`` in its
    polls (20 polls of 50 ms), whatever each poll's read of the log took: on a loaded
    machine, or with a slow store, a stream outlived its token by many seconds, and showed
    what was logged after it expired. It is asked every ``recheck_s`` of the clock."""
    clock = FakeClock()
    reads = 0
    read_events = served.control.read_events

    async def slow_read(**kw: Any) -> Any:  # each read of the log takes 0.375 s
        nonlocal reads
        reads += 1
        clock.advance(0.375)
        return await read_events(**kw)

    monkeypatch.setattr(served.control, "read_events", slow_read)

    class Stays:
        async def is_disconnected(self) -> bool:
            return False

    asked: list[int] = []

    def valid() -> bool:  # the token expires after its second recheck
        asked.append(reads)
        return len(asked) < 3

    messages = []
    with use_clock(clock):
        async with asyncio.timeout(60):  # a guard against a hang, not a timing
            async for message in event_stream(
                served.control, Stays(), tenant_id="acme", valid=valid, recheck_s=1.0
            ):
                messages.append(message)
    assert messages[-1].startswith("event: expired")
    # asked at 1.125, 2.25 and 3 s of the clock: on the beat of a second (not a second
    # after the last ask, late by a read: 9 reads), not after 20 polls (7.5 s of reads)
    assert asked == [3, 6, 8]


async def test_a_narrowed_stream_shows_a_run_another_process_has_not_listed_yet(
    served: Served,
) -> None:
    """Another process logs a new run's events (every 50 ms) before its snapshot (every
    100 ms tick): a token narrowed to the tree asked whether that run is in it, found no
    snapshot, and left its first events out of the stream for good."""
    root = await served.start_run("acme")
    scoped = served.auth.attenuate(served.tokens["alice"], run_id=root.run_id)
    served.control.listing_wait_s = 30.0  # a bound on the wait, not a timing
    store = served.runtime.store
    elsewhere = RunInfo(
        run_id="r-elsewhere",
        root_run_id=root.run_id,
        parent_run_id=root.run_id,
        tenant_id="acme",
        depth=1,
    )
    await store.append_events(
        [
            RunEvent(
                type="run.started",
                run_id=elsewhere.run_id,
                root_run_id=root.run_id,
                parent_run_id=root.run_id,
                tenant_id="acme",
            )
        ]
    )
    ((logged, _),) = await served.control.read_events(tenant_id="acme", run_id="r-elsewhere")
    seen: list[dict[str, Any]] = []
    buffer = ""
    async with served.client.stream(
        "GET", f"{BASE}/events", params={"root_run_id": root.run_id}, headers=served.as_(scoped)
    ) as r:
        assert r.status_code == 200

        async def read() -> None:
            nonlocal buffer
            async for chunk in r.aiter_text():
                buffer += chunk
                done, _, buffer = buffer.rpartition("\n\n")
                if done:
                    seen.extend(parse(done + "\n\n"))

        reader = asyncio.create_task(read())
        try:
            # past the run's event (it was left out) or held at it (looked for): either way,
            # its owner lists it now, as its next tick would
            with contextlib.suppress(TimeoutError):
                await eventually(lambda: any(m["id"] > logged for m in seen), timeout_s=1.0)
            await store.save_runs([elsewhere.snapshot()])
            await eventually(lambda: any(m["id"] > logged for m in seen))
        finally:
            reader.cancel()
    assert [m["id"] for m in seen if m["data"]["run_id"] == "r-elsewhere"] == [logged]


async def test_a_narrowed_stream_reads_its_tree_not_the_tenants_log(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token narrowed to a run read the tenant's whole log and asked of each other run
    whether it lies in its subtree: each such run, found but not its to see, was answered
    after the listing wait an unknown id takes (1.1 s by default), so a tenant of many runs
    held the stream for minutes. Every run it may see is in its run's tree: that tree's
    events are read."""
    root = await served.start_run("acme")
    child = await served.start_run("acme", parent=root)
    scoped = served.auth.attenuate(served.tokens["alice"], run_id=child.run_id)
    others = [await served.start_run("acme") for _ in range(3)]
    for run in (root, child, *others):
        await run.cancel()
        await run.result()
    served.control.listing_wait_s = 30.0  # each other run read would hold the stream this long
    store = served.runtime.store
    asked: list[dict[str, Any]] = []
    reading = store.read_events

    async def read_events(**kw: Any) -> Any:
        asked.append(kw)
        return await reading(**kw)

    monkeypatch.setattr(store, "read_events", read_events)

    async def logged() -> bool:
        rows = await served.control.read_events(tenant_id="acme")
        return {e["run_id"] for _, e in rows if e["type"] == "run.cancelled"} >= {
            r.run_id for r in (root, child, *others)
        }

    await eventually(logged)
    asked.clear()
    async with asyncio.timeout(60):  # a bound on a hang, not a timing
        r = await served.client.get(
            f"{BASE}/events", params={"follow": "false"}, headers=served.as_(scoped)
        )
    assert r.status_code == 200
    shown = parse(r.text)
    assert shown and {m["data"]["run_id"] for m in shown} == {child.run_id}
    assert "event: run.cancelled" in r.text
    assert asked and all(a["root_run_id"] == root.run_id for a in asked), asked


class Refund(TypedDict, total=False):
    amount: str
    answer: Any


def ask(state: Refund) -> Refund:
    return {"answer": interrupt(f"refund {state['amount']}?")}


@pytest.mark.parametrize("who", ["alice", "narrowed to the entry"])
async def test_a_graph_tasks_entry_streams_the_steering_of_its_commands(
    served: Served, who: str
) -> None:
    # a command sent to a task's own entry (gt-..., the row `runs list` shows interrupted) is
    # taken by its graph run, and its steering events were filed under the graph run only:
    # a client following the entry's stream never saw its command accepted or applied
    graph = StateGraph(Refund).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    run = await served.runtime.start_graph(
        compiled, {"amount": "12 EUR"}, thread_id="refund-sse", tenant_id="acme"
    )

    async def waiting() -> Any:
        kids = served.runtime.runs.tree.children(run.run_id)
        return kids[0] if kids and kids[0].status.value == "interrupted" else None

    entry = await eventually(waiting)
    (pending,) = (
        await served.client.get(f"{BASE}/runs/{entry.run_id}", headers=served.as_("alice"))
    ).json()["interrupts"]
    token = served.tokens["alice"]
    if who != "alice":
        token = served.auth.attenuate(token, run_id=entry.run_id)
    headers = served.as_(token)

    async def answer() -> str:
        path = f"{BASE}/runs/{entry.run_id}/tasks/{entry.task_id}/commands"
        body = {"kind": "approve", "payload": {"interrupt_id": pending["id"], "value": "yes"}}
        r = await served.client.post(path, json=body, headers=headers)
        assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
        return str(r.json()["correlation_id"])

    def steering(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [
            (m["event"], m["data"]["correlation_id"])
            for m in messages
            if m["event"].startswith("steering.")
        ]

    async with asyncio.TaskGroup() as group:
        reader = group.create_task(
            asyncio.wait_for(  # a failsafe only
                follow(
                    served.client,
                    {"run_id": entry.run_id},
                    headers,
                    lambda m: "steering.applied" in {e for e, _ in steering(m)},
                ),
                20,
            )
        )
        correlation_id = await answer()
    seen = steering(reader.result())
    assert ("steering.accepted", correlation_id) in seen
    assert ("steering.applied", correlation_id) in seen
    assert {c for _, c in seen} == {correlation_id}  # the graph run's other commands: none
    assert (await run.result()).status.value == "completed"


@pytest.mark.parametrize("store", ["sqlite", None])
async def test_a_last_event_id_this_log_never_gave_replays_the_log_not_silence(
    tmp_path: Path, store: str | None
) -> None:
    """A client that reconnects with an id of another log (the server restarted without a
    store and counts from 1 again; the store file was replaced) was sent nothing, and then
    only the events past that id: silence for as long as the new log takes to get there,
    every event before it never shown. An id past the newest event of the caller's tenant
    is one this log never gave it: the stream starts from the beginning. Another tenant's
    ids do not count (they would say how much it logs)."""
    url = f"sqlite:///{tmp_path / 'runs.db'}" if store else None
    async for s in _serve(tmp_path, store=url):
        await _replays_from_the_start(s)


async def _replays_from_the_start(s: Served) -> None:
    headers = s.as_("alice")
    run = await s.start_run("acme")
    await s.client.post(
        f"{BASE}/runs/{run.run_id}/steer", json={"message": "finish"}, headers=headers
    )
    async with asyncio.timeout(60):
        await run.result()
    await s.start_run("globex")  # logs on, after acme's last event

    async def backlog(last: int | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"follow": "false"}
        if last is not None:
            params["last_event_id"] = last
        r = await s.client.get(f"{BASE}/events", params=params, headers=headers)
        assert r.status_code == 200, r.text
        return parse(r.text)

    async def logged() -> list[dict[str, Any]] | None:
        messages = await backlog()  # the store's log is written a moment after the run
        return messages if messages[-1:] and messages[-1]["event"] == "run.completed" else None

    everything = await eventually(logged)
    assert {m["data"]["run_id"] for m in everything} == {run.run_id}
    newest = everything[-1]["id"]

    async def globex_past_acme() -> int | None:
        r = await s.client.get(f"{BASE}/events", params={"follow": "false"}, headers=bob)
        ids = [m["id"] for m in parse(r.text)]
        return max(ids) if ids and max(ids) > newest else None

    bob = s.as_("bob")
    beyond = await eventually(globex_past_acme)
    assert beyond > newest
    assert await backlog(newest) == []  # caught up: nothing again
    assert await backlog(newest - 1) == everything[-1:]
    for last in (newest + 1, beyond, 10**12):
        assert await backlog(last) == everything, last


def opening(text: str) -> dict[str, Any]:
    """The data of a stream's ``event: stream`` message (it has no id: ``parse`` skips it)."""
    for block in text.split("\n\n"):
        if "event: stream\n" in f"{block}\n":
            data = block.split("data: ", 1)[1]
            return dict(json.loads(data))
    raise AssertionError(f"no stream message in {text[:300]!r}")


@pytest.mark.parametrize("store", ["sqlite", None])
async def test_a_stream_names_its_log_and_where_it_resumes(
    tmp_path: Path, store: str | None
) -> None:
    """A server without a store counts event ids from 1 again after a restart: a client that
    kept the highest id it saw (the console) could not tell that the ids it gets now are of
    another log, and ignored them. Each stream now opens with an ``event: stream`` message
    naming the log (another after such a restart; the same over one store file) and the id it
    resumes after (0 when the client's id is none this log gave)."""
    url = f"sqlite:///{tmp_path / 'runs.db'}" if store else None
    logs = []
    for _ in range(2):  # the same server, restarted
        async for s in _serve(tmp_path, store=url):
            headers = s.as_("alice")
            run = await s.start_run("acme")
            await s.client.post(
                f"{BASE}/runs/{run.run_id}/steer", json={"message": "finish"}, headers=headers
            )
            async with asyncio.timeout(60):
                await run.result()

            async def read(last: int | None = None, *, s: Served = s) -> str:
                params: dict[str, Any] = {"follow": "false"}
                if last is not None:
                    params["last_event_id"] = last
                r = await s.client.get(f"{BASE}/events", params=params, headers=s.as_("alice"))
                assert r.status_code == 200, r.text
                return r.text

            async def logged(read: Any = read) -> str | None:
                text = str(await read())  # (the store's log is written a moment after)
                return text if any(m["event"] == "run.completed" for m in parse(text)) else None

            newest = await eventually(logged)
            ids = [m["id"] for m in parse(newest)]
            first = opening(newest)
            assert first["after"] == 0
            assert opening(await read(ids[0]))["after"] == ids[0]
            assert opening(await read(ids[-1] + 10**6))["after"] == 0  # none this log gave
            assert opening(await read(ids[0]))["log"] == first["log"]
            logs.append(first["log"])
    assert isinstance(logs[0], str) and logs[0]
    assert (logs[0] == logs[1]) == (store is not None), logs


async def test_a_store_files_log_is_named_by_the_file_not_by_how_its_path_was_spelt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log's name was a hash of the store URL as given: the same SQLite file served as
    ``sqlite:///runs.db`` and as its absolute path (a restart from a script, another cwd)
    was two logs to a client (the console dropped its timeline and read it all again), and
    ``sqlite:///runs.db`` in two directories (two files, two logs) was one, so a client kept
    its ids of one and skipped events of the other. The name is now the resolved file's."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")

    async def log_of(url: str) -> str:
        async with contextlib.aclosing(_serve(tmp_path, store=url)) as serving:
            async for s in serving:
                r = await s.client.get(
                    f"{BASE}/events", params={"follow": "false"}, headers=s.as_("alice")
                )
                assert r.status_code == 200, r.text
                return str(opening(r.text)["log"])
        raise AssertionError("not served")

    monkeypatch.chdir(tmp_path / "a")
    relative = await log_of("sqlite:///runs.db")
    assert await log_of("sqlite:///./runs.db") == relative
    assert await log_of(f"sqlite:///{tmp_path / 'a' / 'runs.db'}") == relative
    assert await log_of(f"sqlite:///{tmp_path / 'link' / 'runs.db'}") == relative
    monkeypatch.chdir(tmp_path)
    assert await log_of("sqlite:///a/runs.db") == relative
    assert await log_of("sqlite:///b/runs.db") != relative
    monkeypatch.chdir(tmp_path / "b")
    assert await log_of("sqlite:///runs.db") != relative
    # a database in memory is a new one each time, its ids from 1 again: a new name
    assert await log_of("sqlite:///:memory:") != await log_of("sqlite:///:memory:")


def _no_constant(name: str) -> Any:
    raise AssertionError(f"{name} is not JSON")


@pytest.mark.parametrize("store", [None, "memory://", "sqlite"])
async def test_nan_and_infinity_read_the_same_in_the_trace_the_stream_and_the_store(
    tmp_path: Path, store: str | None
) -> None:
    """JSON has no NaN or infinity. A ``float`` field holding one was sent on the stream as
    the bare token ``NaN`` (which ``JSON.parse`` refuses: the console's stream broke), a dict
    value as ``null``; the trace said ``null`` for both, and a SQLite store wrote ``null``,
    which made a ``limit.warning`` unreadable (left out of the log). Each is the string
    pydantic writes ("NaN", "Infinity", "-Infinity"), the same from every store."""
    from tinyagents.events import LimitEvent, ModelEvent

    url = f"sqlite:///{tmp_path / 'runs.db'}" if store == "sqlite" else store
    async for s in _serve(tmp_path, store=url):
        run = await s.start_run("acme")
        nan, inf = float("nan"), float("inf")
        tree = {"run_id": run.run_id, "root_run_id": run.run_id, "tenant_id": "acme"}
        s.runtime.bus.publish(
            LimitEvent(type="limit.warning", limit="cost", used=nan, allowed=-inf, **tree)
        )
        s.runtime.bus.publish(
            ModelEvent(
                type="model.response", request_id="odd", usage={"cost": nan, "n": [inf]}, **tree
            )
        )
        await run.cancel("done")

        frames = await eventually(lambda s=s, run=run: _odd_frames(s, run.run_id))
        r = await s.client.get(
            f"{BASE}/events",
            params={"run_id": run.run_id, "follow": "false"},
            headers=s.as_("alice"),
        )
        streamed = []
        for block in r.text.split("\n\n"):
            data = next((x[6:] for x in block.splitlines() if x.startswith("data: ")), None)
            if data is not None and ("limit.warning" in data or '"odd"' in data):
                streamed.append(json.loads(data, parse_constant=_no_constant))
        assert streamed == frames_without_id(frames)
        limit, model = frames
        assert (limit["used"], limit["allowed"]) == ("NaN", "-Infinity")
        assert model["usage"] == {"cost": "NaN", "n": ["Infinity"]}


async def _odd_frames(s: Served, run_id: str) -> list[dict[str, Any]] | None:
    """The trace's two odd frames of that test, read as strict JSON (None until both are)."""
    r = await s.client.get(f"{BASE}/runs/{run_id}/trace", headers=s.as_("alice"))
    assert r.status_code == 200, r.text
    frames = json.loads(r.text, parse_constant=_no_constant)
    odd = [f for f in frames if f["type"] == "limit.warning" or f.get("request_id") == "odd"]
    return odd if len(odd) == 2 else None


def frames_without_id(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in f.items() if k != "id"} for f in frames]


async def test_a_client_that_stops_reading_holds_the_stream_back_not_the_servers_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that opens the stream and never reads: the server does not read the log on
    into a buffer of its own. Its writes wait once the connection's buffers are full (the
    transport's flow control), so the stream stops reading the log with most of a 40 MB
    backlog unread, and sends all of it, in order, once the client reads."""
    async for s in _serve(tmp_path, store=None):
        await _read_by_a_client_that_stops(s, monkeypatch)


async def _read_by_a_client_that_stops(s: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyagents.events import ModelEvent

    count = 5000
    run = await s.start_run("acme")
    await run.cancel("done")
    await run.result()
    tree = {"run_id": run.run_id, "root_run_id": run.run_id, "tenant_id": "acme"}
    for i in range(count):  # 8 KB each, 40 MB: far past what a connection's buffers hold
        s.runtime.bus.publish(
            ModelEvent(type="model.response", request_id=f"q{i}", text_summary="x" * 8000, **tree)
        )
    reading, read = s.control.read_events, [0]

    async def read_events(**kw: Any) -> Any:
        rows = await reading(**kw)
        read[0] += len(rows)
        return rows

    monkeypatch.setattr(s.control, "read_events", read_events)
    loop = asyncio.get_running_loop()
    host, port = s.url.removeprefix("http://").split(":")
    with socket.socket() as sock:
        sock.setblocking(False)
        await loop.sock_connect(sock, (host, int(port)))
        await loop.sock_sendall(
            sock,
            f"GET {BASE}/events?run_id={run.run_id}&follow=false&access_token="
            f"{s.tokens['alice']} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(),
        )
        seen = [-1]

        async def settled() -> bool:  # the stream reads the log until its writes wait
            await asyncio.sleep(0.2)
            still = read[0] == seen[0] and read[0] > 0
            seen[0] = read[0]
            return still

        await eventually(settled, timeout_s=60)
        assert read[0] < count / 2, f"{read[0]} of {count} events read for a client not reading"

        # the client reads: every event arrives, in order, and the stream ends
        received = bytearray()
        async with asyncio.timeout(60):  # a bound on a hang, not a timing
            while chunk := await loop.sock_recv(sock, 1 << 20):
                received += chunk
    _, _, body = bytes(received).partition(b"\r\n\r\n")
    shown = [m["data"].get("request_id", "") for m in parse(_unchunked(body).decode())]
    assert [q for q in shown if q.startswith("q")] == [f"q{i}" for i in range(count)]
    assert read[0] >= count


def _unchunked(body: bytes) -> bytes:
    """An HTTP/1.1 chunked body, joined."""
    out, at = bytearray(), 0
    while at < len(body):
        end = body.index(b"\r\n", at)
        size = int(body[at:end], 16)
        if size == 0:
            break
        out += body[end + 2 : end + 2 + size]
        at = end + 4 + size
    return bytes(out)


class _Stays:
    async def is_disconnected(self) -> bool:
        return False


async def _until_keepalive(served: Served, clock: FakeClock, **kw: Any) -> float:
    """Read ``event_stream`` (under ``clock``) until its first keep-alive comment; the clock
    then. Every message ends in a blank line."""
    with use_clock(clock):
        async with asyncio.timeout(60):  # a guard against a hang, not a timing
            async for message in event_stream(
                served.control, _Stays(), tenant_id="acme", poll_s=0.001, keepalive_s=15, **kw
            ):
                assert message.endswith("\n\n"), message
                if message == ": keep-alive\n\n":
                    return clock.monotonic()
    raise AssertionError("the stream ended")


async def test_a_keep_alive_is_sent_by_the_clock_not_by_the_polls_sleeps(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keep-alive comment was sent once the polls had slept ``keepalive_s`` (300 polls of
    50 ms), whatever each poll's read of the log took: with a slow store (a read of 0.5 s)
    a quiet stream sent nothing for 165 s, and a proxy in front (nginx: 60 s) cut it. It
    is sent once ``keepalive_s`` of the clock passed with nothing sent."""
    clock = FakeClock()
    read_events = served.control.read_events

    async def slow_read(**kw: Any) -> Any:
        clock.advance(0.5)
        return await read_events(**kw)

    monkeypatch.setattr(served.control, "read_events", slow_read)
    assert 15 <= await _until_keepalive(served, clock) <= 16


async def test_a_keep_alive_is_sent_while_the_events_read_are_none_the_client_may_see(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events read but not shown (another run of the tree a narrowed token reads, a graph
    run's own events on its task's entry stream) counted as sending something: while they
    were logged, such a client got no byte at all, not even a keep-alive, and a proxy in
    front cut the stream as idle."""
    clock = FakeClock()
    last = 0

    async def busy_log(**kw: Any) -> Any:  # a new event of another run at every read
        nonlocal last
        clock.advance(0.5)
        last += 1
        return [(last, {"type": "run.started", "run_id": "someone-else"})]

    monkeypatch.setattr(served.control, "read_events", busy_log)

    async def hidden(run_id: str | None) -> bool:
        return False

    assert 15 <= await _until_keepalive(served, clock, visible=hidden) <= 16


def closing(text: str, event: str) -> dict[str, Any]:
    """The data of the id-less ``event`` message (``expired``, ``unavailable``) that ends a
    stream (``parse`` skips it: it has no id)."""
    for block in text.split("\n\n"):
        if f"event: {event}\n" in f"{block}\n":
            return dict(json.loads(block.split("data: ", 1)[1]))
    raise AssertionError(f"no {event} message in {text[-300:]!r}")


async def test_the_messages_that_end_a_stream_name_their_type_as_every_other_does(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every message's data names its ``type`` (the SSE event's name): ``stream`` and the
    events do; ``expired`` and ``unavailable`` said only ``detail``, so a client that reads
    the data (``onmessage``, a log of them) could not tell why its stream ended."""
    from tinyagents.errors import StoreError

    await served.start_run("acme", think_s=IDLE_S)
    _, text = await _read_to_the_end(
        served,
        {"follow": "true"},
        lambda: served.auth.mint(user="eve", tenant="acme", rights=["agent:observe"], ttl_s=2),
    )
    said = closing(text, "expired")
    assert said["type"] == "expired" and "mint a new one" in said["detail"], said

    async def store_down(**kw: Any) -> Any:
        raise StoreError("the disk is gone")

    monkeypatch.setattr(served.control, "read_events", store_down)
    r = await served.client.get(
        f"{BASE}/events", params={"follow": "false"}, headers=served.as_("alice")
    )
    said = closing(r.text, "unavailable")
    assert said["type"] == "unavailable" and "the disk is gone" in said["detail"], said
