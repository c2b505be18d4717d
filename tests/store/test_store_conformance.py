"""The ``Store`` contract: every backend in ``conftest.BACKENDS`` must pass all of this."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tinyagents.errors import StoreError
from tinyagents.events import (
    Event,
    GraphEvent,
    LimitEvent,
    ModelEvent,
    RunEvent,
    SteeringEvent,
)
from tinyagents.harness.pausing import PAUSE_SUBTREE, passed_down_by
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringPolicyRef,
    SteeringTarget,
)
from tinyagents.runs import RunInfo, RunStatus
from tinyagents.store import Store
from tinyagents.store.base import NONCE_MARGIN_S
from tinyagents.store.memory import UsedNonces
from tinyagents.testkit import EPOCH, FakeClock, use_clock

ACTOR = SteeringActor.middleware("ops")  # in-process: the empty dedup scope


def command(cid: str, *, at: int = 0, text: str = "focus", run_id: str = "r-1") -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=ACTOR,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": text},
        correlation_id=cid,
        created_at=EPOCH + timedelta(seconds=at),
    )


def steering_event(
    type_: str, cid: str, *, run_id: str = "r-1", root: str = "root", **kw: Any
) -> SteeringEvent:
    cmd = command(cid, run_id=run_id)
    return SteeringEvent(
        type=type_,  # type: ignore[arg-type]
        run_id=run_id,
        root_run_id=root,
        target=cmd.target,
        actor=cmd.actor,
        kind=cmd.kind,
        correlation_id=cid,
        payload_summary={"text": "focus"},
        at=EPOCH,
        **kw,
    )


def sample_events() -> list[Event]:
    return [
        RunEvent(type="run.started", run_id="root", root_run_id="root", agent_id="a", at=EPOCH),
        steering_event("steering.requested", "c-1", run_id="r-1"),
        steering_event("steering.accepted", "c-1", run_id="r-1", policy_id="default"),
        ModelEvent(
            type="model.request", run_id="r-1", root_run_id="root", request_id="m-1", at=EPOCH
        ),
        GraphEvent(
            type="graph.task_started", run_id="g-1", root_run_id="g-1", task_id="t", at=EPOCH
        ),
        steering_event("steering.requested", "c-2", run_id="r-2", root="other"),
        steering_event("steering.rejected", "c-2", run_id="r-2", root="other", reason="no"),
        GraphEvent(type="graph.step", run_id="g-1", root_run_id="g-1", step=1, at=EPOCH),
    ]


def dumped(events: list[Event]) -> list[dict[str, Any]]:
    return [e.to_dict(mode="json") for e in events]


# --------------------------------------------------------------------------- steering log


async def test_appended_command_reads_back(store: Store) -> None:
    cmd = command("c-1")
    await store.append_command(cmd, state="accepted", run_id="r-1")
    stored = await store.get_command("c-1")
    assert stored is not None
    assert stored.command == cmd
    assert (stored.state, stored.run_id, stored.reason) == ("accepted", "r-1", None)


async def test_a_pause_passed_down_reads_back_marked_as_passed_down(store: Store) -> None:
    """A restarted run tells a hold a run above passed down from a pause of its own by the
    command's actor and ``policy_ref`` (``pausing.passed_down_by``): both are logged and read
    back, on every store; a parent agent's own pause, whatever its reason says, is not."""
    parent = SteeringActor.parent_agent("p-1", "planner")
    held = SteeringCommand(
        target=SteeringTarget.agent_run("c-1"),
        actor=parent,
        kind=SteeringKind.PAUSE,
        payload={"reason": 'parent run p-1 was paused by human "alice" (command c-9)'},
        policy_ref=SteeringPolicyRef(policy_id=PAUSE_SUBTREE),
        correlation_id="c-held",
    )
    own = SteeringCommand(
        target=SteeringTarget.agent_run("c-1"),
        actor=parent,
        kind=SteeringKind.PAUSE,
        payload={"reason": "parent run p-1 wants the draft checked"},
        correlation_id="c-own",
    )
    for cmd in (held, own):
        await store.append_command(cmd, state="applied", run_id="c-1")
    logged_held, logged_own = await store.get_command("c-held"), await store.get_command("c-own")
    assert logged_held is not None and logged_own is not None
    assert logged_held.command == held and logged_own.command == own
    assert passed_down_by(logged_held.command) == "p-1"
    assert passed_down_by(logged_own.command) is None


async def test_unknown_command_is_none(store: Store) -> None:
    assert await store.get_command("nope") is None


