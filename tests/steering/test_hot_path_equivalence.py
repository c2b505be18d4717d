"""The shortcuts the steering hot path takes give what the long way gives.

``validate_payload`` turns a validated payload model into its read-only dict straight from the
model's fields; the long way is pydantic's dump with ``exclude_none`` made read-only. Both must
give equal dicts, with the same types at every level, for every kind and any JSON payload a
kind's schema takes. Its quick way (a core validator per kind, ``_quick_validators``) takes
less, and must give the same for what it takes.

``json_bytes`` (the payload policy's measure) counts plain text and plain keys inline; it must
still give the length of the compact JSON in UTF-8 for any JSON value, and stop only past its
bound.

``summarize(payload, read_only=True)`` (the summary a command's events share) is the payload
itself when the summary would keep it as it is: it must equal, type for type, the summary a
copy of the payload gets, whatever the payload holds. ``payload_summary`` makes the same
summary and, from the same walk, a bound of the payload's JSON size that the payload policy
takes instead of counting: never below ``json_bytes``, and only a bound (the policy counts
when it is past the limit). It asks a payload's keys of ``_DEFAULT_ANSWERS`` (a dict in
front of ``_is_secret``'s cache), which must answer as ``_is_secret`` does. ``PolicyContext._trusted`` (the router's context for every
command, every field by position) makes the context the constructor makes.

A chain made only of inline checks (the default pipeline) is run by the router check by check,
without ``chain.decide``: the same commands through the same policies folded the long way must
get the same receipts and the same events. It decides a command with nothing to await
(``_evaluate_now``: no checkpoint to look up, no store, a live run) without ``_evaluate``'s
coroutine, and accepts one whose queue takes it (``_accept_now``) without ``_accept``'s: any
sequence of commands to live, child, strict and finished runs, from senders with and without
the authority, with payloads too large and checkpoints to check, must get the same receipts
and the same events, field for field, either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from enum import IntEnum, StrEnum
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from steerkit import OPERATOR, apply_ready, finish_run, make_command, start_run

from tinyagents.errors import InvalidCommandError
from tinyagents.events import MemorySink, redact, summarize
from tinyagents.events.redact import (
    _DEFAULT_ANSWERS,
    DEFAULT_SECRET_KEYS,
    _DefaultAnswers,
    _is_secret,
    payload_summary,
)
from tinyagents.protocol import (
    PAYLOAD_MODELS,
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringReceipt,
    validate_payload,
)
from tinyagents.protocol.commands import (
    ReadOnlyDict,
    ReadOnlyList,
    _json_problem,
    _quick_validators,
    _read_only,
    mutable_copy,
)
from tinyagents.runs import RunInfo, RunTree
from tinyagents.runtime import Runtime
from tinyagents.steering import (
    CallNext,
    Decision,
    PayloadPolicy,
    PolicyContext,
    PolicyPipeline,
    RedirectConflict,
    SteeringQueue,
    default_policies,
)
from tinyagents.steering.policies import json_bytes
from tinyagents.testkit import FakeClock, SequentialIds, use_clock, use_ids


class Colour(StrEnum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


def _long_way(kind: SteeringKind, payload: dict[str, Any]) -> Any:
    model = PAYLOAD_MODELS[kind]
    parsed = model.model_validate(payload)
    return _read_only(model.__pydantic_serializer__.to_python(parsed, exclude_none=True))


def _shape(value: Any) -> Any:
    """The value with every leaf replaced by its type, containers by (type, contents)."""
    if isinstance(value, dict):
        return (type(value), {k: _shape(v) for k, v in value.items()})
    if isinstance(value, list):
        return (type(value), [_shape(v) for v in value])
    return type(value)


names = st.sampled_from(["search", "fetch", "a b", "gpt-x", Colour.RED])
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6).filter(lambda t: t.isprintable()),
    st.just(Colour.RED),
    st.just(Level.HIGH),
)
json_values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)
optional_text = st.none() | st.text(min_size=1, max_size=6).filter(lambda t: t.strip() != "")

PAYLOADS: dict[SteeringKind, Any] = {
    SteeringKind.ADD_INSTRUCTION: st.fixed_dictionaries({"text": names}),
    SteeringKind.REPLACE_INSTRUCTION: st.fixed_dictionaries({"text": names}),
    SteeringKind.ASK_CLARIFYING_QUESTION: st.fixed_dictionaries({"question": names}),
    SteeringKind.PROVIDE_CONTEXT: st.fixed_dictionaries(
        {"value": json_values},
        optional={"text": optional_text, "source": optional_text, "interrupt_id": st.none()},
    ),
    SteeringKind.CONSTRAIN_TOOLS: st.fixed_dictionaries({"tools": st.lists(names, max_size=3)}),
    SteeringKind.CONSTRAIN_MODEL: st.fixed_dictionaries(
        {"models": st.lists(names, min_size=1, max_size=3)}
    ),
    SteeringKind.PAUSE: st.fixed_dictionaries({}, optional={"reason": optional_text}),
    SteeringKind.CANCEL: st.fixed_dictionaries(
        {}, optional={"reason": optional_text, "abort": st.none() | st.booleans()}
    ),
    SteeringKind.APPROVE: st.fixed_dictionaries(
        {}, optional={"value": json_values, "reason": optional_text, "interrupt_id": st.none()}
    ),
    SteeringKind.REDIRECT: st.fixed_dictionaries(
        {"goto": names | st.lists(names, min_size=1, max_size=2).map(tuple)},
        optional={"instruction": optional_text},
    ),
    SteeringKind.REQUEST_STATUS: st.just({}),
    SteeringKind.UPDATE_BUDGET: st.fixed_dictionaries(
        {"max_tokens": st.integers(min_value=1, max_value=10**6) | st.just(Level.HIGH)},
        optional={"deadline_s": st.none() | st.floats(min_value=0.5, max_value=100)},
    ),
    SteeringKind.UPDATE_STATE: st.fixed_dictionaries(
        {"update": st.dictionaries(st.text(max_size=4), json_values, min_size=1, max_size=3)},
        optional={"as_node": optional_text},
    ),
}


@pytest.mark.parametrize("kind", sorted(PAYLOADS, key=str))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_validate_payload_equals_the_dump_made_read_only(kind: SteeringKind, data: Any) -> None:
    payload = data.draw(PAYLOADS[kind])
    try:
        expected = _long_way(kind, payload)
    except Exception:  # refused by the schema (a blank name, say): refused both ways
        with pytest.raises(InvalidCommandError):
            validate_payload(kind, payload)
        return
    got = validate_payload(kind, payload)
    assert type(got) is ReadOnlyDict
    assert got == expected
    assert _shape(got) == _shape(expected)


def test_every_kind_has_a_payload_strategy() -> None:
    assert set(PAYLOADS) | {SteeringKind.RESUME, SteeringKind.REJECT} == set(SteeringKind)


def test_nested_containers_are_read_only_copies() -> None:
    inner = {"a": [1, {"b": None}], "t": (1, 2)}
    got = validate_payload(SteeringKind.PROVIDE_CONTEXT, {"value": inner, "source": None})
    assert got == {"value": {"a": [1, {"b": None}], "t": [1, 2]}}
    value = got["value"]
    assert type(value) is ReadOnlyDict and value is not inner
    assert type(value["a"]) is ReadOnlyList and type(value["t"]) is ReadOnlyList
    assert type(value["a"][1]) is ReadOnlyDict


class PassOn:
    """An ordinary (not inline) policy that passes every command on: a chain holding it is
    decided the long way, through ``chain.decide``."""

    policy_id = "pass-on"

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        return await call_next(cmd)


def _commands() -> list[SteeringCommand]:
    stranger = SteeringActor.human("eve", tenant_id="default", scopes=[])
    return [
        make_command("r-1"),  # accepted
        make_command("r-1", actor=stranger),  # authority: no control scope
        make_command("r-1", SteeringKind.CONSTRAIN_TOOLS, {"tools": ["search", "shell"]}),
        make_command("r-1", SteeringKind.CONSTRAIN_TOOLS, {"tools": ["search"]}),
        make_command("r-1", SteeringKind.ADD_INSTRUCTION, {"text": "x" * 20_000}),  # payload
        make_command("r-1", SteeringKind.REQUEST_STATUS, {}, checkpoint_id="ck-1"),  # staleness
        make_command("nowhere"),  # the router: not found
    ]


async def _run(
    long_way: bool,
) -> tuple[list[SteeringReceipt], list[tuple[Any, ...]], bool]:
    policies: list[Any] = [*default_policies(), *([PassOn()] if long_way else [])]
    sink = MemorySink()
    with use_ids(SequentialIds()):
        async with Runtime(sinks=[sink], policies=PolicyPipeline(policies)) as rt:
            handle = await start_run(rt, "r-1", tools=["search", "fetch"])
            receipts = [await rt.submit(cmd) for cmd in _commands()]
            apply_ready(handle)
            inline = rt.router.pipeline.chain().checks is not None
    events = [
        (e.type, e.correlation_id, e.run_id, e.reason, e.policy_id)
        for e in sink.events
        if e.type.startswith("steering.")
    ]
    return receipts, events, inline


async def test_inline_checks_decide_as_the_folded_chain_does() -> None:
    short_receipts, short_events, short_inline = await _run(long_way=False)
    long_receipts, long_events, long_inline = await _run(long_way=True)
    assert (short_inline, long_inline) == (True, False)  # each took the way it should
    assert [r.model_dump() for r in short_receipts] == [r.model_dump() for r in long_receipts]
    assert short_events == long_events
    statuses = [r.status.value for r in short_receipts]
    assert statuses == [
        "accepted",
        "rejected",
        "rejected",
        "accepted",
        "rejected",
        "rejected",
        "rejected",
    ]
    assert [r.policy_id for r in short_receipts] == [
        "default",
        "authority",
        "allowlist",
        "default",
        "payload",
        "staleness",
        "router",
    ]
    assert OPERATOR.tenant_id == "default"


def test_a_chain_with_an_ordinary_policy_has_no_inline_checks() -> None:
    assert PolicyPipeline(default_policies()).chain().checks is not None
    assert PolicyPipeline([*default_policies(), PassOn()]).chain().checks is None
    assert PolicyPipeline([]).chain().checks == ()


any_text = st.text(max_size=8) | st.sampled_from(['say "hi"', "a\\b", "tab\there", "é🧭", "x_1"])
any_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=16,
)


@settings(max_examples=300, deadline=None)
@given(value=any_json)
def test_json_bytes_is_the_compact_json_length_in_utf8(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert json_bytes(value) == len(text.encode("utf-8", "surrogatepass"))


def test_a_plain_queue_still_refuses_an_id_it_holds() -> None:
    # put_nowait skips conflict() for a new id in a queue that never held a conflict kind.
    queue = SteeringQueue()
    first = make_command("r-1")
    assert queue.put_nowait(first).queued
    again = queue.put_nowait(first)
    assert (again.queued, again.rejected) == (
        False,
        f"duplicate correlation id {first.correlation_id}",
    )
    assert len(queue) == 1


QUICK = _quick_validators()


def _quick(kind: SteeringKind, payload: Any) -> Any:
    """What the quick way gives for ``payload``, or None where it leaves it to the long way."""
    try:
        return QUICK[kind].validate_python(payload)
    except ValidationError:
        return None


surrogates = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1)
hostile_leaves = st.one_of(
    leaves,
    names,
    st.binary(max_size=3),
    surrogates.map(lambda s: "a" + s),
    st.text(max_size=4),
    st.sets(names, max_size=2),
    st.frozensets(names, max_size=2),
)
hostile_values = st.one_of(
    hostile_leaves,
    st.lists(hostile_leaves, max_size=3),
    st.lists(hostile_leaves, max_size=3).map(tuple),
    st.dictionaries(st.text(max_size=3), hostile_leaves, max_size=2),
)
quick_kind_payloads = st.dictionaries(
    st.sampled_from(
        [
            "text",
            "question",
            "tools",
            "models",
            "reason",
            "abort",
            "goto",
            "instruction",
            "source",
            "interrupt_id",
            "value",
            "x",
        ]
    ),
    hostile_values,
    max_size=3,
)


@pytest.mark.parametrize("kind", sorted(QUICK, key=str))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=quick_kind_payloads)
def test_the_quick_way_gives_what_the_long_way_gives(
    kind: SteeringKind, payload: dict[str, Any]
) -> None:
    # The quick way skips ``_json_problem``'s walk and the payload model: whatever it takes,
    # the long way (the walk, then the model) takes too and makes the same read-only dict of it
    quick = _quick(kind, payload)
    if quick is None:  # the long way decides (and says what is wrong)
        return
    assert _json_problem(payload) is None
    expected = _long_way(kind, payload)
    assert type(quick) is ReadOnlyDict
    assert quick == expected
    assert _shape(quick) == _shape(expected)
    assert validate_payload(kind, payload) == quick


@pytest.mark.parametrize("kind", sorted(PAYLOADS, key=str))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_quick_way_gives_what_the_long_way_gives_for_valid_payloads(
    kind: SteeringKind, data: Any
) -> None:
    payload = data.draw(PAYLOADS[kind])
    quick = _quick(kind, payload) if kind in QUICK else None
    if quick is not None:
        assert quick == _long_way(kind, payload)
        assert _shape(quick) == _shape(_long_way(kind, payload))


def test_the_quick_way_takes_plain_text_and_leaves_the_rest_to_the_long_way() -> None:
    # the usual payloads (the steering benchmark's among them) are taken the quick way
    usual = {
        SteeringKind.ADD_INSTRUCTION: {"text": "focus on item 1"},
        SteeringKind.PROVIDE_CONTEXT: {"text": "context 1", "source": "crm"},
        SteeringKind.CONSTRAIN_TOOLS: {"tools": ["search", "fetch"]},
        SteeringKind.CONSTRAIN_MODEL: {"models": ["b", "a", "b"]},
        SteeringKind.REDIRECT: {"goto": ["n1", "n2"], "instruction": "go on"},
        SteeringKind.CANCEL: {"reason": "r\u00e9", "abort": True},
        SteeringKind.APPROVE: {"interrupt_id": "i-1"},
        SteeringKind.REQUEST_STATUS: {},
    }
    for kind, payload in usual.items():
        assert _quick(kind, payload) == _long_way(kind, payload), kind
    got = _quick(SteeringKind.CONSTRAIN_TOOLS, {"tools": ["b", "a", "b"]})
    assert got == {"tools": ["a", "b"]} and type(got) is ReadOnlyDict
    assert got is not None and type(got["tools"]) is ReadOnlyList
    tools = SteeringKind.CONSTRAIN_TOOLS
    for payload in ({"tools": ("a",)}, {"tools": ["a\ud800"]}, {"tools": [b"a"]}, {"x": 1}):
        assert _quick(tools, payload) is None
    text = SteeringKind.ADD_INSTRUCTION
    assert _quick(text, {"text": "caf\u00e9"}) == {"text": "caf\u00e9"}
    for payload in ({"text": "a\udc00"}, {"text": "\u65e5\u672c"}, {"text": " \u200b"}):
        assert _quick(text, payload) is None  # no visible ASCII: the long way judges it
    assert validate_payload(text, {"text": "\u65e5\u672c"}) == {"text": "\u65e5\u672c"}
    for payload in ({"text": "x", "value": 1}, {"text": "x", "source": None}):
        assert _quick(SteeringKind.PROVIDE_CONTEXT, payload) is None
    assert _quick(SteeringKind.PAUSE, {"reason": "a\ud800"}) is None
    with pytest.raises(InvalidCommandError, match="not valid UTF-8"):
        validate_payload(SteeringKind.ADD_INSTRUCTION, {"text": "a\udc00"})
    with pytest.raises(InvalidCommandError, match="not valid UTF-8"):
        validate_payload(SteeringKind.PAUSE, {"reason": "a\ud800"})


@settings(max_examples=300, deadline=None)
@given(value=any_json, limit=st.integers(min_value=-1, max_value=64))
def test_json_bytes_stops_only_past_its_bound(value: Any, limit: int) -> None:
    # ``stop_above``: the exact count up to the bound, and something past it once past it
    size = json_bytes(value)
    bounded = json_bytes(value, stop_above=limit if limit >= 0 else None)
    if limit < 0 or size <= limit:
        assert bounded == size
    else:
        assert bounded > limit


summary_keys = st.sampled_from(["text", "a", "password", "api_key", "max_tokens", "x" * 7])
summary_text = st.sampled_from(["", "hi", "twelve chars", Colour.RED]) | st.text(max_size=8)
summary_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | summary_text,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(summary_keys | any_text, inner, max_size=4)
    ),
    max_leaves=16,
)


@settings(max_examples=400, deadline=None)
@given(
    value=st.dictionaries(summary_keys | any_text, summary_values, max_size=4),
    max_chars=st.sampled_from([3, 6, 200]),
)
def test_a_read_only_summary_of_a_payload_is_the_summary_of_its_copy(
    value: dict[str, Any], max_chars: int
) -> None:
    # A read-only payload the summary keeps as it is is its own summary (``summarize``'s
    # shortcut); whatever the payload, the summary is the one a copy of it gets, type for type.
    payload = _read_only(value)
    summary = summarize(payload, max_chars=max_chars, read_only=True)
    long_way = summarize(mutable_copy(payload), max_chars=max_chars, read_only=True)
    assert summary == long_way
    assert _shape(summary) == _shape(long_way)
    if summary is payload:
        assert payload and long_way is not payload


def test_a_payload_kept_whole_is_its_own_summary_and_others_are_copied() -> None:
    def summary(value: Any) -> Any:
        payload = _read_only(value)
        got = summarize(payload, read_only=True)
        assert got == summarize(mutable_copy(payload), read_only=True)
        return got is payload

    assert summary({"text": "focus on item 1"})
    assert summary({"tools": ["search", "fetch"], "n": 1, "x": None, "y": 0.5, "ok": True})
    assert summary({"value": {"a": [1, {"b": "c"}]}})
    assert summary({"a": list(range(255))})  # 256 items in all: every one kept
    assert not summary({})  # the one shared empty summary
    assert not summary({"password": "hunter2"})  # masked
    assert not summary({"text": "x" * 201})  # cut
    assert not summary({"k" * 201: "v"})  # a key cut
    assert not summary({"a": list(range(256))})  # 257 items: a marker for the rest
    assert not summary({"value": {}})  # an empty dict inside: the shared empty summary
    deep: Any = "leaf"
    for _ in range(40):
        deep = [deep]
    assert not summary({"deep": deep})  # deeper than MAX_SUMMARY_DEPTH: a marker


@settings(max_examples=400, deadline=None)
@given(
    value=st.dictionaries(
        summary_keys | any_text,
        summary_values | st.sampled_from([Level.HIGH, -(10**3999), 10**20, -1.5e-308]),
        max_size=4,
    )
)
def test_a_payloads_summary_and_size_bound_come_from_one_walk(value: dict[str, Any]) -> None:
    payload = _read_only(value)
    summary, bound = payload_summary(payload)
    expected = summarize(payload, read_only=True)
    assert summary == expected and _shape(summary) == _shape(expected)
    assert (summary is payload) == (expected is payload)
    if bound is not None:  # kept whole (or empty): never less than the policy would count
        assert summary is payload or not payload
        assert bound >= json_bytes(payload)
    else:
        assert summary is not payload


@pytest.mark.parametrize("over", [0, 1])
async def test_the_payload_policy_counts_a_payload_its_bound_leaves_in_doubt(over: int) -> None:
    # {"text":"xxxx…"}: the summary's bound is far above the exact count, which decides
    payload = {"text": "x" * 40}
    exact = json_bytes(payload)
    assert payload_summary(_read_only(payload))[1] > exact
    policies = [
        PayloadPolicy(max_text_bytes=exact - over) if p.policy_id == "payload" else p
        for p in default_policies()
    ]
    async with Runtime(testing=True, policies=PolicyPipeline(policies)) as rt:
        await start_run(rt, "r-1")
        receipt = await rt.submit(make_command("r-1", payload=payload))
    assert receipt.accepted is (over == 0)


class _Liar:
    """A policy of one's own, before the payload policy, that tells it a payload is tiny."""

    policy_id = "liar"

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        with contextlib.suppress(AttributeError):  # read-only: it cannot
            ctx.payload_bound = (cmd.payload, 2)  # type: ignore[misc]
        return await call_next(cmd)


