"""A hostile or careless user's seventeenth round: commands racing each other and the
release of a run, forks of forks, steering payloads at exactly their size limit, clocks at
the ends of the calendar.

Each test is a probe that found something (named in its docstring) or holds a decision down.
Probed and held (no test added): ``json_bytes`` (the payload policy's size count) against
``json.dumps`` for quotes, backslashes, control characters, line separators, astral
characters, non-string keys and floats (equal every time); ``rt.forget`` of a running run (a
``ConfigurationError``), and commands sent to a run after it was forgotten (rejected as *not
found*, a command sent before the release still settled); a pause and a cancel of a parent
in the tick its sub-agent spawned (both runs end ``cancelled``, every command settled once);
``SteeringCommand(created_at=...)`` past either end of the calendar in UTC, as a string, an
integer past year 9999 or NaN (each an ``InvalidCommandError``); a run and a late steer
under a clock at 9999-12-31 or 0001-01-01 with no store (the steer fails, *target finished*);
approve, reject, provide_context, pause, resume and cancel of a graph run resting on its
interrupt sent in one tick, in several orders (each settles once; a cancel supersedes the
rest, leaving the thread at its question); ``retain_finished=0`` with commands racing each
run's end and release (each settles once; later ones are *not found*); forgetting a finished
sub-agent run of a running parent; the operator API given duplicate keys, ``1e400``, integers
past the JSON reader, booleans and floats as priorities, NaN, UTF-16 and BOM bodies, form and
multipart content types, lone surrogates, NFD and RTL correlation ids, NFD, upper-case,
``%00`` and Arabic-digit run ids (400/415/422/404, a foreign tenant's answer the same);
supervisor YAML of 20,000 rules, 20 MB strings or comments, deep flow nesting, duplicate,
integer, null, boolean and complex keys, Python, binary, set and timestamp tags, several
documents, a BOM; ``RunLimits(deadline_s=5e-324 / 1e308)`` and ``update_budget`` of them;
``Auth.mint`` of NFD, RTL, zero-width and long tenants, NUL users, text rights and odd
lifetimes; ``Runtime`` given odd retention, queue, judge and store arguments; classes given
for a checkpointer, cache, store, retry, cache or timeout policy, middleware, toolset,
supervisor spec or sub-agent (each a typed refusal naming it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypedDict

import pytest

from tinyagents import (
    Agent,
    PolicyPipeline,
    RunStatus,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringReceipt,
    SteeringTarget,
)
from tinyagents.errors import ArgumentError, ConfigurationError, InvalidIdError
from tinyagents.events import EventBus
from tinyagents.graph import END, START, Command, StateGraph, interrupt
from tinyagents.protocol.ids import MAX_ID_LENGTH
from tinyagents.steering import AuthorityPolicy, PayloadPolicy, default_policies
from tinyagents.steering.policies import DEFAULT_MAX_TEXT_BYTES
from tinyagents.store import MemoryStore, SqliteStore, Store
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    FakeClock,
    Gate,
    ScriptedModel,
    SequentialIds,
    tool_call,
    use_clock,
    use_ids,
)

TERMINAL = {"steering.applied", "steering.rejected", "steering.superseded", "steering.failed"}
TEST = SteeringActor.test()


def settled_once(rt: Runtime, run_id: str) -> dict[str, list[str]]:
    """Each command of ``run_id``'s history with its event types; asserts one terminal each."""
    seen: dict[str, list[str]] = {}
    for event in rt.steering_history(run_id):
        seen.setdefault(event.correlation_id, []).append(event.type)
    for cid, types in seen.items():
        assert sum(t in TERMINAL for t in types) == 1, (cid, types)
    return seen


# -- commands racing one another -------------------------------------------------------------