async def test_appending_a_logged_id_again_changes_nothing(store: Store) -> None:
    assert await store.append_command(command("c-1", text="first"), state="accepted", run_id="r-1")
    again = command("c-1", text="second")
    assert not await store.append_command(again, state="rejected", run_id="r-9")
    stored = await store.get_command("c-1")
    assert stored is not None
    assert (stored.state, stored.run_id) == ("accepted", "r-1")
    assert stored.command.payload == {"text": "first"}
    assert await store.command_ids() == {"c-1"}


async def test_update_moves_a_command_on_and_keeps_its_place(store: Store) -> None:
    await store.append_command(command("c-1", text="first"), state="deferred", run_id=None)
    await store.append_command(command("c-2"), state="accepted", run_id="r-1")
    moved = await store.update_command(
        command("c-1", text="second"), state="accepted", run_id="r-9", from_state="deferred"
    )
    assert moved
    stored = await store.get_command("c-1")
    assert stored is not None
    assert (stored.state, stored.run_id) == ("accepted", "r-9")
    assert stored.command.payload == {"text": "second"}
    assert [s.command.correlation_id for s in await store.open_commands()] == ["c-1", "c-2"]


async def test_update_is_a_compare_and_set_on_the_logged_state(store: Store) -> None:
    """Two runtimes sharing the log may both hold a deferred copy: only the first to move
    it on from 'deferred' gets it; the second changes nothing and is told so."""
    await store.append_command(command("c-1", text="first"), state="deferred", run_id=None)
    assert await store.update_command(
        command("c-1"), state="accepted", run_id="r-1", from_state="deferred"
    )
    assert not await store.update_command(
        command("c-1", text="other"), state="accepted", run_id="r-2", from_state="deferred"
    )
    assert not await store.update_command(
        command("c-9"), state="accepted", run_id="r-2", from_state="deferred"
    )
    await store.set_command_states([("", "c-1", "applied", None)])
    assert not await store.update_command(
        command("c-1"), state="rejected", run_id="r-1", from_state="accepted"
    )
    stored = await store.get_command("c-1")
    assert stored is not None
    assert (stored.state, stored.run_id, stored.command.payload) == (
        "applied",
        "r-1",
        {"text": "focus"},
    )
    assert await store.get_command("c-9") is None


async def test_a_terminal_state_is_never_overwritten(store: Store) -> None:
    """Two runtimes share the log: one applied the command, the other (whose copy failed on
    a store error) then wrote "failed" over "applied". The first terminal state stands."""
    await store.append_command(command("c-1"), state="accepted", run_id="r-1")
    await store.set_command_states([("", "c-1", "applied", None)])
    await store.set_command_states([("", "c-1", "failed", "store error: database is locked")])
    stored = await store.get_command("c-1")
    assert stored is not None and (stored.state, stored.reason) == ("applied", None)
    # the same terminal state again only gives its reason (a rejection is logged before its
    # event, which carries the reason)
    await store.append_command(command("c-2"), state="rejected", run_id=None)
    await store.set_command_states([("", "c-2", "rejected", "forbidden: not yours")])
    rejected = await store.get_command("c-2")
    assert rejected is not None and (rejected.state, rejected.reason) == (
        "rejected",
        "forbidden: not yours",
    )


async def test_correlation_ids_are_unique_per_tenant_scope(store: Store) -> None:
    def human(cid: str, tenant: str) -> SteeringCommand:
        return command(cid).model_copy(
            update={"actor": SteeringActor.human("u", tenant_id=tenant, scopes=["agent:control"])}
        )

    assert await store.append_command(human("same", "acme"), state="accepted", run_id="r-1")
    assert await store.append_command(human("same", "evil"), state="deferred", run_id=None)
    assert await store.append_command(command("same"), state="accepted", run_id="r-2")
    assert not await store.append_command(human("same", "acme"), state="accepted", run_id="r-3")
    await store.set_command_states([("tenant:evil", "same", "failed", "x")])
    acme = await store.get_command("same", scope="tenant:acme")
    evil = await store.get_command("same", scope="tenant:evil")
    local = await store.get_command("same")
    assert acme is not None and (acme.state, acme.run_id) == ("accepted", "r-1")
    assert evil is not None and evil.state == "failed"
    assert local is not None and (local.state, local.run_id) == ("accepted", "r-2")


async def test_open_commands_are_the_accepted_and_deferred_ones_oldest_first(store: Store) -> None:
    await store.append_command(command("c-1", at=1), state="accepted", run_id="r-1")
    await store.append_command(command("c-2", at=2), state="deferred", run_id=None)
    await store.append_command(command("c-3", at=3), state="accepted", run_id="r-1")
    await store.append_command(command("c-4", at=4), state="rejected", run_id="r-1")
    await store.append_command(command("c-5", at=5), state="accepted", run_id="r-2")
    await store.set_command_states([("", "c-3", "applied", None), ("", "c-5", "failed", "late")])

    open_ = await store.open_commands()
    assert [(s.command.correlation_id, s.state, s.run_id) for s in open_] == [
        ("c-1", "accepted", "r-1"),
        ("c-2", "deferred", None),
    ]
    assert await store.command_ids() == {"c-1", "c-2", "c-3", "c-4", "c-5"}


