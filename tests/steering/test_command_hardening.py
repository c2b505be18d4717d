"""Commands that could not be stored, compared or read back are refused at construction.

Each test here shows one way an accepted command used to break later (in the queue, the store
or on reload) and checks it is now refused, or normalised, when the command is built.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import pickle
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from steerkit import start_run

from tinyagents.errors import InvalidCommandError, TinyAgentsError
from tinyagents.protocol import (
    Boundary,
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringPolicyRef,
    SteeringPriority,
    SteeringTarget,
)
from tinyagents.protocol.commands import MAX_PAYLOAD_DEPTH, mutable_copy
from tinyagents.runs import RunInfo, RunLimits, RunTree, RunUsage
from tinyagents.runtime import Runtime
from tinyagents.steering import (
    BudgetPolicy,
    CallNext,
    Decision,
    PayloadPolicy,
    PolicyContext,
    PolicyPipeline,
    SteeringQueue,
    default_policies,
)
from tinyagents.steering.policies import json_bytes

K = SteeringKind
RUN = SteeringTarget.agent_run("r-1")
ACTOR = SteeringActor.test()
LONE = "\ud800"  # a lone surrogate: a str, but not text any encoder accepts


def build(kind: SteeringKind, payload: Any = None, **fields: Any) -> SteeringCommand:
    fields.setdefault("target", RUN)
    fields.setdefault("actor", ACTOR)
    return SteeringCommand(kind=kind, payload={} if payload is None else payload, **fields)


def as_json(kind: SteeringKind, payload: dict[str, Any], **fields: Any) -> str:
    """The JSON of a command (``allow_nan``: NaN/Infinity tokens are written as such)."""
    data = {
        "target": RUN.model_dump(mode="json"),
        "actor": ACTOR.model_dump(mode="json"),
        "kind": kind.value,
        "payload": payload,
        **fields,
    }
    return json.dumps(data)


def nested(depth: int) -> Any:
    """A value ``depth`` containers deep (built in a loop: no recursion here either)."""
    value: Any = "leaf"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


# --------------------------------------------------------------------------- 1. created_at


NAIVE = datetime(2026, 1, 1, 10, 0)


def test_a_naive_created_at_is_taken_as_utc_on_every_path() -> None:
    built = build(K.PAUSE, created_at=NAIVE)
    validated = SteeringCommand.model_validate(
        {"target": RUN, "actor": ACTOR, "kind": "pause", "created_at": NAIVE}
    )
    parsed = SteeringCommand.model_validate_json(as_json(K.PAUSE, {}, created_at=NAIVE.isoformat()))
    for cmd in (built, validated, parsed):
        assert cmd.created_at.utcoffset() == timedelta(0)
        assert cmd.created_at == NAIVE.replace(tzinfo=UTC)


def test_an_aware_created_at_is_converted_to_utc_keeping_its_instant() -> None:
    plus_two = datetime(2026, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    for cmd in (
        build(K.PAUSE, created_at=plus_two),
        SteeringCommand.model_validate_json(as_json(K.PAUSE, {}, created_at=plus_two.isoformat())),
    ):
        assert cmd.created_at.tzinfo is UTC
        assert cmd.created_at == plus_two


def test_a_created_at_that_has_no_utc_equivalent_is_an_invalid_command() -> None:
    edge = datetime.max.replace(tzinfo=timezone(timedelta(hours=-5)))  # past year 9999 in UTC
    with pytest.raises(InvalidCommandError, match="created_at"):
        build(K.PAUSE, created_at=edge)


def test_a_queue_orders_commands_built_with_naive_and_aware_times() -> None:
    # Before: the heap compared a naive with an aware datetime and raised TypeError (the
    # command was already accepted, and the heap was left half-pushed).
    later_naive = build(K.PAUSE, created_at=NAIVE, correlation_id="c-naive")
    earlier_aware = build(
        K.RESUME, created_at=NAIVE.replace(tzinfo=UTC) - timedelta(hours=1), correlation_id="c-aw"
    )
    queue = SteeringQueue()
    queue.put_nowait(later_naive)
    queue.put_nowait(earlier_aware)
    ready = queue.pop_ready(Boundary.BEFORE_MODEL_CALL)
    assert [c.correlation_id for c in ready] == ["c-aw", "c-naive"]


# --------------------------------------------------------------------------- 2. NaN / inf

NON_FINITE = [
    (K.PROVIDE_CONTEXT, {"value": math.nan}, "payload.value"),
    (K.PROVIDE_CONTEXT, {"value": {"scores": [1.0, math.inf]}}, "payload.value.scores[1]"),
    (K.UPDATE_BUDGET, {"deadline_s": math.inf}, "payload.deadline_s"),
    (K.UPDATE_STATE, {"update": {"x": -math.inf}}, "payload.update.x"),
    (K.APPROVE, {"value": math.nan}, "payload.value"),
]


@pytest.mark.parametrize(("kind", "payload", "where"), NON_FINITE)
def test_non_finite_floats_are_refused_anywhere_in_the_payload(
    kind: SteeringKind, payload: dict[str, Any], where: str
) -> None:
    with pytest.raises(InvalidCommandError, match="not a finite number") as err:
        build(kind, payload)
    assert where in str(err.value)
    with pytest.raises(InvalidCommandError, match="not a finite number"):
        SteeringCommand.model_validate_json(as_json(kind, payload))  # NaN / Infinity tokens


def test_a_json_number_too_large_for_a_float_is_refused() -> None:
    raw = as_json(K.PROVIDE_CONTEXT, {"value": 1}).replace('"value": 1', '"value": 1e400')
    with pytest.raises(InvalidCommandError, match="not a finite number"):
        SteeringCommand.model_validate_json(raw)


def test_an_integer_too_long_to_read_back_is_refused() -> None:
    with pytest.raises(InvalidCommandError, match=r"payload\.value"):
        build(K.PROVIDE_CONTEXT, {"value": 10**5000})
    assert build(K.PROVIDE_CONTEXT, {"value": 10**100}).payload["value"] == 10**100


# --------------------------------------------------------------------------- 3. unencodable text


def forged(model: Any, **update: Any) -> Any:
    """``model`` with fields set past validation (as ``model_copy(update=...)`` does): a
    target or actor built by its classmethod refuses such text itself."""
    return model.model_copy(update=update)


UNENCODABLE = [
    # (keywords for build, the field the error must name)
    ({"kind": K.ADD_INSTRUCTION, "payload": {"text": f"hi {LONE}"}}, "text"),
    ({"kind": K.PROVIDE_CONTEXT, "payload": {"value": {"a": ["ok", LONE]}}}, "payload.value.a[1]"),
    ({"kind": K.PROVIDE_CONTEXT, "payload": {"value": {LONE: 1}}}, "payload.value"),
    ({"kind": K.UPDATE_STATE, "payload": {"update": {LONE: 1}}}, "update"),
    ({"kind": K.PAUSE, "payload": {"reason": LONE}}, "reason"),
    ({"kind": K.PAUSE, "correlation_id": LONE}, "correlation_id"),
    ({"kind": K.PAUSE, "checkpoint_id": LONE}, "checkpoint_id"),
    ({"kind": K.PAUSE, "target": forged(RUN, run_id=LONE)}, "target.run_id"),
    (
        {"kind": K.PAUSE, "target": forged(SteeringTarget.graph_node("r", "n"), node=LONE)},
        "target.node",
    ),
    ({"kind": K.PAUSE, "actor": forged(SteeringActor.human("u"), user_id=LONE)}, "actor.user_id"),
    (
        {"kind": K.PAUSE, "actor": forged(SteeringActor.human("u"), tenant_id=LONE)},
        "actor.tenant_id",
    ),
    (
        {"kind": K.PAUSE, "actor": forged(SteeringActor.human("u"), scopes=frozenset({LONE}))},
        "actor.scopes",
    ),
    (
        {"kind": K.PAUSE, "policy_ref": forged(SteeringPolicyRef(policy_id="p"), policy_id=LONE)},
        "policy_ref.policy_id",
    ),
    (
        {"kind": K.PAUSE, "policy_ref": forged(SteeringPolicyRef(policy_id="p"), version=LONE)},
        "policy_ref.version",
    ),
]


@pytest.mark.parametrize(("keywords", "field"), UNENCODABLE)
def test_text_that_is_not_utf8_is_refused_naming_the_field(
    keywords: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidCommandError, match="not valid UTF-8") as err:
        build(**keywords)
    assert field in str(err.value)
    data = {"target": RUN, "actor": ACTOR, **keywords}
    with pytest.raises(InvalidCommandError, match="not valid UTF-8"):
        SteeringCommand.model_validate(data)


def test_a_lone_surrogate_escape_in_json_is_an_invalid_command() -> None:
    raw = as_json(K.ADD_INSTRUCTION, {"text": "x"}).replace('"text": "x"', '"text": "\\ud800"')
    with pytest.raises(InvalidCommandError):
        SteeringCommand.model_validate_json(raw)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("target", {"type": "agent_run", "run_id": LONE}, "target.agent_run.run_id"),
        ("actor", {"type": "human", "user_id": LONE}, "actor.human.user_id"),
        ("policy_ref", {"policy_id": LONE}, "policy_ref.policy_id"),
    ],
)
def test_unencodable_text_in_nested_data_is_refused_with_the_same_words(
    field: str, value: Any, named: str
) -> None:
    data = {"target": RUN, "actor": ACTOR, "kind": "pause", field: value}
    with pytest.raises(InvalidCommandError, match="not valid UTF-8") as err:
        SteeringCommand.model_validate(data)
    assert named in str(err.value)


def test_valid_non_ascii_text_is_kept() -> None:
    text = "naïve 🧭 \U0001f600 résumé"
    assert build(K.ADD_INSTRUCTION, {"text": text}).text == text


# --------------------------------------------------------------------------- 6. nesting depth


def test_a_payload_nested_to_the_limit_is_accepted_and_one_more_level_is_not() -> None:
    # The payload itself is one level; its "update" dict a second.
    assert build(K.UPDATE_STATE, {"update": {"x": nested(MAX_PAYLOAD_DEPTH - 2)}})
    with pytest.raises(InvalidCommandError, match=f"nested more than {MAX_PAYLOAD_DEPTH}"):
        build(K.UPDATE_STATE, {"update": {"x": nested(MAX_PAYLOAD_DEPTH - 1)}})


@pytest.mark.parametrize("depth", [600, 100_000])
def test_a_deeply_nested_payload_is_refused_without_recursing(depth: int) -> None:
    # Before: 600 levels passed construction and submit raised RecursionError.
    with pytest.raises(InvalidCommandError, match="nested more than"):
        build(K.PROVIDE_CONTEXT, {"value": nested(depth)})
    raw = '{"value": ' + "[" * 600 + "]" * 600 + "}"
    with pytest.raises(InvalidCommandError):
        SteeringCommand.model_validate_json(as_json(K.PROVIDE_CONTEXT, {}).replace("{}", raw))


def test_a_payload_that_contains_itself_is_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(InvalidCommandError, match="nested more than"):
        build(K.PROVIDE_CONTEXT, {"value": loop})


# --------------------------------------------------------------------------- 7. JSON values, size


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "name"),
    [(b"\x00" * 8, "bytes"), (Opaque(), "Opaque"), ({1, 2}, "set"), ({1: "a"}, "key")],
)
def test_values_that_are_not_json_are_refused(value: Any, name: str) -> None:
    with pytest.raises(InvalidCommandError, match=name) as err:
        build(K.PROVIDE_CONTEXT, {"value": {"v": value}})
    assert "payload.value.v" in str(err.value)


def test_a_tuple_becomes_the_list_json_reads_back() -> None:
    cmd = build(K.PROVIDE_CONTEXT, {"value": (1, (2, "x"))})
    assert cmd.payload["value"] == [1, [2, "x"]]
    assert SteeringCommand.model_validate_json(cmd.model_dump_json()) == cmd


def _payload_check(cmd: SteeringCommand, limit: int) -> str | None:
    ctx = PolicyContext(target=RunInfo(run_id="r-1"), tree=RunTree())
    return PayloadPolicy(max_text_bytes=limit).check(cmd, ctx)


def test_the_payload_policy_counts_numbers_not_only_text() -> None:
    # Before: only strings were counted, so a list of 2M ints passed a 16 KiB limit.
    numbers = build(K.PROVIDE_CONTEXT, {"value": list(range(10_000))})
    reason = _payload_check(numbers, 16 * 1024)
    assert reason is not None and "payload too large" in reason


@pytest.mark.parametrize(
    "payload",
    [
        {"text": "x" * 100},
        {"text": 'quote " and \\ and \n newline, é 🧭'},
        {"value": {"a": [1, 2.5, True, None, "é"], "b": {"c": -3}}, "source": "s"},
    ],
)
def test_the_payload_policy_limit_is_the_json_size_in_utf8_bytes(payload: dict[str, Any]) -> None:
    kind = K.ADD_INSTRUCTION if "text" in payload else K.PROVIDE_CONTEXT
    cmd = build(kind, payload)
    size = len(json.dumps(cmd.payload, ensure_ascii=False, separators=(",", ":")).encode())
    assert json_bytes(cmd.payload) == size
    assert _payload_check(cmd, size) is None
    reason = _payload_check(cmd, size - 1)
    assert reason is not None and f"> {size - 1} bytes" in reason


def test_the_payload_policy_stops_counting_a_payload_far_over_the_limit() -> None:
    cmd = build(K.PROVIDE_CONTEXT, {"value": ["x" * 100] * 100_000})
    reason = _payload_check(cmd, 1024)
    assert reason is not None and "payload too large" in reason


# --------------------------------------------------------------------------- 8. transforms


def _budget_ctx(parent_left: int, child_used: int = 0) -> PolicyContext:
    tree = RunTree()
    parent = RunInfo(run_id="parent", limits=RunLimits(max_model_calls=5))
    parent.usage = RunUsage(model_calls=5 - parent_left)
    child = RunInfo(run_id="child", parent_run_id="parent")
    child.usage = RunUsage(model_calls=child_used)
    tree.add(parent)
    tree.add(child)
    return PolicyContext(target=child, tree=tree, testing=True)


def _clamping_pipeline() -> PolicyPipeline:
    return PolicyPipeline(
        [BudgetPolicy(clamp=True) if p.policy_id == "budget" else p for p in default_policies()]
    )


async def test_a_clamp_to_nothing_is_a_rejection_with_a_reason() -> None:
    # Before: the clamp made max_model_calls=0 (an invalid command) and accepted it.
    cmd = build(K.UPDATE_BUDGET, {"max_model_calls": 3}, target=SteeringTarget.agent_run("child"))
    decision = await _clamping_pipeline().evaluate(cmd, _budget_ctx(parent_left=0))
    assert decision.status == "reject"
    assert decision.policy_id == "budget"
    assert decision.reason is not None and "max_model_calls" in decision.reason
    assert "has left (0" in decision.reason


async def test_a_clamp_within_the_budget_still_transforms() -> None:
    cmd = build(K.UPDATE_BUDGET, {"max_model_calls": 9}, target=SteeringTarget.agent_run("child"))
    decision = await _clamping_pipeline().evaluate(cmd, _budget_ctx(parent_left=2, child_used=1))
    assert decision.status == "accept"
    assert decision.command.payload == {"max_model_calls": 3}
    assert decision.command.correlation_id == cmd.correlation_id
    with pytest.raises(TypeError):
        decision.command.payload["max_model_calls"] = 0  # validated: read-only like any other


class Rewrite:
    """A policy that hands on an unvalidated copy of the command (``model_copy``)."""

    policy_id = "rewrite"

    def __init__(self, **update: Any) -> None:
        self.update = update

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        return await call_next(cmd.model_copy(update=self.update))


@pytest.mark.parametrize(
    "update",
    [
        {"payload": {"max_model_calls": 0}},
        {"payload": {"deadline_s": math.nan}},
        {"priority": 7},
        {"created_at": NAIVE.replace(year=1).isoformat() + "junk"},
    ],
)
async def test_a_policy_transform_is_validated_like_a_new_command(update: dict[str, Any]) -> None:
    cmd = build(K.UPDATE_BUDGET, {"max_model_calls": 3})
    pipeline = PolicyPipeline([Rewrite(**update)])
    decision = await pipeline.evaluate(cmd, _budget_ctx(parent_left=5))
    assert decision.status == "reject"
    assert decision.policy_id == "rewrite"
    assert decision.reason is not None and "invalid command" in decision.reason


async def test_a_valid_transform_is_normalised_like_a_new_command() -> None:
    cmd = build(K.UPDATE_BUDGET, {"max_model_calls": 3})
    naive = datetime(2026, 1, 1)
    pipeline = PolicyPipeline([Rewrite(payload={"max_tokens": 9}, created_at=naive)])
    decision = await pipeline.evaluate(cmd, _budget_ctx(parent_left=5))
    assert decision.status == "accept"
    assert decision.command.created_at == naive.replace(tzinfo=UTC)
    assert decision.command.payload == {"max_tokens": 9}
    assert [(pid, before) for pid, before in decision.transforms] == [("rewrite", cmd)]


# --------------------------------------------------------------------------- 22. one error type


def test_invalid_command_error_is_a_value_error() -> None:
    assert issubclass(InvalidCommandError, TinyAgentsError)
    assert issubclass(InvalidCommandError, ValueError)


INVALID_FIELDS = [
    # (field, value, what the message must name)
    ("priority", 7, "priority"),
    ("priority", "urgent", "priority"),
    ("target", {"type": "agent_run", "run_id": ""}, "target"),
    ("target", {"type": "spaceship"}, "target"),
    ("target", "r-1", "target"),
    ("actor", {"type": "human"}, "actor"),
    ("actor", None, "actor"),
    ("correlation_id", "", "correlation_id"),
    ("correlation_id", 12, "correlation_id"),
    ("created_at", "yesterday", "created_at"),
    ("fork", "maybe", "fork"),
    ("policy_ref", {"policy_id": ""}, "policy_ref"),
    ("colour", "red", "colour"),
]


@pytest.mark.parametrize(("field", "value", "named"), INVALID_FIELDS)
def test_every_invalid_construction_raises_invalid_command_error(
    field: str, value: Any, named: str
) -> None:
    data: dict[str, Any] = {"target": RUN, "actor": ACTOR, "kind": K.PAUSE, field: value}
    attempts = [
        lambda: SteeringCommand(**data),
        lambda: SteeringCommand.model_validate(data),
        lambda: SteeringCommand.model_validate_json(json.dumps(data, default=_jsonable)),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidCommandError) as err:
            attempt()
        assert err.type is InvalidCommandError
        assert named in str(err.value)


def _jsonable(value: Any) -> Any:
    return value.model_dump(mode="json")


def test_a_missing_field_and_malformed_json_are_invalid_commands_too() -> None:
    with pytest.raises(InvalidCommandError, match="actor"):
        SteeringCommand.model_validate({"target": RUN, "kind": "pause"})
    with pytest.raises(InvalidCommandError, match="JSON"):
        SteeringCommand.model_validate_json("{not json")
    with pytest.raises(InvalidCommandError):
        SteeringCommand.model_validate(["not", "an", "object"])


def test_payload_errors_keep_their_message_through_every_path() -> None:
    for attempt in (
        lambda: build(K.ADD_INSTRUCTION, {"text": " "}),
        lambda: SteeringCommand.model_validate(
            {"target": RUN, "actor": ACTOR, "kind": "add_instruction", "payload": {"text": " "}}
        ),
    ):
        with pytest.raises(InvalidCommandError) as err:
            attempt()
        assert (
            str(err.value)
            == "invalid payload for add_instruction: text: Value error, must not be blank "
            "(it shows no visible character)"
        )


@pytest.mark.parametrize("text", ["\u200b", "\u200b \u200b", "\u202e", "\ufeff\n"])
def test_text_of_invisible_characters_only_is_blank(text: str) -> None:
    # zero-width spaces and bidi marks are Unicode format characters, which str.strip()
    # keeps: such a message passed the blank check and reached the model as nothing
    with pytest.raises(InvalidCommandError, match="must not be blank"):
        build(K.ADD_INSTRUCTION, {"text": text})
    assert build(K.ADD_INSTRUCTION, {"text": "\u200bok"}).payload["text"] == "\u200bok"


@pytest.mark.parametrize(
    ("cid", "problem"),
    [
        (" ", "blank"),
        ("\u200b", "U+200B"),  # zero-width space
        ("run\u202eevil", "U+202E"),  # right-to-left override: shows another id
        ("a\tb", "control character"),  # the id rule's words (fifth hostile round)
        ("c" * 201, "201 characters; at most 200"),
    ],
)
def test_a_correlation_id_is_printable_text_of_at_most_200_characters(
    cid: str, problem: str
) -> None:
    # an id is quoted back in receipts, events, the audit trail and the CLI: one that shows
    # nothing, or shows something else than it is, was accepted (over HTTP only the length
    # was bounded, and not at all in-process or from the CLI)
    with pytest.raises(InvalidCommandError, match=f"correlation_id: .*{re.escape(problem)}"):
        SteeringCommand(
            target=RUN, actor=ACTOR, kind=K.REQUEST_STATUS, payload={}, correlation_id=cid
        )
    for fine in ("my id", "ü-42", "c" * 200):
        cmd = SteeringCommand(
            target=RUN, actor=ACTOR, kind=K.REQUEST_STATUS, payload={}, correlation_id=fine
        )
        assert cmd.correlation_id == fine


# --------------------------------------------------------------------------- 23. read-only payload


def _update_command() -> SteeringCommand:
    return build(K.UPDATE_STATE, {"update": {"notes": ["a"], "meta": {"n": 1}}, "as_node": "x"})


MUTATIONS = [
    lambda p: p.__setitem__("as_node", "y"),
    lambda p: p.__delitem__("as_node"),
    lambda p: p.update(as_node="y"),
    lambda p: p.setdefault("new", 1),
    lambda p: p.pop("as_node"),
    lambda p: p.popitem(),
    lambda p: p.clear(),
    lambda p: p.__ior__({"as_node": "y"}),
    lambda p: p["update"].__setitem__("x", 1),
    lambda p: p["update"]["meta"].__setitem__("n", 2),
    lambda p: p["update"]["notes"].append("b"),
    lambda p: p["update"]["notes"].__setitem__(0, "b"),
    lambda p: p["update"]["notes"].extend(["b"]),
    lambda p: p["update"]["notes"].__iadd__(["b"]),
    lambda p: p["update"]["notes"].sort(),
    lambda p: p["update"]["notes"].pop(),
]


@pytest.mark.parametrize("mutate", MUTATIONS)
@pytest.mark.parametrize("path", ["kwargs", "json"])
def test_a_commands_payload_cannot_be_changed(mutate: Any, path: str) -> None:
    cmd = _update_command()
    if path == "json":
        cmd = SteeringCommand.model_validate_json(cmd.model_dump_json())
    before = cmd.model_dump()
    with pytest.raises(TypeError, match="read-only; change a copy"):
        mutate(cmd.payload)
    assert cmd.model_dump() == before


def test_a_read_only_payload_still_behaves_as_plain_json_data() -> None:
    cmd = _update_command()
    plain = {"update": {"notes": ["a"], "meta": {"n": 1}}, "as_node": "x"}
    assert cmd.payload == plain and plain == cmd.payload
    assert cmd.payload.get("as_node") == "x" and cmd.payload["update"]["notes"][0] == "a"
    assert json.loads(json.dumps(cmd.payload)) == plain
    dumped = cmd.model_dump()
    assert dumped["payload"] == plain and type(dumped["payload"]) is dict
    assert type(dumped["payload"]["update"]["notes"]) is list
    assert SteeringCommand.model_validate_json(cmd.model_dump_json()) == cmd
    assert SteeringCommand.model_validate(dumped) == cmd
    assert pickle.loads(pickle.dumps(cmd)) == cmd
    assert copy.deepcopy(cmd) == cmd and copy.copy(cmd) == cmd
    mutable = {**cmd.payload, "as_node": "y"}  # a copy is an ordinary dict
    mutable["extra"] = 1
    assert cmd.payload["as_node"] == "x"
    assert SteeringCommand(**{**cmd.__dict__}) == cmd  # a command rebuilt from its own values


def test_mutable_copy_gives_ordinary_containers_at_every_level() -> None:
    cmd = _update_command()
    update = mutable_copy(cmd.payload["update"])
    assert update == cmd.payload["update"]
    assert type(update) is dict and type(update["notes"]) is list and type(update["meta"]) is dict
    update["notes"].append("b")
    update["meta"]["n"] = 2
    assert cmd.payload["update"] == {"notes": ["a"], "meta": {"n": 1}}


@pytest.mark.parametrize("goto", [[], "", "  ", ["a", ""]])
def test_a_redirect_that_names_no_node_is_refused_when_built(goto: Any) -> None:
    """A redirect with ``goto: []`` silently completed a graph; it names no node at all."""
    with pytest.raises(InvalidCommandError, match="goto"):
        SteeringCommand(
            target=SteeringTarget.agent_run("r-1"),
            actor=SteeringActor.test(),
            kind=SteeringKind.REDIRECT,
            payload={"goto": goto},
        )


@pytest.mark.parametrize(
    "payload",
    [
        {"max_model_calls": True},
        {"max_tool_calls": False},
        {"max_tokens": True},
        {"deadline_s": True},
        {"max_tokens": 2.0},
        {"max_model_calls": "3"},
    ],
)
def test_a_budget_is_a_number_not_a_boolean_or_text(payload: dict[str, Any]) -> None:
    """``update_budget {"max_model_calls": true}`` became a budget of one model call."""
    with pytest.raises(
        InvalidCommandError, match=f"invalid payload for update_budget: {next(iter(payload))}"
    ):
        SteeringCommand(
            target=SteeringTarget.agent_run("r-1"),
            actor=SteeringActor.test(),
            kind=SteeringKind.UPDATE_BUDGET,
            payload=payload,
        )


@pytest.mark.parametrize(
    "payload",
    [
        {"max_model_calls": None},
        {"max_model_calls": None, "max_tokens": 50},
        {"max_tokens": 50, "deadline_s": None},
    ],
)
def test_a_budget_limit_cannot_be_removed_and_the_refusal_says_so(
    payload: dict[str, Any],
) -> None:
    """``update_budget`` replaces limits with new values; it does not lift them. A limit set
    to None (no limit) was refused as "needs at least one of ..." alone, and beside another
    limit dropped without a word (the command accepted, the limit kept). Each is refused,
    naming the limit and saying what to do instead."""
    removed = next(name for name, value in payload.items() if value is None)
    with pytest.raises(InvalidCommandError) as raised:
        SteeringCommand(
            target=SteeringTarget.agent_run("r-1"),
            actor=SteeringActor.test(),
            kind=SteeringKind.UPDATE_BUDGET,
            payload=payload,
        )
    message = str(raised.value)
    assert message.startswith(f"invalid payload for update_budget: {removed}: ")
    assert "cannot remove a limit" in message and "larger value" in message


def test_a_budget_from_json_keeps_its_numbers() -> None:
    cmd = SteeringCommand.model_validate_json(
        '{"target": {"type": "agent_run", "run_id": "r-1"}, "actor": {"type": "test"},'
        ' "kind": "update_budget", "payload": {"max_tokens": 500, "deadline_s": 30}}'
    )
    assert cmd.payload == {"max_tokens": 500, "deadline_s": 30.0}
    assert type(cmd.payload["deadline_s"]) is float


def test_a_command_is_hashable_like_any_frozen_value() -> None:
    """A frozen command raised TypeError on ``hash`` (its payload was a dict)."""
    cmd = _update_command()
    again = SteeringCommand.model_validate_json(cmd.model_dump_json())
    assert again == cmd and hash(again) == hash(cmd)
    assert len({cmd, again, copy.deepcopy(cmd)}) == 1
    other = cmd.model_copy(update={"correlation_id": "c-other"})
    assert len({cmd, other}) == 2


@pytest.mark.parametrize("field", ["user_id", "tenant_id"])
@pytest.mark.parametrize("value", ["", "   "])
def test_a_human_names_a_user_and_a_tenant(field: str, value: str) -> None:
    values = {"user_id": "ops", "tenant_id": "acme", field: value}
    with pytest.raises(InvalidCommandError, match=f"invalid actor: {field}"):
        SteeringActor.human(values["user_id"], tenant_id=values["tenant_id"])
    with pytest.raises(InvalidCommandError, match=f"actor.human.{field}"):
        SteeringCommand.model_validate(
            {
                "target": {"type": "agent_run", "run_id": "r-1"},
                "actor": {"type": "human", **values},
                "kind": "pause",
            }
        )


@pytest.mark.parametrize("payload", [[], "", 0, False, (), [1], "x", 1.5])
def test_a_payload_that_is_not_an_object_is_refused_even_when_empty(payload: Any) -> None:
    """An empty list, string, zero or False was taken for "no payload" (``or {}``)."""
    with pytest.raises(
        InvalidCommandError, match="invalid payload for request_status: must be an object"
    ):
        SteeringCommand(target=RUN, actor=ACTOR, kind=K.REQUEST_STATUS, payload=payload)
    data = {
        "target": RUN.model_dump(mode="json"),
        "actor": ACTOR.model_dump(mode="json"),
        "kind": "request_status",
        "payload": list(payload) if isinstance(payload, tuple) else payload,
    }
    with pytest.raises(InvalidCommandError, match="must be an object"):
        SteeringCommand.model_validate_json(json.dumps(data))


def test_a_left_out_or_null_payload_is_no_payload() -> None:
    left_out = SteeringCommand(target=RUN, actor=ACTOR, kind=K.REQUEST_STATUS)
    null = SteeringCommand(target=RUN, actor=ACTOR, kind=K.REQUEST_STATUS, payload=None)
    assert left_out.payload == null.payload == {}


@pytest.mark.parametrize("thread_id", ["   ", "t-1\x00"])
def test_a_thread_no_run_can_have_is_refused_when_built(thread_id: str) -> None:
    """A run's thread id is never blank and never holds a NUL (``check_id``): a command for
    such a thread was deferred, and waited (in a durable store's log too) for ever."""
    with pytest.raises(InvalidCommandError, match="invalid target: thread_id"):
        SteeringTarget.thread(thread_id)
    with pytest.raises(InvalidCommandError, match=r"target\.thread\.thread_id"):
        SteeringCommand.model_validate(
            {
                "target": {"type": "thread", "thread_id": thread_id},
                "actor": ACTOR.model_dump(mode="json"),
                "kind": "pause",
            }
        )


# --------------------------------------------------------------------------- 24. built past validation


def _instruction(cid: str = "c-1") -> SteeringCommand:
    return build(K.ADD_INSTRUCTION, {"text": "focus"}, correlation_id=cid)


#: Fields set past validation (``model_copy(update=...)`` validates nothing): each was queued.
FORGED = [
    {"kind": K.CANCEL},  # a text payload on a cancel
    {"payload": {"nope": 1}},
    {"payload": {"text": "x", "deep": nested(MAX_PAYLOAD_DEPTH + 1)}},
    {"priority": 7},
    {"created_at": "junk"},
    {"correlation_id": LONE},
    {"delivery": "immediate"},
    {"fork": True},
]


@pytest.mark.parametrize("update", FORGED)
async def test_submit_refuses_a_command_built_past_validation_as_construction_does(
    rt: Any, make_run: Any, recorder: Any, update: dict[str, Any]
) -> None:
    handle = await make_run("r-1")
    forged = _instruction().model_copy(update=update)
    with pytest.raises(InvalidCommandError) as built:
        SteeringCommand(**{**dict(_instruction()), **update})
    with pytest.raises(InvalidCommandError) as submitted:
        await rt.submit(forged)
    assert str(submitted.value) == str(built.value)
    assert len(handle.inbox) == 0
    assert recorder.types("steering.") == []
    # it changed nothing: not even its id is taken
    assert (await rt.submit(_instruction())).accepted


async def test_submit_refuses_an_invalid_command_made_by_model_construct(
    rt: Any, make_run: Any
) -> None:
    handle = await make_run("r-1")
    valid = _instruction()
    forged = SteeringCommand.model_construct(**{**dict(valid), "kind": K.CANCEL})
    with pytest.raises(InvalidCommandError, match="invalid payload for cancel"):
        await rt.submit(forged)
    assert len(handle.inbox) == 0


async def test_a_valid_copy_is_queued_as_the_command_it_validates_to(
    rt: Any, make_run: Any
) -> None:
    handle = await make_run("r-1")
    valid = _instruction()
    assert (await rt.submit(valid)).accepted
    copied = valid.model_copy(
        update={"correlation_id": "c-2", "payload": {"text": "more"}, "created_at": NAIVE}
    )
    assert (await rt.submit(copied)).accepted
    queued = {cmd.correlation_id: cmd for cmd in handle.inbox.queue.pending()}
    assert queued["c-1"] is valid  # a command built the usual way is queued as it is
    second = queued["c-2"]
    assert second == SteeringCommand(**dict(copied))
    assert second.created_at.tzinfo is UTC
    with pytest.raises(TypeError):
        second.payload["text"] = "changed"  # read-only, as every validated payload


#: Values for a copy's fields, valid and not, as ``model_copy(update=...)`` takes them.
COPIED_FIELDS = {
    "kind": st.sampled_from(list(K)),
    "payload": st.sampled_from(
        [
            {},
            {"text": "t"},
            {"reason": "r"},
            {"tools": ["a"]},
            {"nope": 1},
            {"text": LONE},
            {"value": nested(MAX_PAYLOAD_DEPTH)},
            {"update": {"k": 1}},
        ]
    ),
    "priority": st.sampled_from([SteeringPriority.HIGH, 7, "high", 100]),
    "delivery": st.sampled_from([*SteeringDelivery, "soon"]),
    "created_at": st.sampled_from([NAIVE, NAIVE.replace(tzinfo=UTC), "junk", None]),
    "correlation_id": st.sampled_from(["c-x", LONE, "", "a\nb", "x" * 201]),
    "checkpoint_id": st.sampled_from([None, "cp-1", ""]),
    "fork": st.sampled_from([False, True, "yes"]),
    "target": st.sampled_from([RUN, SteeringTarget.agent_run("r-2"), {"type": "spaceship"}]),
}


@settings(max_examples=80, deadline=None)
@given(st.fixed_dictionaries({}, optional=COPIED_FIELDS))
def test_submit_judges_any_copy_as_construction_judges_its_fields(update: dict[str, Any]) -> None:
    forged = _instruction().model_copy(update=update)
    try:
        built = SteeringCommand(**dict(forged))
    except InvalidCommandError as exc:
        refused: InvalidCommandError | None = exc
    else:
        refused = None

    async def submit() -> None:
        async with Runtime(testing=True) as rt:
            handle = await start_run(rt, "r-1")
            if refused is not None:
                with pytest.raises(InvalidCommandError) as raised:
                    await rt.submit(forged)
                assert str(raised.value) == str(refused)
                assert len(handle.inbox) == 0
                return
            receipt = await rt.submit(forged)
            assert receipt.status is not ReceiptStatus.DUPLICATE
            assert handle.inbox.queue.pending() in ([], [built])

    asyncio.run(submit())


@pytest.mark.parametrize("node", [" ", "\t", "\u200b", "\u200e\u200f", "\x00"])
def test_a_graph_node_target_naming_a_node_that_shows_nothing_is_refused(node: str) -> None:
    """``SteeringTarget.graph_node("r", " ")`` was taken: a node name that shows nothing,
    which no graph can have (``StateGraph.add_node`` refuses it, ``shows_nothing``), so the
    command could only fail later, at the run. Refused as the builder refuses the name, by
    the factory and by a target read from JSON alike."""
    with pytest.raises(InvalidCommandError, match=r"node.*(blank|visible)"):
        SteeringTarget.graph_node("r-1", node)
    with pytest.raises(InvalidCommandError, match=r"node.*(blank|visible)"):
        SteeringCommand.model_validate(
            {
                "kind": "pause",
                "target": {"type": "graph_node", "run_id": "r-1", "node": node},
                "actor": {"type": "human", "user_id": "u"},
                "payload": {},
            }
        )
    assert SteeringTarget.graph_node("r-1", f"a{node}b").node == f"a{node}b"
