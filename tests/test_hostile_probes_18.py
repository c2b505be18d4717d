"""A hostile or careless user's eighteenth round: tool schemas, store URLs, policy decisions
and inspected events holding a lone surrogate, node names that show nothing, a cancel while a
checkpoint is written.

Each test is a probe that found something (named in its docstring) or holds a decision down.
Probed and held (no test added): ``Runtime(retain_finished=..., retain_finished_s=...)`` given
-1, True, 1.5, NaN, a string or 10**400 (typed refusals; an infinite or huge window is taken
and compares exactly); ``tinyagents inspect`` of "", /, /dev/null, /proc files, ``sqlite:///``
and ``sqlite:////`` and ``tinyagents validate`` of /dev/null, a directory, a self-referring
alias, ``1e999`` (each one line and exit code 2 or 1); supervisor YAML with hex, underscored,
infinite, NaN and past-float numbers, merge keys, ``!!binary``, ``!!set``, ``!!python`` tags,
a BOM, RTL and NUL texts (each taken as meant or a ``SupervisorSpecError`` with its line);
tools taking positional-only or keyword-only parameters, no annotations, ``self``, mutable
defaults (each call gets a fresh copy), a default JSON cannot hold (left out of the schema);
graph inputs that are no mapping, unknown or non-text keys, NUL, newline, NFD, RTL, blank and
over-long thread ids (each an ``InvalidUpdateError`` or ``InvalidIdError``); async, one- and
three-argument reducers (refused at compile); nodes returning tuples, lists, generators,
objects, cycles, huge integers, ``Command(goto=5)``, ``Send`` to END (each typed); a reducer
that refuses a node's write: the run fails with its error and ``get_state`` raises it again, a
decision held for LangGraph parity by ``test_a_node_that_writes_none_as_its_messages_fails``;
two runtimes on one SQLite file (a graph thread's second writer is ``ThreadBusy`` across them);
a thread command deferred past its runtime's close (delivered by the next runtime on the store);
``forget`` of a graph run resting on its interrupt (refused while it rests); 20 odd tool
return values, each kept readable in the store; the ``runs`` CLI's odd URLs, tokens, timeouts
and ids; ``TINYAGENTS_*`` environment values of NaN, ``1e999``, hex and empty text.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from pydantic import Field

from tinyagents import (
    Agent,
    PolicyPipeline,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringReceipt,
    SteeringTarget,
    tool,
)
from tinyagents.cli import inspect_store, read_store
from tinyagents.errors import ConfigurationError, GraphValidationError
from tinyagents.events import summarize
from tinyagents.graph import END, START, StateGraph
from tinyagents.harness import Tool, ToolSpec
from tinyagents.steering import CheckPolicy, Decision, default_policies
from tinyagents.steering.policies import json_bytes
from tinyagents.store import PostgresStore
from tinyagents.store.checkpoint import CheckpointRecord, SqliteCheckpointer
from tinyagents.testkit import EventRecorder, FunctionModel, ScriptedModel, reply, tool_call

# -- a tool schema holding a lone surrogate ----------------------------------------------------


def _field_description() -> Any:
    def pick(color: Annotated[str, Field(description="a \ud800 color")] = "red") -> str:
        """Pick a color."""
        return color

    return pick


def _default() -> Any:
    def pick(color: str = "r\udfffed") -> str:
        """Pick a color."""
        return color

    return pick


@pytest.mark.parametrize("make", [_field_description, _default], ids=["description", "default"])
def test_a_tool_whose_schema_holds_a_lone_surrogate_is_refused_when_made(make: Any) -> None:
    """Found: a tool whose parameters schema held a lone surrogate (a field's description or a
    default from a broken decode) was taken, as its description was before round 10; every
    request of a run offering it then failed before anything was sent, reported as the
    server's HTTP 500 and retried ("'utf-8' codec can't encode character '\\ud800'"). Refused
    when the tool is made, as its description is."""
    with pytest.raises(ConfigurationError, match=r"tool 'pick': its parameters schema.*surrogate"):
        tool(make())


def test_a_tool_schema_given_as_a_dict_holding_a_lone_surrogate_key_is_refused() -> None:
    class Measure(Tool):
        async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
            return "measured"

    schema = {"type": "object", "properties": {"le\udc80ngth": {"type": "number"}}}
    with pytest.raises(ConfigurationError, match=r"tool 'measure': its parameters schema.*surr"):
        Measure(name="measure", parameters=schema)


async def test_a_prepare_giving_a_schema_holding_a_lone_surrogate_fails_the_run() -> None:
    def prepare(ctx: Any, spec: ToolSpec) -> ToolSpec:
        schema = {"type": "object", "properties": {"x": {"description": "\ud800"}}}
        return ToolSpec(name=spec.name, description=spec.description, parameters=schema)

    @tool(prepare=prepare)
    def measure(x: str = "") -> str:
        """Measure."""
        return "measured"

    model = ScriptedModel([tool_call("measure"), reply("done")])
    result = await Agent("a", model, tools=[measure]).run("go")
    assert result.status.value == "failed"
    assert "surrogate" in (result.error or "")
    assert model.requests == []  # nothing unsendable was offered


def test_a_tool_schema_holding_text_beyond_ascii_is_still_taken() -> None:
    def pick(color: Annotated[str, Field(description="une couleur ✓ 🎨")] = "rouge é") -> str:
        """Pick a color."""
        return color

    made = tool(pick)
    assert made.parameters["properties"]["color"]["description"] == "une couleur ✓ 🎨"


# -- a cancel while a checkpoint is being written ----------------------------------------------


class _HeldPut(SqliteCheckpointer):
    """Holds its ``hold``-th write until ``let_go`` is set."""

    def __init__(self, path: Path, hold: int) -> None:
        super().__init__(str(path))
        self.hold, self.puts = hold, 0
        self.entered, self.let_go = asyncio.Event(), asyncio.Event()

    async def put(self, record: CheckpointRecord) -> None:
        self.puts += 1
        if self.puts == self.hold:
            self.entered.set()
            await self.let_go.wait()
        await super().put(record)


class Count(TypedDict, total=False):
    n: int


@pytest.mark.parametrize(("hold", "saved", "next_nodes"), [(3, 1, ("b",)), (4, 11, ())])
async def test_a_cancel_sent_while_a_checkpoint_is_written_keeps_the_write_and_the_thread(
    tmp_path: Path, hold: int, saved: int, next_nodes: tuple[str, ...]
) -> None:
    """Held: a cancel sent while a step's checkpoint (or the last one) is being written
    settles once (applied), the write lands whole, and the thread goes on from it: a run
    continued on it finishes with each node run once (n = 1 + 10)."""
    cp = _HeldPut(tmp_path / "cp.db", hold)
    graph = (
        StateGraph(Count)
        .add_node("a", lambda s: {"n": s.get("n", 0) + 1})
        .add_node("b", lambda s: {"n": s["n"] + 10})
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .compile(checkpointer=cp)
    )
    try:
        async with Runtime(testing=True) as rt:
            handle = await rt.start_graph(graph, {"n": 0}, thread_id="t")
            await asyncio.wait_for(cp.entered.wait(), 5)
            receipt = await handle.cancel()
            assert receipt.status == "accepted"
            cp.let_go.set()
            result = await asyncio.wait_for(handle.result(), 5)
            assert result.status == "cancelled"
            settled = [e.type for e in rt.steering_history(handle.run_id)]
            assert settled[-1] == "steering.applied"
            assert settled.count("steering.applied") == 1
            state = await graph.get_state("t")
            assert (state.values, state.next) == ({"n": saved}, next_nodes)
            again = await asyncio.wait_for(graph.run(None, thread_id="t"), 5)
            assert (again.status, again.state) == ("completed", {"n": 11})
    finally:
        await cp.aclose()


# -- a PostgreSQL URL holding a lone surrogate -------------------------------------------------


@pytest.mark.parametrize(
    ("url", "part"),
    [
        ("postgresql://127.0.0.1:5432/te\udcffst", "database"),
        ("postgresql://u\udce9@127.0.0.1:5432/test", "user"),
        ("postgresql://u:p\ud800@127.0.0.1:5432/test", "password"),
        ("postgresql://127.0.0.1:5432/test?application_name=a\udc80", "option 'application_name'"),
    ],
)
def test_a_postgresql_url_holding_a_lone_surrogate_is_refused_when_made(
    url: str, part: str
) -> None:
    """Found: a PostgreSQL URL holding a lone surrogate (an environment variable of Latin-1
    bytes reaches Python so) was taken, and opening the store raised asyncpg's bare
    ``AttributeError: 'Protocol' object has no attribute '_on_error'``. Refused when the store
    is made, naming the part, as a NUL there is; nothing is connected."""
    with pytest.raises(ConfigurationError, match=rf"its {part} holds a lone surrogate") as caught:
        PostgresStore(url)
    str(caught.value).encode()  # the message itself prints (its URL's surrogate escaped)
    with pytest.raises(ConfigurationError, match=rf"its {part} holds a lone surrogate"):
        Runtime(url)


# -- inspect of events holding a lone surrogate ------------------------------------------------


async def test_inspect_reads_the_events_of_a_run_whose_text_held_a_lone_surrogate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: a run whose model answered with a lone surrogate (a provider's broken decode)
    is logged with it escaped, as ``\\udcff``; the store's readers take it back
    (``parse_event``), but ``tinyagents inspect`` read the log with pydantic's JSON parser,
    which refuses the escape: the run's ``model.response`` and ``run.completed`` events were
    counted as unreadable and left out (and a failed run's error with them)."""
    db = tmp_path / "runs.db"
    async with Runtime(f"sqlite:///{db}") as rt:
        handle = await rt.start(Agent("a", ScriptedModel(["ok \udcff done"])), "go")
        assert (await handle.result()).output == "ok \udcff done"
    _, events, unreadable = read_store(db, everything=True)
    assert unreadable == 0
    assert [e.type for e in events if e.type in ("model.response", "run.completed")] == [
        "model.response",
        "run.completed",
    ]
    assert await inspect_store(str(db), as_json=True) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["unreadable"] == 0
    assert "run.completed" in [e["type"] for e in record["events"]]