async def test_a_policy_cannot_make_the_payload_policy_skip_counting_a_payload() -> None:
    """``PolicyContext.payload_bound`` was a public field: a policy before the payload policy
    set it to ``(cmd.payload, 2)`` and a 100 kB payload was accepted, never counted."""
    big = {"text": "y" * 100_000}
    async with Runtime(testing=True, policies=PolicyPipeline([_Liar(), *default_policies()])) as rt:
        await start_run(rt, "r-1")
        receipt = await rt.submit(make_command("r-1", payload=big))
    assert receipt.status is ReceiptStatus.REJECTED and receipt.policy_id == "payload"
    ctx = PolicyContext(target=RunInfo(run_id="r-1"), tree=RunTree())
    with pytest.raises(AttributeError):
        ctx.payload_bound = (big, 2)  # type: ignore[misc]
    assert ctx.payload_bound is None


def test_the_payload_policy_takes_a_bound_only_for_the_payload_it_checks() -> None:
    big = make_command("r-1", payload={"text": "y" * 100})
    ctx = PolicyContext(target=RunInfo(run_id="r-1"), tree=RunTree())
    policy = PayloadPolicy(max_text_bytes=64)
    ctx._payload_bound = (big.payload, 64)  # what the router would know of this payload
    assert policy.check(big, ctx) is None
    ctx._payload_bound = (ReadOnlyDict(), 2)  # another payload's: counted
    assert (policy.check(big, ctx) or "").startswith("payload too large")