def thread_command(cid: str, thread_id: str) -> SteeringCommand:
    return command(cid).model_copy(update={"target": SteeringTarget.thread(thread_id)})


async def test_the_log_keeps_who_logged_a_command_and_its_thread(store: Store) -> None:
    """A command's owner (the runtime that logged it) and its target's thread read back from
    every read of the log; a thread target's thread is its own whatever the caller says."""
    await store.append_command(
        command("c-1"), state="accepted", run_id="r-1", owner="rt-a", thread_id="t-1"
    )
    await store.append_command(
        thread_command("c-2", 'th "2"'), state="deferred", run_id=None, owner="rt-a"
    )
    await store.append_command(command("c-3"), state="accepted", run_id="r-1")  # no owner
    await store.append_command(
        thread_command("c-4", "t-4"), state="accepted", run_id="r-1", thread_id="t-other"
    )
    read = {
        "get": [await store.get_command(c) for c in ("c-1", "c-2", "c-3", "c-4")],
        "open": await store.open_commands(),
    }
    for commands in read.values():
        assert [(c.owner, c.thread_id) for c in commands if c is not None] == [
            ("rt-a", "t-1"),
            ("rt-a", 'th "2"'),
            (None, None),
            (None, "t-4"),
        ]
    by_run = await store.run_commands("r-1", states=("accepted",))
    assert [(c.command.correlation_id, c.owner) for c in by_run] == [
        ("c-1", "rt-a"),
        ("c-3", None),
        ("c-4", None),
    ]


async def test_a_command_taken_from_the_log_names_its_taker(store: Store) -> None:
    """A deferred command moved on by another runtime is that runtime's from then on; a move
    that names no owner (or thread) keeps the logged one."""
    await store.append_command(
        thread_command("c-1", "t-1"), state="deferred", run_id=None, owner="rt-a"
    )
    assert await store.update_command(
        thread_command("c-1", "t-1"),
        state="accepted",
        run_id="r-1",
        from_state="deferred",
        owner="rt-b",
        thread_id="t-1",
    )
    await store.append_command(command("c-2"), state="deferred", run_id=None, owner="rt-a")
    assert await store.update_command(
        command("c-2"), state="accepted", run_id="r-1", from_state="deferred"
    )
    taken, kept = await store.get_command("c-1"), await store.get_command("c-2")
    assert taken is not None and (taken.owner, taken.thread_id) == ("rt-b", "t-1")
    assert kept is not None and (kept.owner, kept.thread_id) == ("rt-a", None)


async def test_open_commands_of_one_thread(store: Store) -> None:
    """``open_commands(thread_id=...)``: the open commands logged for that thread (a thread
    target's, or a run's of that thread), oldest first; settled ones and other threads' not."""
    await store.append_command(thread_command("c-1", "t-1"), state="deferred", run_id=None)
    await store.append_command(command("c-2"), state="accepted", run_id="r-1", thread_id="t-1")
    await store.append_command(thread_command("c-3", "t-2"), state="deferred", run_id=None)
    await store.append_command(command("c-4"), state="accepted", run_id="r-1", thread_id="t-1")
    await store.append_command(command("c-5"), state="accepted", run_id="r-9")
    await store.set_command_states([("", "c-4", "applied", None)])
    assert [c.command.correlation_id for c in await store.open_commands(thread_id="t-1")] == [
        "c-1",
        "c-2",
    ]
    assert [c.command.correlation_id for c in await store.open_commands(thread_id="t-2")] == ["c-3"]
    assert await store.open_commands(thread_id="t-9") == []
    assert len(await store.open_commands()) == 4


async def test_set_command_states_records_the_reason_and_ignores_unknown_ids(store: Store) -> None:
    await store.append_command(command("c-1"), state="accepted", run_id="r-1")
    await store.set_command_states(
        [("", "c-1", "failed", "target finished"), ("", "ghost", "applied", None)]
    )
    stored = await store.get_command("c-1")
    assert stored is not None and (stored.state, stored.reason) == ("failed", "target finished")
    assert await store.get_command("ghost") is None
    assert await store.command_ids() == {"c-1"}
    await store.set_command_states([])