async def _instruction_through(
    pipeline: PolicyPipeline,
) -> tuple[SteeringReceipt, SteeringCommand, EventRecorder]:
    """An instruction submitted through ``pipeline`` to a live run (waiting on its model
    until the receipt is in): its receipt, the command and the events recorded."""
    release = asyncio.Event()

    async def think(request: Any) -> Any:
        await release.wait()
        return reply("done")

    recorder = EventRecorder()
    async with Runtime(testing=True, sinks=[recorder], policies=pipeline) as rt:
        handle = await rt.start(Agent("a", FunctionModel(think)), "go")
        cmd = SteeringCommand(
            target=SteeringTarget.agent_run(handle.run_id),
            actor=SteeringActor.test(),
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "focus"},
        )
        receipt = await rt.submit(cmd)
        release.set()
        await handle.result()
    return receipt, cmd, recorder


# -- a policy's decision that no receipt can carry ---------------------------------------------


@pytest.mark.parametrize(
    ("status", "reason", "policy_id", "named"),
    [
        ("defer", "waiting \ud800", "mine", "reason holding a lone surrogate"),
        ("reject", "no \udcff", "mine", "reason holding a lone surrogate"),
        ("reject", 5, "mine", "reason that is no text (int)"),
        ("reject", "no", "mi\ud800ne", "policy_id holding a lone surrogate"),
        ("reject", "no", 7, "policy_id that is no text (int)"),
    ],
)
async def test_a_policy_decision_no_receipt_can_carry_is_refused_saying_so(
    status: str, reason: Any, policy_id: Any, named: str
) -> None:
    """Found: a policy's decision was taken whatever its reason and policy id held: a lone
    surrogate (an external system's text) made ``receipt.model_dump_json()`` (the API's
    answer, an inbox's written receipt) a bare ``PydanticSerializationError``, after the
    command was settled; a number was carried into the receipt and its events with
    pydantic's serializer warnings. As a policy that raises or returns no ``Decision``, it is
    now refused: rejected, with a reason naming the policy and what was wrong."""

    async def odd(cmd: SteeringCommand, ctx: Any, call_next: Any) -> Decision:
        return Decision(status=status, command=cmd, reason=reason, policy_id=policy_id)  # type: ignore[arg-type]

    odd.policy_id = "odd"  # type: ignore[attr-defined]
    pipeline = PolicyPipeline([odd, *default_policies()])
    receipt, cmd, recorder = await _instruction_through(pipeline)
    assert receipt.status == "rejected"
    assert f"policy 'odd' gave a {named}" in (receipt.reason or "")
    assert receipt.policy_id == "odd"
    json.loads(receipt.model_dump_json())  # it is written as any receipt is
    assert recorder.lifecycle(cmd.correlation_id) == ["requested", "rejected"]