@given(
    testing=st.booleans(),
    grants=st.sets(st.tuples(st.text(max_size=3), st.text(max_size=3)), max_size=2),
    trusted=st.frozensets(st.text(max_size=3), max_size=2),
    task_id=st.none() | st.text(max_size=4),
    node_id=st.none() | st.text(max_size=4),
    bound=st.none() | st.integers(min_value=2, max_value=10**6),
)
def test_the_routers_policy_context_is_the_one_the_constructor_makes(
    testing: bool,
    grants: set[tuple[str, str]],
    trusted: frozenset[str],
    task_id: str | None,
    node_id: str | None,
    bound: int | None,
) -> None:
    # ``PolicyContext._trusted`` (every field by position, for every command): every field set,
    # the checkpoint ones at their defaults, none left to a default it does not know of
    info, tree = RunInfo(run_id="r-1"), RunTree()
    payload_bound = None if bound is None else (ReadOnlyDict(), bound)
    made = PolicyContext._trusted(
        info, tree, testing, grants, trusted, task_id, node_id, payload_bound
    )
    expected = PolicyContext(
        target=info,
        tree=tree,
        testing=testing,
        grants=grants,
        trusted_middleware=trusted,
        task_id=task_id,
        node_id=node_id,
    )
    assert expected.payload_bound is None  # the router's alone: no argument sets it
    expected._payload_bound = payload_bound
    assert made == expected
    for f in dataclasses.fields(PolicyContext):  # a field it left unset raises here
        assert getattr(made, f.name) is getattr(expected, f.name)