async def test_a_reason_holding_a_lone_surrogate_settles_its_command_on_every_store(
    store: Store,
) -> None:
    """A terminal event's reason may hold half a UTF-16 pair (an error from a model's or a
    tool's text): SQLite and PostgreSQL refused the whole batch of events settling it ("can't
    encode character"), and the store writer, finding that event JSON holds refused twice,
    took the store for one refusing every event. The steering log's text column holds its
    ``\\ud800`` escape (the event log keeps the event exactly), on every store alike."""
    for cid in ("c-1", "c-2"):
        await store.append_command(command(cid), state="accepted", run_id="r-1")
    failed = steering_event("steering.failed", "c-1", reason="tool said: \ud800!")
    await store.append_events([failed])
    await store.set_command_states([("", "c-2", "failed", "\udfff é")])
    one, two = await store.get_command("c-1"), await store.get_command("c-2")
    assert one is not None and (one.state, one.reason) == ("failed", "tool said: \\ud800!")
    assert two is not None and (two.state, two.reason) == ("failed", "\\udfff é")
    assert await store.load_events() == [failed]


# --------------------------------------------------------------------------- event log


async def test_appending_terminal_events_settles_their_commands_in_the_same_write(
    store: Store,
) -> None:
    """A crash can never leave a terminal event in the event log while the steering log still
    holds its command open: both are one write."""
    await store.append_command(command("c-1"), state="accepted", run_id="r-1")
    await store.append_command(command("c-2"), state="accepted", run_id="r-1")
    await store.append_events(
        [
            steering_event("steering.delivered", "c-1"),
            steering_event("steering.applied", "c-1"),
            steering_event("steering.failed", "c-2", reason="late"),
        ]
    )
    one, two = await store.get_command("c-1"), await store.get_command("c-2")
    assert one is not None and (one.state, one.reason) == ("applied", None)
    assert two is not None and (two.state, two.reason) == ("failed", "late")
    assert await store.open_commands() == []


async def test_events_read_back_typed_and_in_write_order(store: Store) -> None:
    events = sample_events()
    await store.append_events(events[:3])
    await store.append_events(events[3:])
    await store.append_events([])
    loaded = await store.load_events()
    assert [type(e) for e in loaded] == [type(e) for e in events]
    assert dumped(loaded) == dumped(events)


async def test_an_event_a_durable_store_cannot_encode_is_a_store_error_and_its_batch_unwritten(
    durable_backend: Any, tmp_path: Path
) -> None:
    """docs/postgres.md, "Failures are StoreErrors": an event JSON cannot hold (an object in
    a dict) raised pydantic's PydanticSerializationError out of SQLite's and PostgreSQL's
    ``append_events``, not a ``StoreError`` naming the store."""
    store = durable_backend.make(tmp_path)
    await store.open()
    try:
        bad = RunEvent(type="run.status", run_id="r-1", detail={"handle": object()}, at=EPOCH)
        with pytest.raises(StoreError, match="Unable to serialize") as raised:
            await store.append_events([*sample_events()[:2], bad])
        assert "append 3 event(s)" in str(raised.value)
        assert await store.load_events() == []  # nothing of the batch was written
        await store.append_events(sample_events())  # the store goes on
        assert dumped(await store.load_events()) == dumped(sample_events())
    finally:
        await store.close()


async def test_an_event_holding_lone_surrogates_reads_back_from_every_store(store: Store) -> None:
    """A lone surrogate (half a UTF-16 pair, from a model's or a tool's output), in a value or
    a dict key: a durable store refused the event (a ``StoreError``; the store writer then
    stored a copy with the text spelled out, ``\\ud800`` as six characters). Its JSON writes
    the escape (``Event.to_json``), and every store gives back the event that was appended."""
    events: list[Event] = [
        RunEvent(type="run.status", run_id="r-1", status="half a pair: \ud800!", at=EPOCH),
        RunEvent(type="run.status", run_id="r-1", detail={"\udfff": ["\udc00"]}, at=EPOCH),
        RunEvent(
            type="run.status", run_id="r-1", detail={"k": [{"\ud800": {"\udbff": 1}}]}, at=EPOCH
        ),
    ]
    await store.append_events(events)
    read = await store.load_events(run_id="r-1")
    assert read == events
    assert [e.to_json() for e in read] == [e.to_json() for e in events]