# -- a node name that shows nothing ------------------------------------------------------------


@pytest.mark.parametrize("name", [" ", "   ", "\u00a0", "\u3000", "\u2003"])
def test_a_node_name_that_shows_nothing_is_refused_as_an_empty_one_is(name: str) -> None:
    """Found: an empty node name was refused (a steering command, an event and the operator
    API name a node by it), but one of spaces, a no-break or an ideographic space was taken:
    a node no console, trace or event shows a name for, whose commands are addressed to a
    blank. Refused as an agent's name that shows nothing is."""
    with pytest.raises(GraphValidationError, match=r"node name.*shows nothing"):
        StateGraph(Count).add_node(name, lambda s: {"n": 1})


def test_a_node_name_with_spaces_around_what_it_shows_is_still_taken() -> None:
    graph = StateGraph(Count).add_node(" a ", lambda s: {"n": 1})
    assert " a " in graph.nodes


class _SaysOdd(CheckPolicy):
    """A check whose reason is whatever it was given (an external system's text, say)."""

    policy_id = "says-odd"

    def __init__(self, reason: Any) -> None:
        self.reason = reason

    def check(self, cmd: SteeringCommand, ctx: Any) -> Any:
        return self.reason

    def check_sender(self, cmd: SteeringCommand, ctx: Any) -> Any:
        return self.reason