# Where a command goes (``_evaluate_now``'s and ``_accept_now``'s cases): a live run, a child
# (its parent hears of it), a run whose queue refuses a second redirect, and a finished run
# (its queue is awaited); sent as usual, by a sender without the authority, with a payload
# too large, or with a checkpoint to look up (the long way).
ACCEPT_TARGETS = ["r-1", "child", "strict", "done"]
ACCEPT_KINDS = [
    SteeringKind.ADD_INSTRUCTION,
    SteeringKind.REDIRECT,
    SteeringKind.CANCEL,
    SteeringKind.REQUEST_STATUS,
]
accept_steps = st.lists(
    st.tuples(
        st.sampled_from(ACCEPT_TARGETS),
        st.sampled_from(ACCEPT_KINDS),
        st.integers(min_value=0, max_value=20),  # correlation id: some repeat
        st.integers(min_value=0, max_value=3).map(lambda n: n == 0),  # a boundary after it
        # mostly as usual: queues fill only with commands accepted
        st.sampled_from(["usual"] * 5 + ["stranger", "large", "checkpoint"]),
    ),
    min_size=3,
    max_size=16,
)


def _accept_command(run_id: str, kind: SteeringKind, n: int, how: str) -> SteeringCommand:
    payload: dict[str, Any] | None = None
    if kind is SteeringKind.REDIRECT:
        payload = {"instruction": "go elsewhere"}
    if how == "large":  # the payload policy refuses it
        kind, payload = SteeringKind.ADD_INSTRUCTION, {"text": "x" * 20_000}
    fields: dict[str, Any] = {"correlation_id": f"c-{n}"}
    if how == "stranger":
        fields["actor"] = SteeringActor.human("eve", tenant_id="default", scopes=[])
    if how == "checkpoint":
        fields["checkpoint_id"] = "ck-1"
    return make_command(run_id, kind, payload, **fields)