async def test_an_event_holding_nan_or_infinity_reads_back_from_every_store(store: Store) -> None:
    """JSON has no NaN or infinity: a durable store wrote them as ``null`` (pydantic's
    default), so a ``limit.warning`` whose ``used`` was NaN no longer read as an event
    (``used`` must be a number) and was left out of the log for good, and a usage value of
    NaN came back ``None``. They are written as pydantic's strings ("NaN", "Infinity",
    "-Infinity"), and every store gives back the event that was appended."""
    nan, inf = float("nan"), float("inf")
    events: list[Event] = [
        LimitEvent(type="limit.warning", run_id="r-1", limit="cost", used=nan, allowed=-inf),
        ModelEvent(
            type="model.response",
            run_id="r-1",
            request_id="m-1",
            usage={"cost": nan, "tokens": [inf, 1.5]},
            at=EPOCH,
        ),
    ]
    await store.append_events(events)
    read = await store.load_events(run_id="r-1")
    assert [e.to_json() for e in read] == [e.to_json() for e in events]
    limit = read[0]
    assert isinstance(limit, LimitEvent) and limit.used != limit.used  # NaN: not equal to itself
    assert limit.allowed == -inf
    assert '"used":"NaN","allowed":"-Infinity"' in limit.to_json()
    assert '"usage":{"cost":"NaN","tokens":["Infinity",1.5]}' in read[1].to_json()
    assert [i for i, _ in await store.read_events(run_id="r-1")] == [1, 2]


@pytest.mark.parametrize("fallback", [False, True], ids=["backend", "fallback"])
async def test_last_events_reads_the_log_back_from_its_end(store: Store, fallback: bool) -> None:
    """``last_events``: the last ``limit`` rows before ``before_id``, in id order, with the
    filters of ``read_events`` (a run's latest trace, then the page before it). The backends'
    own read back from the end; ``Store.last_events``, for a backend without one, reads the
    log from its start; both answer alike."""
    events: list[Event] = [
        RunEvent(
            type="run.status",
            run_id=f"r-{i % 3}",
            root_run_id="root" if i % 3 else "other",
            tenant_id="acme" if i % 2 else "globex",
            status=str(i),
            at=EPOCH,
        )
        for i in range(2500)
    ]
    for start in range(0, len(events), 500):
        await store.append_events(events[start : start + 500])
    ids = [i for i, _ in await store.read_events(limit=5000)]
    assert len(ids) == 2500

    async def last(**kw: Any) -> list[tuple[int, str]]:
        read = Store.last_events(store, **kw) if fallback else store.last_events(**kw)
        return [(i, e.status) for i, e in await read]  # type: ignore[attr-defined]

    def expected(limit: int, before: int | None = None, **where: Any) -> list[tuple[int, str]]:
        kept = [
            (i, e.status)  # type: ignore[attr-defined]
            for i, e in zip(ids, events, strict=True)
            if (before is None or i < before) and all(getattr(e, k) == v for k, v in where.items())
        ]
        return kept[-limit:] if limit > 0 else []

    assert await last(limit=3) == expected(3)
    assert await last(run_id="r-1", limit=5) == expected(5, run_id="r-1")
    assert await last(run_id="r-1", limit=5, before_id=ids[1500]) == expected(
        5, ids[1500], run_id="r-1"
    )
    assert await last(root_run_id="root", tenant_id="acme", limit=1200) == expected(
        1200, root_run_id="root", tenant_id="acme"
    )
    assert await last(run_id="r-2", limit=2000) == expected(2000, run_id="r-2")  # all 833
    assert await last(before_id=ids[0], limit=10) == []
    assert await last(before_id=ids[2], limit=10) == expected(10, ids[2])
    assert await last(run_id="nobody", limit=10) == []
    assert await last(limit=0) == []


async def test_event_filters(store: Store) -> None:
    events = sample_events()
    await store.append_events(events)

    async def types(**where: Any) -> list[tuple[str, str | None]]:
        return [(e.type, e.run_id) for e in await store.load_events(**where)]

    assert await types(run_id="r-1") == [
        ("steering.requested", "r-1"),
        ("steering.accepted", "r-1"),
        ("model.request", "r-1"),
    ]
    assert await types(root_run_id="other") == [
        ("steering.requested", "r-2"),
        ("steering.rejected", "r-2"),
    ]
    assert await types(type_prefix="graph.") == [
        ("graph.task_started", "g-1"),
        ("graph.step", "g-1"),
    ]
    assert await types(root_run_id="root", type_prefix="steering.") == [
        ("steering.requested", "r-1"),
        ("steering.accepted", "r-1"),
    ]
    assert await types(run_id="r-2", root_run_id="root") == []


async def test_type_prefix_is_literal_and_case_sensitive(store: Store) -> None:
    await store.append_events(sample_events())
    assert await store.load_events(type_prefix="run_") == []  # "_" is not a wildcard
    assert await store.load_events(type_prefix="STEERING.") == []
    assert await store.load_events(type_prefix="%") == []
    assert [e.type for e in await store.load_events(type_prefix="graph.task_")] == [
        "graph.task_started"
    ]


