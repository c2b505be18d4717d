"""Arbitrary JSON documents, end to end: through ``SteeringCommand.model_validate_json`` and,
when that builds a command, through ``Runtime.submit`` on a runtime with a SQLite store and a
live hand-driven run.

- Validation raises nothing but ``InvalidCommandError``.
- ``submit`` answers with a receipt (accepted, rejected, deferred, duplicate) or raises a
  typed ``TinyAgentsError``; a command whose submit raised is not tracked (its id is free).
- Once the run has taken what it can and finished, every requested command has exactly one
  terminal event, the last one — except deferred commands still waiting for a thread that
  never got a run, which stay open in the durable log.
- The store reopens: a new runtime on the same file opens, and restores exactly those.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import tempfile
from collections import defaultdict
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from steerkit import finish_run, start_run

from tinyagents.errors import InvalidCommandError, StoreError, TinyAgentsError
from tinyagents.events import SteeringEvent
from tinyagents.protocol import Boundary, ReceiptStatus, SteeringCommand, SteeringDelivery
from tinyagents.protocol.commands import dedupe_scope
from tinyagents.runtime import Runtime
from tinyagents.testkit import EventRecorder

RUN, THREAD = "r-live", "th-live"
TERMINAL = {"rejected", "applied", "superseded", "failed"}

# --------------------------------------------------------------------------- documents

SURROGATES = st.sampled_from(["\ud800", "\udfff", "a\udc80b", "\ud83d"])
names = st.sampled_from([RUN, THREAD, "r-other", "a", "m", "agent:control", "default", "acme"])
texts = st.one_of(st.text(max_size=8), names, st.just(""), st.just(" "), SURROGATES)
#: Integers of n digits go into the JSON text as "<big n>" placeholders (Python refuses to
#: write an int of more than 4300 digits).
BIG = re.compile(r'"<big (-?)(\d+)>"')
integers = st.integers() | st.sampled_from([0, -1, 2**63, -(2**64), 10**300])
big_integers = st.sampled_from(["<big 3999>", "<big -4000>", "<big 4001>", "<big 5000>"])
floats = st.floats() | st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308])
leaves = st.one_of(st.none(), st.booleans(), integers, big_integers, floats, texts)
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=10,
)
offsets = st.integers(-23 * 60, 23 * 60).map(lambda m: timezone(timedelta(minutes=m)))
datetimes = st.one_of(
    st.datetimes().map(lambda d: d.isoformat()),  # naive
    st.builds(lambda d, tz: d.replace(tzinfo=tz).isoformat(), st.datetimes(), offsets),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.sampled_from(["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00", "soon"]),
)

TARGETS = [
    {"type": "agent_run", "run_id": RUN},
    {"type": "agent_run", "run_id": RUN},
    {"type": "agent_run", "run_id": RUN},
    {"type": "thread", "thread_id": THREAD},
    {"type": "agent_run", "run_id": "r-other"},
    {"type": "thread", "thread_id": THREAD},
    {"type": "thread", "thread_id": "th-never"},  # deferred: no run ever takes this thread
    {"type": "subagent_run", "parent_run_id": "p", "run_id": RUN},
    {"type": "graph_task", "run_id": RUN, "task_id": "t"},
    {"type": "graph_node", "run_id": RUN, "node": "n"},
]
ACTORS = [
    {"type": "test", "name": "fuzz"},
    {"type": "test", "name": "fuzz"},
    {"type": "test", "name": "fuzz"},
    {"type": "human", "user_id": "u", "tenant_id": "default", "scopes": ["agent:control"]},
    {"type": "human", "user_id": "u", "tenant_id": "acme", "scopes": ["agent:control"]},
    {"type": "human", "user_id": "u", "tenant_id": "default", "scopes": []},
    {"type": "parent_agent", "run_id": "p", "agent_id": "orchestrator"},
    {"type": "middleware", "name": "supervisor", "run_id": None},
    {"type": "middleware", "name": "mw", "run_id": RUN},
    {"type": "graph_supervisor", "run_id": RUN, "node": "sup"},
]
PAYLOADS = [
    ("add_instruction", {"text": "focus"}),
    ("replace_instruction", {"text": "new goal"}),
    ("ask_clarifying_question", {"question": "which?"}),
    ("provide_context", {"text": "ctx", "source": "crm"}),
    ("provide_context", {"value": {"ok": True, "n": [1, 2.5, None]}, "interrupt_id": "i"}),
    ("constrain_tools", {"tools": ["a", "b"]}),
    ("constrain_tools", {"tools": ["a", "zzz"]}),
    ("constrain_model", {"models": ["m"]}),
    ("pause", {"reason": "lunch"}),
    ("resume", {}),
    ("cancel", {}),
    ("approve", {"interrupt_id": "i", "value": 42}),
    ("reject", {"reason": "no"}),
    ("redirect", {"goto": ["a"]}),
    ("redirect", {"instruction": "write it"}),
    ("request_status", {}),
    ("update_budget", {"max_model_calls": 3, "deadline_s": 1.5}),
    ("update_state", {"update": {"x": [1, 2.5, None]}, "as_node": "a"}),
]
kinds = st.one_of(
    st.sampled_from([k for k, _ in PAYLOADS]),
    st.sampled_from(["explode", "", "ADD_INSTRUCTION", "add-instruction"]),
    st.integers(0, 3),
)
payloads = st.one_of(
    st.sampled_from([p for _, p in PAYLOADS]),  # often another kind's: a wrong payload
    st.dictionaries(texts, json_values, max_size=3),
)
correlation_ids = st.sampled_from(["c-1", "c-2", "c-3", "c-4"]) | texts


@st.composite
def skeletons(draw: st.DrawFn) -> dict[str, Any]:
    """A plausible command: a valid one mostly, its kind or payload swapped now and then."""
    kind, payload = draw(st.sampled_from(PAYLOADS))
    doc: dict[str, Any] = {
        "target": draw(st.sampled_from(TARGETS)),
        "actor": draw(st.sampled_from(ACTORS)),
        "kind": kind,
        "payload": payload,
    }
    if draw(st.integers(0, 4)) == 0:
        doc["kind"] = draw(kinds)
    if draw(st.integers(0, 4)) == 0:
        doc["payload"] = draw(payloads)
    # Mostly valid values, so that most skeletons reach the runtime; invalid ones now and then.
    optional = {
        "priority": st.sampled_from([0, 50, 50, 100, 200, 200, 7, "high"]),
        "delivery": st.sampled_from([d.value for d in SteeringDelivery] * 2 + ["never"]),
        "correlation_id": correlation_ids,
        "created_at": datetimes,
        "checkpoint_id": st.sampled_from([None, None, None, "cp-1"]),
        "fork": st.sampled_from([False, False, False, True]),
        "policy_ref": st.fixed_dictionaries({"policy_id": names}),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            doc[key] = draw(strategy)
    return copy.deepcopy(doc)  # sampled_from hands out shared objects


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    """A skeleton with a few of its values (at any depth) replaced by arbitrary JSON."""
    doc = draw(skeletons())
    for _ in range(draw(st.integers(1, 3))):
        holders: list[tuple[Any, Any]] = []
        stack: list[Any] = [doc]
        while stack:
            node = stack.pop()
            for key, value in node.items() if isinstance(node, dict) else enumerate(node):
                holders.append((node, key))
                if isinstance(value, dict | list):
                    stack.append(value)
        node, key = draw(st.sampled_from(holders))
        node[key] = draw(json_values | datetimes)
    return doc


def dumps(doc: Any, *, ensure_ascii: bool) -> str:
    raw = json.dumps(doc, allow_nan=True, ensure_ascii=ensure_ascii)
    return BIG.sub(lambda m: m[1] + "9" * int(m[2]), raw)


documents = st.builds(
    dumps,
    st.one_of(json_values, skeletons(), skeletons(), mutated()),
    ensure_ascii=st.booleans(),
)

# --------------------------------------------------------------------------- the checks


def parse(raw: str) -> SteeringCommand | None:
    try:
        return SteeringCommand.model_validate_json(raw)
    except InvalidCommandError:
        return None  # anything else escapes and fails the test


def check_terminal(recorder: EventRecorder, left_open: set[tuple[str, str]]) -> None:
    """Every requested command has exactly one terminal event, its last; a command left open
    in the durable log (deferred for a thread no run took) has none, and is deferred."""
    states: dict[tuple[str, str], list[str]] = defaultdict(list)
    for e in recorder.events:
        if isinstance(e, SteeringEvent):
            key = (dedupe_scope(e.actor), e.correlation_id)
            states[key].append(e.type.removeprefix("steering."))
    for key, seen in states.items():
        ends = [i for i, s in enumerate(seen) if s in TERMINAL]
        if key in left_open:
            assert ends == [] and seen[-1] == "deferred", f"{key}: {seen}"
            continue
        assert len(ends) == 1, f"{key}: {len(ends)} terminal states in {seen}"
        assert ends[0] == len(seen) - 1, f"{key}: events after the terminal one: {seen}"
        assert seen[0] == "requested", f"{key}: {seen}"
    assert left_open <= set(states), f"open but never requested: {left_open - set(states)}"


async def submit(rt: Runtime, cmd: SteeringCommand, receipts: list[str]) -> None:
    key = (dedupe_scope(cmd.actor), cmd.correlation_id)
    before = rt.router.state(cmd.correlation_id, scope=key[0])
    try:
        receipt = await rt.submit(cmd)
    except TinyAgentsError as exc:
        assert not isinstance(exc, StoreError), f"a valid command the store cannot take: {exc}"
        # Nothing is kept for it: the id is as free (or as taken) as before.
        assert rt.router.state(cmd.correlation_id, scope=key[0]) == before
        receipts.append(type(exc).__name__)
        return
    assert receipt.correlation_id == cmd.correlation_id
    assert receipt.status in set(ReceiptStatus)
    if before is not None:
        assert receipt.status is ReceiptStatus.DUPLICATE
    receipts.append(receipt.status.value)


async def scenario(db: Path, raws: list[str]) -> list[str]:
    commands = [cmd for cmd in map(parse, raws) if cmd is not None]
    recorder = EventRecorder()
    receipts: list[str] = []
    half = len(commands) // 2
    async with Runtime(store=f"sqlite:///{db}", testing=True, sinks=[recorder]) as rt:
        handle = await start_run(
            rt, RUN, thread_id=THREAD, tools=["a", "b", "c"], models=["m", "n"]
        )
        for cmd in commands[:half]:
            await submit(rt, cmd, receipts)
        # The run takes what it can at its boundaries, and applies it.
        for boundary in (Boundary.BEFORE_MODEL_CALL, Boundary.AFTER_TOOL_RESULT):
            for cmd in handle.inbox.take(boundary):
                handle.inbox.applied(cmd)
        for cmd in commands[half:]:
            await submit(rt, cmd, receipts)
        for cmd in handle.inbox.take(Boundary.BEFORE_LOOP_CONTINUATION, final=True):
            handle.inbox.applied(cmd)
        await finish_run(rt, handle)  # what is still queued fails: target finished
        if commands:  # one more after the end: it fails at once, or is refused
            await submit(rt, commands[0].model_copy(update={"correlation_id": "late"}), receipts)
        open_now = rt.router.open_commands()
        left_open = {(dedupe_scope(c.actor), c.correlation_id) for c in open_now}
        for c in open_now:  # only what waits for a thread no run took
            assert rt.router.state(c.correlation_id, scope=dedupe_scope(c.actor)) == "deferred"
    check_terminal(recorder, left_open)

    # The store reopens, and what stayed open is exactly what the new runtime restores.
    async with Runtime(store=f"sqlite:///{db}", testing=True) as again:
        stored = await again.store.open_commands()
        restored = {(dedupe_scope(c.actor), c.correlation_id) for c in again.router.open_commands()}
        assert {(dedupe_scope(s.command.actor), s.command.correlation_id) for s in stored} == (
            left_open
        )
        assert restored == left_open
        assert all(s.state == "deferred" for s in stored)
    return receipts


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, min_size=1, max_size=8))
def test_any_json_is_refused_typed_or_submitted_to_exactly_one_terminal_state(
    raws: list[str],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp) / "fuzz.db", raws))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(skeletons(), min_size=1, max_size=10))
def test_plausible_commands_reach_exactly_one_terminal_state(docs: list[dict[str, Any]]) -> None:
    raws = [dumps(doc, ensure_ascii=False) for doc in docs]
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp) / "fuzz.db", raws))


def test_the_documents_reach_the_runtime() -> None:
    # Not vacuous: plausible documents become commands that are accepted and applied.
    doc = {"target": TARGETS[0], "actor": ACTORS[0], "kind": "add_instruction"}
    raws = [
        json.dumps({**doc, "payload": {"text": "x"}, "correlation_id": "c-1"}),
        json.dumps({**doc, "payload": {"text": "y"}, "created_at": "2026-01-01T00:00:00"}),
        json.dumps({**doc, "payload": {"text": "z"}, "created_at": "2026-01-01T00:00:00+09:00"}),
        json.dumps({**doc, "payload": {"text": "x"}, "correlation_id": "c-1"}),
        json.dumps(
            {
                **doc,
                "target": {"type": "thread", "thread_id": "th-never"},
                "payload": {"text": "later"},
            }
        ),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        receipts = asyncio.run(scenario(Path(tmp) / "fuzz.db", raws))
    assert receipts == ["accepted", "accepted", "accepted", "duplicate", "deferred", "accepted"]