async def _hand_on(cmd: SteeringCommand, ctx: Any, call_next: Any) -> Decision:
    return await call_next(cmd)


_hand_on.policy_id = "hands-on"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("reason", "named"),
    [
        ("no \ud800", "reason holding a lone surrogate"),
        (42, "reason that is no text (int)"),
        (b"no", "reason that is no text (bytes)"),
    ],
)
@pytest.mark.parametrize("after_a_policy", [False, True], ids=["inline", "after-a-policy"])
async def test_a_check_policys_reason_no_receipt_can_carry_is_refused_saying_so(
    reason: Any, named: str, after_a_policy: bool
) -> None:
    """Found by review: round 18 checked a policy's own ``Decision``, not the reason a
    ``CheckPolicy.check`` returns, the usual shape of a user's policy (run inline by the
    router, or after a full policy by the chain): a lone surrogate in it made the receipt's
    JSON a bare ``PydanticSerializationError``, a number was carried into the receipt. The
    command is refused, saying which check gave what."""
    first = [_hand_on] if after_a_policy else []
    pipeline = PolicyPipeline([*first, _SaysOdd(reason), *default_policies()])
    receipt, cmd, recorder = await _instruction_through(pipeline)
    assert receipt.status == "rejected"
    assert f"policy 'says-odd' gave a {named}" in (receipt.reason or "")
    assert receipt.policy_id == "says-odd"
    json.loads(receipt.model_dump_json())
    assert recorder.lifecycle(cmd.correlation_id) == ["requested", "rejected"]


async def test_a_check_senders_reason_no_receipt_can_carry_is_refused_saying_so() -> None:
    """The same for ``check_sender`` (a thread's command with no run of that thread yet)."""
    pipeline = PolicyPipeline([_SaysOdd("no \udcff"), *default_policies()])
    async with Runtime(testing=True, policies=pipeline) as rt:
        cmd = SteeringCommand(
            target=SteeringTarget.thread("t-none"),
            actor=SteeringActor.test(),
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "focus"},
        )
        receipt = await rt.submit(cmd)
    assert receipt.status == "rejected"
    assert "policy 'says-odd' gave a reason holding a lone surrogate" in (receipt.reason or "")
    json.loads(receipt.model_dump_json())