# --------------------------------------------------------------------------- runs


def snapshots() -> list[dict[str, Any]]:
    infos = [
        RunInfo(run_id="r-1", tenant_id="acme", tools=frozenset({"b", "a"}), created_at=EPOCH),
        RunInfo(
            run_id="r-2",
            parent_run_id="r-1",
            root_run_id="r-1",
            tenant_id="acme",
            depth=1,
            created_at=EPOCH,
        ),
        RunInfo(run_id="r-3", tenant_id="globex", models=("m",), created_at=EPOCH),
    ]
    return [info.snapshot() for info in infos]


async def test_runs_are_upserted_and_filtered_by_tenant(store: Store) -> None:
    first = snapshots()
    await store.save_runs(first)
    finished = {**first[0], "status": RunStatus.COMPLETED.value}
    await store.save_runs([finished])

    everything = await store.load_runs()
    assert [r["run_id"] for r in everything] == ["r-1", "r-2", "r-3"]
    assert everything[0] == json.loads(json.dumps(finished))
    assert [r["run_id"] for r in await store.load_runs(tenant_id="acme")] == ["r-1", "r-2"]
    assert await store.load_runs(tenant_id="initech") == []
    await store.save_runs([])


async def test_what_a_store_returns_or_was_given_is_never_shared_with_it(store: Store) -> None:
    """The memory store kept the snapshot dicts it was given and handed out its own dicts and
    log entries: a caller changing one changed the store (a durable store reads a copy)."""
    given = snapshots()[0]
    await store.save_runs([given])
    given["status"] = "changed"
    given["limits"]["max_depth"] = 99
    for got in (await store.load_runs(), await store.list_runs(), [await store.load_run("r-1")]):
        got[0]["status"] = "changed"
        got[0]["limits"]["max_depth"] = 99
    kept = await store.load_run("r-1")
    assert kept is not None and (kept["status"], kept["limits"]["max_depth"]) == ("running", 8)

    await store.append_command(command("c-1"), state="accepted", run_id="r-1")
    for stored in (
        await store.get_command("c-1"),
        *(await store.open_commands()),
        *(await store.run_commands("r-1", states=("accepted",))),
    ):
        assert stored is not None
        stored.state, stored.run_id = "applied", "r-other"
    again = await store.get_command("c-1")
    assert again is not None and (again.state, again.run_id) == ("accepted", "r-1")


async def test_a_run_is_claimed_only_when_free_says_so(store: Store) -> None:
    first, *_ = snapshots()
    seen: list[Any] = []

    def free_of_owner(held: dict[str, Any] | None) -> bool:
        seen.append(held)
        return held is None or held.get("owner") is None

    mine = {**first, "owner": "rt-1"}
    assert await store.claim_run(mine, free_of_owner) == (True, None)
    theirs = {**first, "owner": "rt-2"}
    saved, held = await store.claim_run(theirs, free_of_owner)
    assert not saved and held is not None and held["owner"] == "rt-1"
    assert seen[-1] is not None and seen[-1]["owner"] == "rt-1"
    kept = await store.load_run(first["run_id"])
    assert kept is not None and kept["owner"] == "rt-1"
    saved, held = await store.claim_run(theirs, lambda held: True)
    assert saved and held is not None and held["owner"] == "rt-1"
    kept = await store.load_run(first["run_id"])
    assert kept is not None and kept["owner"] == "rt-2"


async def test_of_two_claims_of_one_run_at_once_one_is_saved(
    durable_backend: Any, tmp_path: Path
) -> None:
    """Two connections (two processes) claim a run that has no row at the same moment: one
    saves its snapshot, the other is given it."""
    stores = [durable_backend.make(tmp_path), durable_backend.make(tmp_path)]
    for opened in stores:
        await opened.open()
    try:
        first, *_ = snapshots()
        claims = await asyncio.gather(
            *(
                s.claim_run({**first, "owner": f"rt-{i}"}, lambda held: held is None)
                for i, s in enumerate(stores)
            )
        )
        assert sorted(saved for saved, _ in claims) == [False, True]
        ((_, held),) = [c for c in claims if not c[0]]
        winner = next(i for i, (saved, _) in enumerate(claims) if saved)
        assert held is not None and held["owner"] == f"rt-{winner}"
    finally:
        for opened in stores:
            await opened.close()


# --------------------------------------------------------------------------- durability