async def _accept_run(
    steps: list[tuple[str, SteeringKind, int, bool, str]], without_coroutine: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    sink = MemorySink()
    with use_clock(FakeClock()), use_ids(SequentialIds()):
        async with Runtime(sinks=[sink], max_queued=1) as rt:
            if not without_coroutine:  # every command the long way: ``_evaluate``, ``_accept``
                rt.router._evaluate_now = lambda *args: None  # type: ignore[method-assign]
                rt.router._accept_now = lambda *args: None  # type: ignore[method-assign]
            handles = {
                "r-1": await start_run(rt, "r-1"),
                "child": await start_run(rt, "child", parent="r-1"),
                "strict": await start_run(rt, "strict", redirect_conflict=RedirectConflict.ERROR),
                "done": await start_run(rt, "done"),
            }
            await finish_run(rt, handles["done"])
            receipts = []
            for run_id, kind, n, boundary, how in steps:
                receipt = await rt.submit(_accept_command(run_id, kind, n, how))
                receipts.append(receipt.model_dump())
                if boundary:
                    apply_ready(handles[run_id])
    return receipts, [dataclasses.asdict(event) for event in sink.events]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=accept_steps)
def test_deciding_without_a_coroutine_gives_what_evaluate_gives(
    steps: list[tuple[str, SteeringKind, int, bool, str]],
) -> None:
    short = asyncio.run(_accept_run(steps, without_coroutine=True))
    long = asyncio.run(_accept_run(steps, without_coroutine=False))
    assert short == long


