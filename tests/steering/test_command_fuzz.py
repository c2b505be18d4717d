"""Arbitrary JSON fed to ``SteeringCommand.model_validate_json``: it is refused with
``InvalidCommandError`` (and nothing else), or it is a command that reads back from its own
JSON as itself, with a timezone-aware ``created_at`` and a read-only payload."""

from __future__ import annotations

import copy
import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyagents.errors import InvalidCommandError
from tinyagents.protocol import SteeringCommand, SteeringDelivery
from tinyagents.protocol.commands import ReadOnlyDict

SURROGATES = st.sampled_from(["\ud800", "\udfff", "a\udc80b"])
names = st.sampled_from(["ok", "r-1", "pause", "agent_run", "human", "2026-01-01T00:00:00"])
texts = st.one_of(st.text(max_size=8), names, st.just(""), st.just(" "))
# Numbers of (up to) n digits, put in the JSON text as "<big n>" placeholders: Python will not
# write (or print) an int of more than 4300 digits.
BIG = re.compile(r'"<big (-?)(\d+)>"')
integers = st.integers() | st.sampled_from([0, -1, 2**63, -(2**64), 10**300])
big_integers = st.sampled_from([3999, 4000, 4001, 4300, 4301, 5000]).flatmap(
    lambda n: st.sampled_from([f"<big {n}>", f"<big -{n}>"])
)
floats = st.floats() | st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, -0.0])
leaves = st.one_of(
    st.none(), st.booleans(), integers, big_integers, floats, texts, texts, SURROGATES
)
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)

offsets = st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23)).map(
    lambda d: timezone(timedelta(minutes=d // timedelta(minutes=1)))
)
datetimes = st.one_of(
    st.datetimes().map(datetime.isoformat),  # naive
    st.builds(lambda d, tz: d.replace(tzinfo=tz).isoformat(), st.datetimes(), offsets),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.sampled_from(["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00", "yesterday"]),
)

TARGETS = [
    {"type": "agent_run", "run_id": "r-1"},
    {"type": "subagent_run", "parent_run_id": "p", "run_id": "c"},
    {"type": "graph_task", "run_id": "r", "task_id": "t"},
    {"type": "graph_node", "run_id": "r", "node": "n"},
    {"type": "thread", "thread_id": "th"},
]
ACTORS = [
    {"type": "human", "user_id": "u", "tenant_id": "acme", "scopes": ["agent:control"]},
    {"type": "parent_agent", "run_id": "p", "agent_id": "orchestrator"},
    {"type": "graph_supervisor", "run_id": "r", "node": "sup"},
    {"type": "middleware", "name": "mw", "run_id": None},
    {"type": "test", "name": "t"},
]
VALID_PAYLOADS = [
    ("add_instruction", {"text": "focus"}),
    ("replace_instruction", {"text": "new goal"}),
    ("ask_clarifying_question", {"question": "which?"}),
    ("provide_context", {"text": "ctx", "source": "crm"}),
    ("provide_context", {"value": {"ok": True, "n": [1, 2.5, None]}, "interrupt_id": "i"}),
    ("constrain_tools", {"tools": ["a", "b"]}),
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
    ("update_state", {"update": {"x": [1, 2.5, None], "y": {"z": "w"}}, "as_node": "a"}),
]
skeletons = st.builds(
    lambda pair, fields: {"kind": pair[0], "payload": pair[1], **fields},
    st.sampled_from(VALID_PAYLOADS),
    st.fixed_dictionaries(
        {"target": st.sampled_from(TARGETS), "actor": st.sampled_from(ACTORS)},
        optional={
            "priority": st.sampled_from([0, 50, 100, 200, 7, "high"]),
            "delivery": st.sampled_from([d.value for d in SteeringDelivery]),
            "policy_ref": st.fixed_dictionaries({"policy_id": names}, optional={"version": texts}),
            "correlation_id": names | texts,
            "created_at": datetimes,
            "checkpoint_id": st.none() | names,
            "fork": st.booleans(),
        },
    ),
)


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[Any]) -> Any:
    """``base`` with a few of its values (at any depth) replaced by arbitrary JSON."""
    doc = copy.deepcopy(draw(base))  # sampled_from hands out shared objects
    for _ in range(draw(st.integers(0, 3))):
        holders: list[tuple[Any, Any]] = []  # (container, key or index)
        stack = [doc]
        while stack:
            node = stack.pop()
            pairs = node.items() if isinstance(node, dict) else enumerate(node)
            for key, value in pairs:
                holders.append((node, key))
                if isinstance(value, dict | list):
                    stack.append(value)
        if not holders:
            break
        node, key = draw(st.sampled_from(holders))
        node[key] = draw(json_values | datetimes)
    return doc


@st.composite
def documents(draw: st.DrawFn) -> str:
    doc = draw(st.one_of(json_values, skeletons, mutated(skeletons)))
    # NaN and Infinity are written as such (not JSON, but common), and a lone surrogate
    # either as a \\ud800 escape or as the character itself
    return dumps(doc, ensure_ascii=draw(st.booleans()))


def dumps(doc: Any, *, ensure_ascii: bool) -> str:
    raw = json.dumps(doc, allow_nan=True, ensure_ascii=ensure_ascii)
    return BIG.sub(lambda m: m[1] + "9" * int(m[2]), raw)


def check(raw: str) -> None:
    try:
        cmd = SteeringCommand.model_validate_json(raw)
    except InvalidCommandError:
        return
    assert cmd.created_at.utcoffset() == timedelta(0)
    assert type(cmd.payload) is ReadOnlyDict
    again = SteeringCommand.model_validate_json(cmd.model_dump_json())
    assert again == cmd
    assert again.model_dump_json() == cmd.model_dump_json()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_any_json_is_a_command_that_round_trips_or_an_invalid_command(raw: str) -> None:
    check(raw)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(skeletons)
def test_plausible_commands_round_trip_or_are_invalid_commands(doc: dict[str, Any]) -> None:
    check(dumps(doc, ensure_ascii=False))


def test_the_documents_reach_valid_commands_too() -> None:
    # Not vacuous: well-formed skeletons are commands (the tests above would pass if every
    # document were refused).
    doc = {"target": TARGETS[0], "actor": ACTORS[4], "kind": "add_instruction"}
    check(json.dumps({**doc, "payload": {"text": "x"}, "created_at": "2026-01-01T00:00:00"}))
    cmd = SteeringCommand.model_validate_json(json.dumps({**doc, "payload": {"text": "x"}}))
    assert cmd.text == "x"