async def test_everything_survives_a_reopen(durable_backend: Any, tmp_path: Path) -> None:
    writer = durable_backend.make(tmp_path)
    await writer.open()
    await writer.open()  # idempotent
    await writer.append_command(command("c-1"), state="accepted", run_id="r-1")
    await writer.append_command(command("c-2"), state="accepted", run_id="r-1")
    await writer.set_command_states([("", "c-2", "applied", None)])
    await writer.append_events(sample_events())
    await writer.save_runs(snapshots())
    await writer.close()
    await writer.close()  # idempotent

    reader = durable_backend.make(tmp_path)
    await reader.open()
    try:
        assert [s.command.correlation_id for s in await reader.open_commands()] == ["c-1"]
        assert await reader.command_ids() == {"c-1", "c-2"}
        assert dumped(await reader.load_events()) == dumped(sample_events())
        assert [r["run_id"] for r in await reader.load_runs()] == ["r-1", "r-2", "r-3"]
        # Writing after a reopen goes on where the log stopped.
        await reader.append_command(command("c-3", at=9), state="accepted", run_id="r-1")
        assert [s.command.correlation_id for s in await reader.open_commands()] == ["c-1", "c-3"]
    finally:
        await reader.close()


async def test_a_claim_is_given_back_only_by_its_owner(store: Store) -> None:
    """``release_run`` puts back what a claim replaced (or deletes the row it made), and only
    while the row still names the owner giving it back."""
    first, *_ = snapshots()
    mine = {**first, "owner": "rt-1"}
    assert await store.claim_run(mine, lambda held: True) == (True, None)
    assert not await store.release_run(first["run_id"], "rt-2", None)
    assert await store.load_run(first["run_id"]) is not None
    assert await store.release_run(first["run_id"], "rt-1", None)
    assert await store.load_run(first["run_id"]) is None
    assert not await store.release_run(first["run_id"], "rt-1", None)

    finished = {**first, "owner": "rt-0", "status": RunStatus.COMPLETED.value}
    await store.save_runs([finished])
    saved, held = await store.claim_run(mine, lambda held: True)
    assert saved and held is not None
    assert await store.release_run(first["run_id"], "rt-1", held)
    back = await store.load_run(first["run_id"])
    assert back is not None
    assert {k: v for k, v in back.items() if k != "silence_s"} == json.loads(json.dumps(finished))


async def test_a_save_held_by_a_runtime_never_takes_another_ones_row(store: Store) -> None:
    """``save_runs(held_by=)`` saves a snapshot only where its run has no row or one naming
    that runtime its owner, and returns the ids it left: a runtime whose run another one
    claimed since never takes the row back with its next snapshot."""
    one, two, three = snapshots()
    await store.save_runs([{**one, "owner": "rt-1"}, {**two, "owner": "rt-1"}])
    claimed, _ = await store.claim_run({**two, "owner": "rt-2"}, lambda held: True)
    assert claimed
    beats = [{**s, "owner": "rt-1", "status": "paused"} for s in (one, two, three)]
    assert await store.save_runs(beats, held_by="rt-1") == [two["run_id"]]
    rows = {r["run_id"]: r for r in await store.load_runs()}
    assert (rows["r-1"]["owner"], rows["r-1"]["status"]) == ("rt-1", "paused")
    assert (rows["r-2"]["owner"], rows["r-2"]["status"]) == ("rt-2", "running")
    assert (rows["r-3"]["owner"], rows["r-3"]["status"]) == ("rt-1", "paused")
    released = {**one, "owner": None, "status": "cancelled"}
    await store.save_runs([released])  # declared dead: no owner
    assert await store.save_runs([{**one, "owner": "rt-1"}], held_by="rt-1") == ["r-1"]
    kept = await store.load_run("r-1")
    assert kept is not None and kept["status"] == "cancelled"
    assert await store.save_runs([{**one, "owner": "rt-3"}]) == []  # without held_by: saved


async def test_numbers_past_64_bits_are_read_as_the_end_of_their_range(store: Store) -> None:
    """An ``after_id`` or a ``limit`` past what a database integer holds (an operator API
    client's ``?after_id=99999999999999999999``) reads as the end of the range, as the memory
    store reads it: no event after the largest id, every event after the smallest, no limit.
    SQLite raised Python's OverflowError, neither a StoreError nor an answer."""
    huge = 2**64
    await store.append_events(sample_events())
    await store.save_runs(snapshots())
    await store.inbox_put(owner="rt-a", request_id="q-1", command=command("c-9"))
    assert await store.read_events(after_id=huge) == []
    assert len(await store.read_events(after_id=-huge)) == len(sample_events())
    assert len(await store.read_events(limit=huge)) == len(sample_events())
    assert len(await store.list_runs(limit=huge)) == len(snapshots())
    assert [i.request_id for i in await store.inbox_take("rt-a", limit=huge)] == ["q-1"]