async def test_pause_cancel_resume_and_steer_in_one_tick_settle_each_once_and_cancel() -> None:
    """Sound: four commands for a paused run sent in one tick while its tool runs. The
    cancel supersedes the others (each settles once) and the run ends cancelled."""
    gate = Gate()
    model = ScriptedModel([tool_call("hold"), "never", "never"])
    async with Runtime() as rt:
        handle = await rt.start(Agent("a", model, tools=[gate.tool()]), "go")
        await gate.entered.wait()
        await handle.pause()
        receipts = await asyncio.gather(
            handle.resume(), handle.steer("hi"), handle.cancel(), handle.pause()
        )
        assert [r.status for r in receipts] == ["accepted"] * 4
        gate.open()
        result = await handle.result()
        assert result.status is RunStatus.CANCELLED
        seen = settled_once(rt, handle.run_id)
        assert len(seen) == 5
        cancel = receipts[2].correlation_id
        assert seen[cancel][-1] == "steering.applied"
        assert all(t[-1] == "steering.superseded" for c, t in seen.items() if c != cancel), seen


# -- steering payloads at their size limit ---------------------------------------------------


@pytest.mark.parametrize("char", ["a", "é", "😀", "\n"])
async def test_a_payload_of_exactly_the_size_limit_is_taken_and_one_byte_more_refused(
    char: str,
) -> None:
    """Sound: the payload policy counts the command's compact JSON in UTF-8 bytes, and a
    payload whose JSON is exactly the limit (16 KiB) is accepted whatever the width of its
    characters; a byte more is refused."""
    frame = len(json.dumps({"text": ""}, separators=(",", ":")))
    unit = len(json.dumps(char, ensure_ascii=False).encode()) - 2
    room = DEFAULT_MAX_TEXT_BYTES - frame
    count, pad = divmod(room, unit)
    exact = char * count + "x" * pad
    over = exact + "x"
    for text, want in ((exact, "accepted"), (over, "rejected")):
        payload = {"text": text}
        size = len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())
        assert size == DEFAULT_MAX_TEXT_BYTES + (text is over)
        gate = Gate()
        async with Runtime(testing=True) as rt:
            model = ScriptedModel([tool_call("hold"), "done"])
            handle = await rt.start(Agent("a", model, tools=[gate.tool()]), "go")
            await gate.entered.wait()
            cmd = SteeringCommand(
                target=SteeringTarget.agent_run(handle.run_id),
                actor=TEST,
                kind=SteeringKind.ADD_INSTRUCTION,
                payload=payload,
            )
            receipt = await rt.submit(cmd)
            gate.open()
            await handle.result()
        assert receipt.status == want, (len(text), receipt.reason)
        if want == "rejected":
            assert receipt.policy_id == "payload" and "payload too large" in (receipt.reason or "")


# -- forks of forks --------------------------------------------------------------------------


class Asked(TypedDict, total=False):
    x: int
    answer: str


def bump(state: Asked) -> dict[str, Any]:
    return {"x": state.get("x", 0) + 1}


def ask(state: Asked) -> dict[str, Any]:
    return {"answer": str(interrupt("go on?"))}


class CountingCheckpointer(MemoryCheckpointer):
    """Counts the writes (checkpoints and pending writes) made through it."""

    writes = 0

    async def put(self, record: Any) -> None:
        self.writes += 1
        await super().put(record)

    async def put_writes(self, *args: Any, **kwargs: Any) -> None:
        self.writes += 1
        await super().put_writes(*args, **kwargs)


def asking_graph() -> Any:
    graph = StateGraph(Asked).add_node("bump", bump).add_node("ask", ask)
    graph.add_edge(START, "bump").add_edge("bump", "ask").add_edge("ask", END)
    return graph.compile(checkpointer=CountingCheckpointer())


