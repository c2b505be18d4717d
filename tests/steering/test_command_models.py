"""Command models: per-kind payload validation, delivery/fork rules, ids, JSON and JSON Schema."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType, SimpleNamespace
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tinyagents._clock import SequentialIds, use_clock, use_ids
from tinyagents.errors import InvalidCommandError
from tinyagents.protocol import (
    COMMAND_ADAPTER,
    PAYLOAD_MODELS,
    HumanActor,
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringPolicyRef,
    SteeringPriority,
    SteeringTarget,
    command_json_schema,
)
from tinyagents.protocol.commands import ReadOnlyDict
from tinyagents.testkit import EPOCH, FakeClock

K = SteeringKind
RUN = SteeringTarget.agent_run("r-1")
ACTOR = SteeringActor.test()


def build(kind: SteeringKind | str, payload: Any = None, **fields: Any) -> SteeringCommand:
    return SteeringCommand(
        target=RUN, actor=ACTOR, kind=kind, payload={} if payload is None else payload, **fields
    )


# --------------------------------------------------------------------------- payloads

GOOD: list[tuple[SteeringKind, dict[str, Any], dict[str, Any]]] = [
    # (kind, payload given, payload after normalisation)
    (K.ADD_INSTRUCTION, {"text": "focus on billing"}, {"text": "focus on billing"}),
    (K.REPLACE_INSTRUCTION, {"text": "new goal"}, {"text": "new goal"}),
    (K.ASK_CLARIFYING_QUESTION, {"question": "which region?"}, {"question": "which region?"}),
    (K.PROVIDE_CONTEXT, {"text": "the invoice is #7"}, {"text": "the invoice is #7"}),
    (
        K.PROVIDE_CONTEXT,
        {"value": {"ok": True}, "interrupt_id": "i-1", "source": "crm"},
        {"value": {"ok": True}, "interrupt_id": "i-1", "source": "crm"},
    ),
    (K.CONSTRAIN_TOOLS, {"tools": ["search", "fetch", "search"]}, {"tools": ["fetch", "search"]}),
    (K.CONSTRAIN_TOOLS, {"tools": []}, {"tools": []}),
    (K.CONSTRAIN_MODEL, {"models": ["b", "a", "b"]}, {"models": ["b", "a"]}),
    (K.PAUSE, {}, {}),
    (K.PAUSE, {"reason": "lunch"}, {"reason": "lunch"}),
    (K.RESUME, {}, {}),
    (K.CANCEL, {"reason": "done"}, {"reason": "done"}),
    (K.APPROVE, {}, {}),
    (K.APPROVE, {"interrupt_id": "i-1", "value": 42}, {"interrupt_id": "i-1", "value": 42}),
    (K.REJECT, {"reason": "wrong customer"}, {"reason": "wrong customer"}),
    (K.REDIRECT, {"goto": "review"}, {"goto": "review"}),
    (K.REDIRECT, {"goto": ["a", "b"]}, {"goto": ["a", "b"]}),
    (K.REDIRECT, {"instruction": "write the summary"}, {"instruction": "write the summary"}),
    (K.REQUEST_STATUS, {}, {}),
    (K.UPDATE_BUDGET, {"max_model_calls": 3}, {"max_model_calls": 3}),
    (
        K.UPDATE_BUDGET,
        {"max_tool_calls": 2, "max_tokens": 900, "deadline_s": 1.5},
        {"max_tool_calls": 2, "max_tokens": 900, "deadline_s": 1.5},
    ),
    (K.UPDATE_STATE, {"update": {"x": 1}}, {"update": {"x": 1}}),
    (K.UPDATE_STATE, {"update": {"x": 1}, "as_node": "a"}, {"update": {"x": 1}, "as_node": "a"}),
]

BAD: list[tuple[SteeringKind, dict[str, Any], str]] = [
    # (kind, payload, the field the error must name)
    (K.ADD_INSTRUCTION, {}, "text"),
    (K.ADD_INSTRUCTION, {"text": "   "}, "text"),
    (K.ADD_INSTRUCTION, {"text": "ok", "urgent": True}, "urgent"),
    (K.REPLACE_INSTRUCTION, {"text": ""}, "text"),
    (K.REPLACE_INSTRUCTION, {"text": 7}, "text"),
    (K.ASK_CLARIFYING_QUESTION, {"text": "which?"}, "question"),
    (K.ASK_CLARIFYING_QUESTION, {"question": "\n"}, "question"),
    (K.PROVIDE_CONTEXT, {}, "text"),
    (K.PROVIDE_CONTEXT, {"text": "  "}, "text"),
    (K.PROVIDE_CONTEXT, {"text": "x", "files": []}, "files"),
    (K.CONSTRAIN_TOOLS, {}, "tools"),
    (K.CONSTRAIN_TOOLS, {"tools": "search"}, "tools"),
    (K.CONSTRAIN_TOOLS, {"tools": ["search", " "]}, "tools"),
    (K.CONSTRAIN_MODEL, {}, "models"),
    (K.CONSTRAIN_MODEL, {"models": []}, "models"),
    (K.CONSTRAIN_MODEL, {"models": [""]}, "models"),
    (K.PAUSE, {"reason": 3}, "reason"),
    (K.PAUSE, {"why": "x"}, "why"),
    (K.RESUME, {"now": True}, "now"),
    (K.CANCEL, {"reason": ["x"]}, "reason"),
    (K.CANCEL, {"force": True}, "force"),
    (K.APPROVE, {"interrupt_id": 5}, "interrupt_id"),
    (K.APPROVE, {"answer": "yes"}, "answer"),
    (K.REJECT, {"reason": {"r": 1}}, "reason"),
    (K.REDIRECT, {}, "goto"),
    (K.REDIRECT, {"instruction": "  "}, "instruction"),
    (K.REDIRECT, {"goto": 3}, "goto"),
    (K.REQUEST_STATUS, {"verbose": True}, "verbose"),
    (K.UPDATE_BUDGET, {}, "max_model_calls"),
    (K.UPDATE_BUDGET, {"max_tokens": 0}, "max_tokens"),
    (K.UPDATE_BUDGET, {"deadline_s": -1}, "deadline_s"),
    (K.UPDATE_BUDGET, {"max_depth": 3}, "max_depth"),
    (K.UPDATE_STATE, {}, "update"),
    (K.UPDATE_STATE, {"update": {}}, "update"),
    (K.UPDATE_STATE, {"update": {"x": 1}, "as_node": 2}, "as_node"),
]


def test_the_tables_cover_all_fifteen_kinds() -> None:
    assert len(SteeringKind) == 15
    assert {k for k, _, _ in GOOD} == set(SteeringKind)
    assert {k for k, _, _ in BAD} == set(SteeringKind)
    assert set(PAYLOAD_MODELS) == set(SteeringKind)


@pytest.mark.parametrize(("kind", "payload", "normalised"), GOOD, ids=lambda v: str(v)[:30])
def test_valid_payload_is_accepted_and_normalised(
    kind: SteeringKind, payload: dict[str, Any], normalised: dict[str, Any]
) -> None:
    cmd = build(kind, payload)
    assert cmd.kind is kind
    assert cmd.payload == normalised


@pytest.mark.parametrize(("kind", "payload", "field"), BAD, ids=lambda v: str(v)[:30])
def test_invalid_payload_names_the_kind_and_the_field(
    kind: SteeringKind, payload: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidCommandError) as err:
        build(kind, payload)
    message = str(err.value)
    assert message.startswith(f"invalid payload for {kind.value}: ")
    problems = message.removeprefix(f"invalid payload for {kind.value}: ")
    assert re.search(rf"\b{field}\b", problems), problems


def test_payload_must_be_an_object() -> None:
    with pytest.raises(InvalidCommandError, match="invalid payload for add_instruction"):
        build(K.ADD_INSTRUCTION, ["focus"])


def test_unknown_kind_is_rejected_with_the_allowed_kinds() -> None:
    with pytest.raises(InvalidCommandError) as err:
        build("make_coffee", {})
    assert "'make_coffee'" in str(err.value)
    assert "add_instruction" in str(err.value)


def test_unknown_kind_in_json_is_rejected_too() -> None:
    raw = build(K.PAUSE).model_dump(mode="json") | {"kind": "reboot"}
    with pytest.raises(InvalidCommandError, match="reboot"):
        SteeringCommand.model_validate_json(json.dumps(raw))


def test_unknown_delivery_is_an_invalid_command() -> None:
    with pytest.raises(InvalidCommandError, match="delivery"):
        build(K.PAUSE, delivery="whenever")


@pytest.mark.parametrize("kind", [k for k in SteeringKind if k is not K.CANCEL])
def test_immediate_delivery_exists_only_for_cancel(kind: SteeringKind) -> None:
    payload = next(p for k, p, _ in GOOD if k is kind)
    with pytest.raises(InvalidCommandError, match=rf"{kind.value}.*immediate"):
        build(kind, payload, delivery=SteeringDelivery.IMMEDIATE)


def test_immediate_cancel_is_valid() -> None:
    cmd = build(K.CANCEL, delivery="immediate")
    assert cmd.delivery is SteeringDelivery.IMMEDIATE


def test_fork_needs_a_checkpoint_id() -> None:
    with pytest.raises(InvalidCommandError, match="fork"):
        build(K.UPDATE_STATE, {"update": {"x": 1}}, fork=True)
    cmd = build(K.UPDATE_STATE, {"update": {"x": 1}}, fork=True, checkpoint_id="ck-1")
    assert cmd.fork and cmd.checkpoint_id == "ck-1"


def test_an_empty_checkpoint_id_is_refused() -> None:
    # no checkpoint has an empty id; the operator API refused it already (422)
    with pytest.raises(InvalidCommandError, match="checkpoint_id"):
        build(K.UPDATE_STATE, {"update": {"x": 1}}, checkpoint_id="")
    with pytest.raises(InvalidCommandError, match="checkpoint_id"):
        SteeringCommand.model_validate_json(
            build(K.PAUSE).model_dump_json().replace('"checkpoint_id":null', '"checkpoint_id":""')
        )


def test_commands_are_frozen() -> None:
    cmd = build(K.PAUSE)
    with pytest.raises(ValidationError):
        cmd.kind = K.RESUME  # type: ignore[misc]


def test_unknown_top_level_fields_are_rejected() -> None:
    with pytest.raises(InvalidCommandError, match="colour"):
        build(K.PAUSE, colour="red")


# --------------------------------------------------------------------------- ids and clock


def test_correlation_id_and_created_at_come_from_the_injectable_sources() -> None:
    clock = FakeClock(tick=1.0)
    with use_ids(SequentialIds()), use_clock(clock):
        first, second = build(K.PAUSE), build(K.RESUME)
    assert (first.correlation_id, second.correlation_id) == ("c-0001", "c-0002")
    assert first.created_at == EPOCH
    assert second.created_at == EPOCH + timedelta(seconds=1)


def test_explicit_correlation_id_and_created_at_win() -> None:
    with use_ids(SequentialIds()):
        cmd = build(K.PAUSE, correlation_id="mine", created_at=EPOCH)
    assert cmd.correlation_id == "mine"
    assert cmd.created_at == EPOCH


def test_default_ids_are_unique_without_an_injected_source() -> None:
    ids = {build(K.PAUSE).correlation_id for _ in range(50)}
    assert len(ids) == 50


# --------------------------------------------------------------------------- JSON round-trip

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12)
# text that shows something: a visible character (not only spaces or format characters)
texts = st.text(min_size=1, max_size=40).filter(
    lambda s: any(c.isprintable() and not c.isspace() for c in s)
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=6,
)

targets = st.one_of(
    st.builds(SteeringTarget.agent_run, names),
    st.builds(SteeringTarget.subagent_run, names, names),
    st.builds(SteeringTarget.graph_task, names, names),
    st.builds(SteeringTarget.graph_node, names, names),
    st.builds(SteeringTarget.thread, names),
)
actors = st.one_of(
    st.builds(
        SteeringActor.human,
        names,
        tenant_id=names,
        scopes=st.frozensets(st.sampled_from(["agent:control", "agent:read"])),
    ),
    st.builds(SteeringActor.parent_agent, names, names),
    st.builds(SteeringActor.graph_supervisor, names, names),
    st.builds(SteeringActor.middleware, names, run_id=st.none() | names),
    st.builds(SteeringActor.test, names),
)
reason = st.fixed_dictionaries({}, optional={"reason": texts})
decision = st.fixed_dictionaries(
    {}, optional={"interrupt_id": names, "value": json_values, "reason": texts}
)
PAYLOADS: dict[SteeringKind, st.SearchStrategy[dict[str, Any]]] = {
    K.ADD_INSTRUCTION: st.fixed_dictionaries({"text": texts}),
    K.REPLACE_INSTRUCTION: st.fixed_dictionaries({"text": texts}),
    K.ASK_CLARIFYING_QUESTION: st.fixed_dictionaries({"question": texts}),
    K.PROVIDE_CONTEXT: st.one_of(
        st.fixed_dictionaries({"text": texts}, optional={"source": names}),
        st.fixed_dictionaries(
            {"value": json_values.filter(lambda v: v is not None)},
            optional={"interrupt_id": names},
        ),
    ),
    K.CONSTRAIN_TOOLS: st.fixed_dictionaries({"tools": st.lists(names, max_size=4)}),
    K.CONSTRAIN_MODEL: st.fixed_dictionaries({"models": st.lists(names, min_size=1, max_size=3)}),
    K.PAUSE: reason,
    K.RESUME: reason,
    K.CANCEL: reason,
    K.APPROVE: decision,
    K.REJECT: decision,
    K.REDIRECT: st.one_of(
        st.fixed_dictionaries({"goto": names | st.lists(names, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"instruction": texts}),
    ),
    K.REQUEST_STATUS: st.just({}),
    K.UPDATE_BUDGET: st.fixed_dictionaries(
        {"max_model_calls": st.integers(1, 1000)},
        optional={
            "max_tool_calls": st.integers(1, 1000),
            "max_tokens": st.integers(1, 10**6),
            "deadline_s": st.floats(0.5, 3600, allow_nan=False),
        },
    ),
    K.UPDATE_STATE: st.fixed_dictionaries(
        {"update": st.dictionaries(names, json_values, min_size=1, max_size=3)},
        optional={"as_node": names},
    ),
}


@st.composite
def commands(draw: st.DrawFn) -> SteeringCommand:
    kind = draw(st.sampled_from(list(SteeringKind)))
    deliveries = [d for d in SteeringDelivery if d is not SteeringDelivery.IMMEDIATE]
    if kind is K.CANCEL:
        deliveries.append(SteeringDelivery.IMMEDIATE)
    checkpoint_id = draw(st.none() | names)
    return SteeringCommand(
        target=draw(targets),
        actor=draw(actors),
        kind=kind,
        payload=draw(PAYLOADS[kind]),
        priority=draw(st.sampled_from(list(SteeringPriority))),
        delivery=draw(st.sampled_from(deliveries)),
        policy_ref=draw(st.none() | st.builds(SteeringPolicyRef, policy_id=names)),
        checkpoint_id=checkpoint_id,
        fork=draw(st.booleans()) if checkpoint_id else False,
    )


@settings(max_examples=100, deadline=None)
@given(commands())
def test_json_round_trip(cmd: SteeringCommand) -> None:
    raw = cmd.model_dump_json()
    assert SteeringCommand.model_validate_json(raw) == cmd
    assert COMMAND_ADAPTER.validate_json(raw) == cmd
    assert COMMAND_ADAPTER.validate_python(json.loads(raw)) == cmd


SCHEMA = command_json_schema()
COMMAND_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
PAYLOAD_VALIDATORS = {
    kind: jsonschema.Draft202012Validator(
        {**SCHEMA["$defs"][f"payload_{kind.value}"], "$defs": SCHEMA["$defs"]}
    )
    for kind in SteeringKind
}


@settings(max_examples=50, deadline=None)
@given(commands())
def test_dumped_commands_validate_against_the_exported_schema(cmd: SteeringCommand) -> None:
    data = json.loads(cmd.model_dump_json())
    COMMAND_VALIDATOR.validate(data)
    PAYLOAD_VALIDATORS[cmd.kind].validate(data["payload"])


def test_json_schema_export_names_every_kind_target_and_actor() -> None:
    schema = command_json_schema()
    json.dumps(schema)  # JSON-safe
    defs = schema["$defs"]
    assert {f"payload_{k.value}" for k in SteeringKind} <= set(defs)
    assert defs["SteeringKind"]["enum"] == [k.value for k in SteeringKind]
    target_refs = {ref["$ref"] for ref in schema["properties"]["target"]["oneOf"]}
    actor_refs = {ref["$ref"] for ref in schema["properties"]["actor"]["oneOf"]}
    assert len(target_refs) == 5
    assert len(actor_refs) == 5
    assert set(schema["required"]) == {"target", "actor", "kind"}


def test_the_payload_is_a_json_object_in_the_schema_and_a_plain_dict_in_a_dump() -> None:
    # pydantic's core takes the field as the ReadOnlyDict the command's check made of it (an
    # isinstance, no Python call): its schema must still say a JSON object, in both modes
    for mode in ("validation", "serialization"):
        field = SteeringCommand.model_json_schema(mode=mode)["properties"]["payload"]
        assert field == {"additionalProperties": True, "title": "Payload", "type": "object"}
    cmd = build(K.PROVIDE_CONTEXT, {"text": "hi", "value": {"a": [1]}})
    dumped = cmd.model_dump()["payload"]
    assert type(dumped) is dict and type(dumped["value"]) is dict
    assert dumped == {"text": "hi", "value": {"a": [1]}}
    assert type(SteeringCommand.model_validate(cmd.model_dump()).payload) is ReadOnlyDict


def test_schema_rejects_a_bad_payload_of_its_kind() -> None:
    with pytest.raises(jsonschema.ValidationError):
        PAYLOAD_VALIDATORS[K.UPDATE_BUDGET].validate({"max_depth": 3})
    with pytest.raises(jsonschema.ValidationError):
        COMMAND_VALIDATOR.validate({"target": {"type": "agent_run"}, "actor": {}, "kind": "pause"})


def test_text_property_reads_the_message_of_message_kinds() -> None:
    assert build(K.ADD_INSTRUCTION, {"text": "a"}).text == "a"
    assert build(K.ASK_CLARIFYING_QUESTION, {"question": "q?"}).text == "q?"
    assert build(K.REDIRECT, {"instruction": "go"}).text == "go"
    assert build(K.PAUSE).text is None


def test_describe_names_kind_actor_and_target() -> None:
    cmd = SteeringCommand(
        target=SteeringTarget.subagent_run("p-1", "c-1"),
        actor=SteeringActor.parent_agent("p-1", "orchestrator"),
        kind=K.PAUSE,
    )
    assert cmd.describe() == (
        'pause from parent agent "orchestrator" (run p-1) to sub-agent run c-1 of p-1'
    )


# --------------------------------------------------------------------------- the direct path
# ``SteeringCommand(...)`` builds a command from already-valid values without pydantic's
# validation; ``model_validate`` always validates. Both must make the same command, and
# anything the direct path does not recognise must still be refused by validation.

# What a keyword may be: the valid value of its field, or something validation converts or
# refuses (an int priority, a str kind or delivery, a blank id, a timestamp string, None …).
odd_values = st.sampled_from(
    [
        None,
        "",
        "pause",
        50,
        1,
        "next_boundary",
        "2026-01-01T00:00:00Z",
        "\ud800",  # text no encoder takes
        datetime(2026, 1, 1),  # naive: taken as UTC
        datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=-3))),  # converted to UTC
        {"text": "ok", "value": math.nan},
        {"update": {"x": [(1, 2)]}, "tools": ["\ud800"]},
    ]
)


@st.composite
def command_keywords(draw: st.DrawFn) -> dict[str, Any]:
    cmd = draw(commands())
    keywords: dict[str, Any] = {}
    for name, value in cmd.__dict__.items():
        choice = draw(st.sampled_from(["keep", "keep", "omit", "odd"]))
        if name in {"target", "actor", "kind"} and choice == "omit":
            choice = "keep"
        if choice == "keep":
            keywords[name] = value
        elif choice == "odd":
            keywords[name] = draw(odd_values)
    if draw(st.booleans()):
        keywords["unknown_field"] = 1
    if isinstance(keywords["kind"], SteeringKind) and draw(st.booleans()):
        keywords["kind"] = keywords["kind"].value  # a str kind: the validated path converts it
    return keywords


@settings(max_examples=300, deadline=None)
@given(command_keywords())
def test_direct_construction_makes_what_validation_makes(keywords: dict[str, Any]) -> None:
    keywords = {**keywords, "correlation_id": keywords.get("correlation_id", "c-fixed")}
    keywords.setdefault("created_at", EPOCH)
    try:
        validated = SteeringCommand.model_validate(keywords)
    except InvalidCommandError as exc:
        with pytest.raises(InvalidCommandError) as raised:
            SteeringCommand(**keywords)
        assert raised.type is type(exc) is InvalidCommandError
        assert str(raised.value) == str(exc)
        return
    built = SteeringCommand(**keywords)
    assert built.created_at.tzinfo is validated.created_at.tzinfo is UTC
    assert type(built.payload) is type(validated.payload) is ReadOnlyDict
    assert built == validated
    assert list(built.__dict__) == list(validated.__dict__)
    assert built.model_fields_set == validated.model_fields_set
    assert built.model_dump(mode="json") == validated.model_dump(mode="json")


def test_direct_construction_draws_id_and_time_like_validation() -> None:
    with use_ids(SequentialIds()), use_clock(FakeClock()):
        built = build(K.PAUSE)
        validated = SteeringCommand.model_validate({"target": RUN, "actor": ACTOR, "kind": K.PAUSE})
    assert (built.correlation_id, validated.correlation_id) == ("c-0001", "c-0002")
    assert built.created_at == validated.created_at == EPOCH
    assert (
        built.model_fields_set
        == validated.model_fields_set
        == {"target", "actor", "kind", "payload"}
    )


def test_commands_built_alike_do_not_share_what_a_copy_changes() -> None:
    first, second = build(K.PAUSE), build(K.PAUSE)
    copied = first.model_copy(update={"checkpoint_id": "cp-1"})
    assert "checkpoint_id" in copied.model_fields_set
    assert "checkpoint_id" not in first.model_fields_set | second.model_fields_set
    with pytest.raises(ValidationError):
        first.kind = K.CANCEL  # type: ignore[misc]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SteeringTarget.agent_run(""), r"invalid target: run_id: .*at least 1"),
        (lambda: SteeringTarget.agent_run(None), r"invalid target: run_id: .*valid string"),
        (lambda: SteeringTarget.graph_task("r-1", ""), r"invalid target: task_id"),
        (lambda: SteeringTarget.thread(7), r"invalid target: thread_id"),
        (lambda: SteeringActor.human("", tenant_id="acme"), r"invalid actor: user_id"),
        (lambda: SteeringActor.parent_agent("r-1", None), r"invalid actor: agent_id"),
        (lambda: SteeringActor.test(None), r"invalid actor: name"),
        (lambda: SteeringActor.human("u", scopes="agent:control"), r"invalid actor: scopes"),
        (
            lambda: SteeringPolicyRef.model_validate({"policy_id": ""}),
            r"invalid policy ref: policy_id",
        ),
        (
            lambda: SteeringTarget.agent_run("r-1").model_validate({"type": "agent_run"}),
            r"invalid target: run_id: Field required",
        ),
        (
            lambda: HumanActor.model_validate_json('{"type": "human", "user_id": 5}'),
            r"invalid actor: user_id",
        ),
    ],
)
def test_a_bad_target_actor_or_policy_ref_is_an_invalid_command_error(
    make: Any, message: str
) -> None:
    # The classmethods that build them and model_validate/_json raised pydantic's
    # ValidationError: the parts of a command failed unlike the command, and an
    # `except InvalidCommandError` around building one missed them.
    with pytest.raises(InvalidCommandError, match=message):
        make()


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: SteeringActor.human(" "), "user_id"),  # as it was
        (lambda: SteeringActor.middleware(" "), "name"),
        (lambda: SteeringActor.middleware("\u200b", run_id="r-1"), "name"),
        (lambda: SteeringActor.test(name=""), "name"),
        (lambda: SteeringActor.test(name="\t"), "name"),
        (lambda: SteeringActor.parent_agent("r-1", " "), "agent_id"),
        (lambda: SteeringActor.graph_supervisor("r-1", " "), "node"),
    ],
    ids=["human", "middleware", "middleware-invisible", "test", "test-tab", "parent", "graph"],
)
def test_an_actor_factory_refuses_a_blank_name_as_a_blank_user_id(make: Any, field: str) -> None:
    """``middleware(" ")`` and ``test(name="")`` made actors that ``describe()`` as
    ``middleware " "``, where a blank ``user_id`` was refused: a blank name names nobody in
    the audit trail. The factories refuse it with the same ``InvalidCommandError``."""
    with pytest.raises(InvalidCommandError, match=rf"invalid actor: {field}: .*must not be blank"):
        make()


# --------------------------------------------------------------------------- other inputs
# ``model_validate(obj, from_attributes=True)`` handed ``_check`` the object itself, which it
# passed on unchecked: a plain dict payload was refused as no ``ReadOnlyDict``, and a command
# with no payload was taken without its kind's checks (an instruction with no text).


@settings(max_examples=300, deadline=None)
@given(command_keywords())
def test_a_command_from_an_objects_attributes_is_the_one_its_fields_make(
    keywords: dict[str, Any],
) -> None:
    keywords = {**keywords, "correlation_id": keywords.get("correlation_id", "c-fixed")}
    keywords.setdefault("created_at", EPOCH)
    # pydantic reads a model's fields from the attributes, and no others
    fields = {name: value for name, value in keywords.items() if name != "unknown_field"}
    try:
        expected = SteeringCommand.model_validate(fields)
    except InvalidCommandError as exc:
        with pytest.raises(InvalidCommandError) as raised:
            SteeringCommand.model_validate(SimpleNamespace(**keywords), from_attributes=True)
        assert str(raised.value) == str(exc)
        return
    made = SteeringCommand.model_validate(SimpleNamespace(**keywords), from_attributes=True)
    assert type(made.payload) is ReadOnlyDict
    assert made == expected and made.model_fields_set == expected.model_fields_set


def test_a_command_from_attributes_is_checked_as_one_from_a_dict() -> None:
    made = SteeringCommand.model_validate(
        SimpleNamespace(target=RUN, actor=ACTOR, kind="add_instruction", payload={"text": "hi"}),
        from_attributes=True,
    )
    assert made == build(
        K.ADD_INSTRUCTION,
        {"text": "hi"},
        correlation_id=made.correlation_id,
        created_at=made.created_at,
    )
    assert type(made.payload) is ReadOnlyDict
    no_text = SimpleNamespace(target=RUN, actor=ACTOR, kind="add_instruction")
    with pytest.raises(InvalidCommandError, match=r"^invalid payload for add_instruction: text"):
        SteeringCommand.model_validate(no_text, from_attributes=True)
    # an instance is taken as it is, as pydantic takes it
    assert SteeringCommand.model_validate(made, from_attributes=True) is made


def test_a_mapping_is_validated_as_the_dict_it_holds() -> None:
    fields = {"target": RUN, "actor": ACTOR, "kind": K.PAUSE, "correlation_id": "c-1"}
    made = SteeringCommand.model_validate(MappingProxyType({**fields, "created_at": EPOCH}))
    assert made == SteeringCommand.model_validate({**fields, "created_at": EPOCH})
    with pytest.raises(InvalidCommandError, match=r"^invalid payload for add_instruction"):
        SteeringCommand.model_validate(MappingProxyType({**fields, "kind": K.ADD_INSTRUCTION}))


def test_an_object_is_refused_unless_its_attributes_are_asked_for() -> None:
    # without from_attributes (and where it cannot be seen: a TypeAdapter, a model holding a
    # command) an object is refused, naming what to pass, and not read past the checks
    obj = SimpleNamespace(target=RUN, actor=ACTOR, kind="add_instruction")
    message = r"a command is made from a dict of its fields .* got SimpleNamespace"
    with pytest.raises(InvalidCommandError, match=message):
        SteeringCommand.model_validate(obj)
    with pytest.raises(ValidationError, match=message):
        COMMAND_ADAPTER.validate_python(obj, from_attributes=True)