async def test_a_live_run_decides_a_command_without_a_coroutine() -> None:
    """The usual command, and one its policies refuse, is decided by ``_evaluate_now``; one
    with a checkpoint to look up is left to ``_evaluate`` (else the test would only compare the
    long way with itself)."""
    stranger = SteeringActor.human("eve", tenant_id="default", scopes=[])
    async with Runtime() as rt:
        await start_run(rt, "r-1")
        taken: list[bool] = []
        evaluate_now = rt.router._evaluate_now

        def spy(*args: Any) -> SteeringReceipt | None:
            receipt = evaluate_now(*args)
            taken.append(receipt is not None)
            return receipt

        rt.router._evaluate_now = spy  # type: ignore[method-assign]
        receipts = [
            await rt.submit(make_command("r-1")),
            await rt.submit(make_command("r-1", actor=stranger)),
            await rt.submit(make_command("r-1", checkpoint_id="ck-1")),
        ]
    assert [r.status.value for r in receipts] == ["accepted", "rejected", "rejected"]
    assert taken == [True, True, False]


secret_like_keys = st.sampled_from(
    ["api_key", "apiKeys", "max_tokens", "token", "tokenizer", "Set-Cookie", "text", "goto"]
) | st.text(max_size=12)


@settings(max_examples=300, deadline=None)
@given(key=secret_like_keys)
def test_the_default_names_answers_are_is_secrets(key: str) -> None:
    expected = _is_secret.__wrapped__(key, DEFAULT_SECRET_KEYS)
    assert _DEFAULT_ANSWERS[key] is expected  # asked first
    assert _DEFAULT_ANSWERS[key] is expected  # and kept


def test_the_default_names_answers_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = _DefaultAnswers()
    monkeypatch.setattr(redact, "_DEFAULT_ANSWERS_KEPT", 3)
    for n in range(10):
        assert answers[f"key_{n}"] is False
    assert answers["token"] is True  # answered, past the bound, but not kept
    assert len(answers) == 3
    assert answers["x" * (redact._CACHED_KEY_CHARS + 1)] is False
    assert len(answers) == 3