async def test_a_fork_whose_own_id_would_pass_the_id_bound_is_refused_and_writes_nothing() -> None:
    """Found: ``graph.fork(thread, checkpoint)`` names the fork ``<thread>~fork-<12 hex>``;
    for a thread id of 240 characters (or a fork of a fork of ... of a short one) that is
    258 characters, past the id rule's 256. The fork was saved and its id returned, and every
    use of it (``run``, ``get_state``, another fork) was an ``InvalidIdError``: a thread
    made that nothing could read or delete. Now the fork is refused before anything is
    written, saying to name it (``new_thread_id``), which still works."""
    graph = asking_graph()
    thread = "t" * 240
    await graph.run({"x": 1}, thread_id=thread)
    head = (await graph.get_state(thread)).checkpoint_id
    before = graph.checkpointer.writes
    with pytest.raises(InvalidIdError) as caught:
        await graph.fork(thread, head)
    assert isinstance(caught.value, ValueError)
    said = str(caught.value)
    assert f"{MAX_ID_LENGTH}" in said and "new_thread_id" in said, said
    assert graph.checkpointer.writes == before  # nothing written

    named = await graph.fork(thread, head, new_thread_id="short")
    assert named == "short"
    assert (await graph.get_state("short")).values == {"x": 2}


async def test_a_fork_of_a_fork_keeps_its_lineage_in_its_default_id() -> None:
    """Sound: a fork of a fork is named after the fork (``t~fork-..~fork-..``) and runs on."""
    graph = asking_graph()
    result = await graph.run({"x": 1}, thread_id="t")
    first = await graph.fork("t", (await graph.get_state("t")).checkpoint_id)
    second = await graph.fork(first, (await graph.get_state(first)).checkpoint_id)
    assert second.startswith(first + "~fork-")
    answered = await graph.run(Command(resume={result.interrupts[0].id: "yes"}), thread_id=second)
    assert answered.state == {"x": 2, "answer": "yes"}
    assert (await graph.get_state("t")).interrupts  # the original still asks


async def test_a_steering_fork_whose_thread_id_would_pass_the_id_bound_is_refused_at_submit() -> (
    None
):
    """Found: a command with ``fork=True`` forks into ``<thread>~<correlation id>`` (and a
    tag of the sender's scope); for a thread id of 250 characters that is past the id rule's
    256. It was accepted, then failed as it landed with ``new_thread_id must be text ... of
    at most 256 characters`` (an argument its sender never gave). Now it is refused at
    submit, naming the fork's id and what to do."""
    graph = asking_graph()
    waiter = EventWaiter()
    async with Runtime(testing=True, sinks=[waiter]) as rt:
        thread = "u" * 250
        handle = await rt.start_graph(graph, {"x": 1}, thread_id=thread)
        paused = await waiter.until(lambda e: e.type == "graph.interrupt")
        update = SteeringCommand(
            target=SteeringTarget.agent_run(handle.run_id),
            actor=TEST,
            kind=SteeringKind.UPDATE_STATE,
            payload={"update": {"x": 5}},
        )
        await rt.submit(update)
        await waiter.until(
            lambda e: e.type in TERMINAL and e.correlation_id == update.correlation_id
        )
        forked = SteeringCommand(
            target=SteeringTarget.graph_task(handle.run_id, paused.task_id),
            actor=TEST,
            kind=SteeringKind.APPROVE,
            checkpoint_id=paused.checkpoint_id,
            fork=True,
        )
        receipt = await rt.submit(forked)
        assert receipt.status == "rejected", receipt
        reason = receipt.reason or ""
        assert receipt.policy_id == "graph", receipt
        assert "the fork's thread id" in reason and f"at most {MAX_ID_LENGTH}" in reason, reason
        assert "correlation_id" in reason, reason  # what to do
        await handle.cancel()
        await handle.result()


# -- clocks at the ends of the calendar -------------------------------------------------------


def test_a_fake_clock_whose_start_is_no_time_in_utc_is_refused() -> None:
    """Found: ``FakeClock(datetime(9999, 12, 31, 23, tzinfo=UTC-14h))`` was taken (its
    wall time is in range) but is past 9999-12-31 in UTC: every command a run made under it
    then failed to be built (``created_at ... is out of range in UTC``), far from the
    clock. Refused when made, as a start past the calendar is."""
    late = timezone(timedelta(hours=-14))
    early = timezone(timedelta(hours=14))
    for start in (datetime(9999, 12, 31, 23, tzinfo=late), datetime(1, 1, 1, 1, tzinfo=early)):
        with pytest.raises(ArgumentError, match="UTC"):
            FakeClock(start)
    clock = FakeClock(datetime(9999, 12, 31, 9, tzinfo=late))  # 23:00 UTC: in range
    with pytest.raises(ArgumentError, match="past 9999"):
        clock.advance(3600)
    assert clock.now() == datetime(9999, 12, 31, 9, tzinfo=late)  # nothing moved


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.db")
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