@pytest.mark.parametrize("name", [" ", "\u200b", "\u3000"])
def test_an_agent_name_that_shows_nothing_is_told_so_not_blamed_on_its_steering(
    name: str,
) -> None:
    """Found by review: once the actor factories refused a blank name, an agent named with
    spaces was told its name "cannot be the agent_id of the steering its runs send ...; name
    it with UTF-8 text" (it is UTF-8 text) before the check that says what is wrong."""
    with pytest.raises(ConfigurationError) as caught:
        Agent(name, ScriptedModel(["x"]))
    assert "shows no visible character" in str(caught.value)
    assert "agent_id" not in str(caught.value)


class _Short(str):
    """Text that says it is one character long, whatever it holds."""

    def __len__(self) -> int:
        return 1


async def test_text_that_understates_its_length_is_sized_and_summarised_by_what_it_holds() -> None:
    """Found by review: the payload policy and the events' summary asked a text its length,
    and a ``str`` subclass that said 1 for 100,000 characters passed the 16 KiB limit (its
    JSON counted 15 bytes) and was kept whole in every event. Text is measured by what it
    holds: the command is refused as too large, and a summary cuts it."""
    release = asyncio.Event()

    async def think(request: Any) -> Any:
        await release.wait()
        return reply("done")

    held = _Short("x" * 100_000)
    summary = summarize({"notes": [held]})
    assert len(str.__str__(summary["notes"][0])) < 1_000
    async with Runtime(testing=True) as rt:
        handle = await rt.start(Agent("a", FunctionModel(think)), "go")
        cmd = SteeringCommand(
            target=SteeringTarget.agent_run(handle.run_id),
            actor=SteeringActor.test(),
            kind=SteeringKind.PROVIDE_CONTEXT,
            payload={"value": [held]},
        )
        receipt = await rt.submit(cmd)
        release.set()
        await handle.result()
    assert receipt.status == "rejected"
    assert "payload too large" in (receipt.reason or "")


class _Sly(str):
    """Text that hides what it holds from every method a check might call on it."""

    def __len__(self) -> int:
        return 1

    def __str__(self) -> str:
        return self

    def __repr__(self) -> str:
        return "'ok'"

    def isascii(self) -> bool:
        return True

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        return b"ok"


class _SlyInt(int):
    def __repr__(self) -> str:
        return "1"


def test_a_summary_key_of_a_str_subclass_is_cut_by_what_it_holds() -> None:
    """Found by the second review: a dict key of a ``str`` subclass went to the summary by
    its own ``str``, whole whatever its length."""
    summary = summarize({_Sly("k" * 100_000): "v"})
    (key,) = summary
    assert len(str.__str__(key)) < 1_000


def test_numbers_are_sized_by_their_digits_not_their_own_repr() -> None:
    """Found by the second review: the payload policy sized a number by its own ``repr``, so
    200 ints of 4,000 digits that each said ``1`` passed the 16 KiB limit."""
    big = _SlyInt(10**3999)
    assert json_bytes([big]) == 4_002
    assert json_bytes([_SlyInt(-5), 2.5]) == len("[-5,2.5]")


async def test_a_check_policys_reason_that_hides_a_lone_surrogate_is_refused() -> None:
    """Found by the second review: a reason of a ``str`` subclass whose ``isascii`` or
    ``encode`` hid a lone surrogate passed the check, and the receipt's JSON still failed."""
    pipeline = PolicyPipeline([_SaysOdd(_Sly("no \ud800")), *default_policies()])
    receipt, _, _ = await _instruction_through(pipeline)
    assert receipt.status == "rejected"
    assert "gave a reason holding a lone surrogate" in (receipt.reason or "")
    json.loads(receipt.model_dump_json())


@pytest.mark.parametrize("policy_id", ["p\ud800", _Sly("p\udcff")])
def test_a_policy_id_holding_a_lone_surrogate_is_refused_when_the_policy_is_added(
    policy_id: str,
) -> None:
    """Found by the second review: a policy id no receipt can carry was taken, and every
    receipt naming it (its refusals, the refusal saying what was wrong with its reason)
    failed to be written."""

    async def odd(cmd: SteeringCommand, ctx: Any, call_next: Any) -> Decision:
        return await call_next(cmd)

    odd.policy_id = policy_id  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="policy_id"):
        PolicyPipeline([odd])