@pytest.mark.parametrize("fallback", [False, True], ids=["backend", "fallback"])
async def test_last_events_of_a_type_prefix(store: Store, fallback: bool) -> None:
    """``last_events(type_prefix=)``: the last ``limit`` rows of that type, as
    ``load_events``' filter keeps them (a run's latest steering events, for its command
    history a page at a time): ``_`` and ``%`` are no wildcards, and case counts."""
    events: list[Event] = []
    for i in range(30):
        events.append(
            RunEvent(type="run.status", run_id="r-1", root_run_id="root", status=str(i), at=EPOCH)
        )
        if i % 3 == 0:
            events.append(steering_event("steering.requested", f"c-{i}", run_id="r-1"))
    await store.append_events(events)
    ids = [i for i, _ in await store.read_events(limit=5000)]

    async def last(**kw: Any) -> list[tuple[int, str]]:
        read = Store.last_events(store, **kw) if fallback else store.last_events(**kw)
        return [(i, e.type) for i, e in await read]

    steering = [(i, e.type) for i, e in zip(ids, events, strict=True) if e.type.startswith("st")]
    assert len(steering) == 10
    assert await last(run_id="r-1", type_prefix="steering.", limit=3) == steering[-3:]
    assert await last(type_prefix="steering.", limit=30) == steering
    before = steering[-2][0]
    assert await last(type_prefix="steering.", before_id=before, limit=2) == steering[-4:-2]
    assert await last(type_prefix="steering_", limit=5) == []
    assert await last(type_prefix="Steering.", limit=5) == []
    assert await last(type_prefix="st%", limit=5) == []


# --------------------------------------------------------------------------- used nonces


def _soon(seconds: float = 60) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


async def test_a_nonce_is_claimed_once(store: Store) -> None:
    assert await store.claim_nonce("n-1", expires_at=_soon()) is True
    assert await store.claim_nonce("n-1", expires_at=_soon()) is False
    assert await store.claim_nonce("n-2", expires_at=_soon()) is True


async def test_of_claims_of_one_nonce_at_once_through_two_handles_one_wins(
    durable_backend: Any, tmp_path: Path
) -> None:
    """Two processes sharing the store (two handles on it here) claim one nonce at once:
    exactly one claim is told it is the first, and each sees the other's."""
    stores = [durable_backend.make(tmp_path) for _ in range(2)]
    for opened in stores:
        await opened.open()
    try:
        claims = await asyncio.gather(
            *(s.claim_nonce("n-shared", expires_at=_soon()) for s in stores for _ in range(3))
        )
        assert sorted(claims) == [False] * 5 + [True]
        assert await stores[0].claim_nonce("n-other", expires_at=_soon()) is True
        assert await stores[1].claim_nonce("n-other", expires_at=_soon()) is False
    finally:
        for opened in stores:
            await opened.close()


async def test_a_nonce_long_past_its_expiry_is_forgotten(store: Store) -> None:
    """A claim sweeps out the nonces past their expiry and ``NONCE_MARGIN_S``: the record
    shrinks as they expire (none is claimable by then: its holder checks its expiry)."""
    gone = datetime.now(UTC) - timedelta(seconds=NONCE_MARGIN_S + 60)
    assert await store.claim_nonce("n-old", expires_at=gone) is True
    assert await store.claim_nonce("n-new", expires_at=_soon()) is True
    assert await store.claim_nonce("n-old", expires_at=gone) is True  # swept: claimable again
    # one past its expiry by less than the margin is kept (a clock behind still finds it)
    late = datetime.now(UTC) - timedelta(seconds=NONCE_MARGIN_S / 2)
    assert await store.claim_nonce("n-late", expires_at=late) is True
    assert await store.claim_nonce("n-new2", expires_at=_soon()) is True
    assert await store.claim_nonce("n-late", expires_at=late) is False


def test_nonces_held_in_a_process_are_bounded_until_they_expire() -> None:
    """``UsedNonces(limit=)`` (a ``Control`` without a store): a claim past the bound is a
    ``StoreError`` (a used nonce cannot be let go early), and room comes back as they go."""
    nonces = UsedNonces(limit=2)
    assert nonces.claim("n-1", expires_at=_soon()) and nonces.claim("n-2", expires_at=_soon())
    with pytest.raises(StoreError, match="most this process keeps"):
        nonces.claim("n-3", expires_at=_soon())
    assert nonces.claim("n-1", expires_at=_soon()) is False  # still known used
    later = datetime.now(UTC) + timedelta(seconds=60 + NONCE_MARGIN_S + 1)
    with use_clock(FakeClock(start=later)):
        assert nonces.claim("n-3", expires_at=_soon(NONCE_MARGIN_S + 120)) is True