async def test_an_inbox_used_at_the_first_second_of_the_calendar_takes_and_answers(
    store: Store,
) -> None:
    """Found: under a clock at 0001-01-01T00:00:01 UTC, ``inbox_take`` computed "now -
    INBOX_LEASE_S" and ``inbox_answer`` "now - INBOX_RETENTION_S" before the calendar's
    first day: a bare ``OverflowError`` at every poll, so a runtime on a store never took a
    command another process sent it (logged as "date value out of range"). A time before
    the calendar is its first instant: nothing is older."""
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run("r-1"),
        actor=TEST,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "hi"},
        correlation_id="c-first",
    )
    receipt = SteeringReceipt(
        status="accepted", correlation_id="c-first", run_id="r-1", policy_id="p"
    )
    with use_clock(FakeClock(datetime(1, 1, 1, 0, 0, 1, tzinfo=UTC))):
        await store.inbox_put(owner="rt-a", request_id="q-1", command=cmd)
        taken = await store.inbox_take("rt-a")
        assert [i.request_id for i in taken] == ["q-1"]
        await store.inbox_answer("q-1", receipt)
        assert await store.inbox_receipt("q-1") == receipt


# -- the clock and id sources swapped in wrongly ----------------------------------------------


@pytest.mark.parametrize(
    ("swap", "said"),
    [
        (lambda: use_clock(FakeClock), r"use_clock\(FakeClock\(\)\)"),  # type: ignore[arg-type]
        (lambda: use_clock(None), "now"),  # type: ignore[arg-type]
        (lambda: use_ids(SequentialIds), r"use_ids\(SequentialIds\(\)\)"),  # type: ignore[arg-type]
        (lambda: use_ids("seq"), "new"),  # type: ignore[arg-type]
    ],
)
def test_a_clock_or_id_source_that_is_a_class_or_no_source_is_refused_when_swapped_in(
    swap: Any, said: str
) -> None:
    """Found: ``use_clock(FakeClock)`` (the class, not a clock) and ``use_ids(SequentialIds)``
    were taken, and the first timestamp or id any code asked for was a bare ``TypeError``
    (``FakeClock.now() missing 1 required positional argument: 'self'``) from deep inside a
    run; ``None`` or text an ``AttributeError``. Refused when swapped in, naming the fix, and
    the source in use is left as it was."""
    with pytest.raises(ConfigurationError, match=said):
        with swap():
            pass
    result = asyncio.run(Agent("a", ScriptedModel(["ok"])).run("go"))
    assert result.status is RunStatus.COMPLETED
    with use_clock(FakeClock()), use_ids(SequentialIds()):  # instances are still taken
        assert Agent("a", ScriptedModel(["ok"])).run_sync("go").run_id == "r-0001"


async def test_a_sink_that_is_a_class_is_refused_when_added_not_at_every_event() -> None:
    """Found: ``Runtime(sinks=[EventRecorder])`` (the class) passed the check that a sink is
    callable (a class is), and every event then "constructed" it: a ``TypeError`` logged
    once and counted after, the run going on with nothing recorded (the test reading an empty
    recorder). Refused when added, as a sink that is no callable is."""
    with pytest.raises(ConfigurationError, match=r"EventRecorder\(\)"):
        Runtime(sinks=[EventRecorder])
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match=r"EventWaiter\(\)"):
            rt.bus.add_sink(EventWaiter)
        recorder = EventRecorder()
        rt.bus.add_sink(recorder)  # an instance is still taken, and fed
        await Agent("a", ScriptedModel(["ok"])).run("go", runtime=rt)
        assert "run.completed" in recorder.types()


async def test_a_policy_given_as_a_class_is_refused_when_the_pipeline_is_made() -> None:
    """Found: ``PolicyPipeline([..., AuthorityPolicy])`` (the class, which is callable and
    has a ``policy_id``) was taken, and every command after, a cancel too, was rejected
    ("policy 'authority' failed (TypeError: AuthorityPolicy() takes no arguments)"): a
    runtime that could stop none of its runs. Refused when the pipeline is made or changed,
    naming the instance to give."""
    with pytest.raises(ConfigurationError, match=r"AuthorityPolicy\(\)"):
        PolicyPipeline([*default_policies(), AuthorityPolicy])
    pipeline = PolicyPipeline(default_policies())
    for change in (
        lambda: pipeline.insert(AuthorityPolicy, after="payload"),
        lambda: pipeline.policies.append(AuthorityPolicy),
    ):
        with pytest.raises(ConfigurationError, match=r"AuthorityPolicy\(\)"):
            change()
    assert pipeline.ids == ["authority", "allowlist", "budget", "staleness", "payload"]
    async with Runtime(policies=pipeline) as rt:
        gate = Gate()
        handle = await rt.start(
            Agent("a", ScriptedModel([tool_call("hold")]), tools=[gate.tool()]), "go"
        )
        await gate.entered.wait()
        assert (await handle.cancel()).status == "accepted"
        gate.open()
        assert (await handle.result()).status is RunStatus.CANCELLED


def test_a_pipeline_insert_at_no_such_policy_or_at_two_places_is_an_argument_error() -> None:
    """Found: ``pipeline.insert(p, before="nope")`` and ``insert(p, before=.., after=..)``
    were bare ``ValueError``s, where every other bad argument of the package is its typed
    ``ArgumentError`` (still a ``ValueError``). The pipeline is left as it was."""
    pipeline = PolicyPipeline(default_policies())
    before = list(pipeline.ids)
    with pytest.raises(ArgumentError, match="no policy 'nope'"):
        pipeline.insert(PayloadPolicy(), before="nope")
    with pytest.raises(ArgumentError, match="not both"):
        pipeline.insert(PayloadPolicy(), before="payload", after="authority")
    assert pipeline.ids == before


class _Unprintable:
    """An object whose ``str`` and ``repr`` raise (as a huge integer's do)."""

    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__


@pytest.mark.parametrize(
    "make",
    [
        lambda v: use_clock(v).__enter__(),
        lambda v: use_ids(v).__enter__(),
        lambda v: PolicyPipeline([v]),
        lambda v: PolicyPipeline(v),
        lambda v: Runtime(sinks=[v]),
        lambda v: EventBus().add_sink(v),
    ],
    ids=["use_clock", "use_ids", "policy", "policies", "sinks", "add_sink"],
)
@pytest.mark.parametrize("value", [10**5000, _Unprintable()], ids=["huge-int", "unprintable"])
def test_a_refusal_of_what_is_no_clock_policy_or_sink_names_a_value_it_cannot_print(
    make: Any, value: object
) -> None:
    """Found at review: the refusals added in this round quoted the value with ``str`` or
    ``repr``: an integer past 4,300 digits made the message itself a bare ``ValueError``."""
    with pytest.raises(ConfigurationError):
        make(value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: FakeClock(tick=10**5000),
        lambda: FakeClock(tick=-(10**5000)),
        lambda: FakeClock().advance(10**5000),
        lambda: FakeClock().advance(-(10**5000)),
        lambda: FakeClock(10**5000),  # type: ignore[arg-type]
    ],
    ids=["tick", "negative-tick", "advance", "advance-back", "start"],
)
def test_a_fake_clock_given_an_integer_past_any_float_is_an_argument_error(make: Any) -> None:
    """Found at review: ``math.isfinite`` raises ``OverflowError`` for an integer too large
    for a float, and the messages printed the integer (a ``ValueError`` past 4,300 digits);
    docs/testing.md promises an ``ArgumentError`` (a ``ValueError``) for such an amount."""
    with pytest.raises((ArgumentError, ConfigurationError)):
        make()
