"""The supervisor on live runs: each rule once at its boundary, the judge, pause/steer/abort,
fail-open and fail-closed, the dwell cap, and trust bound to the runtime's own supervisor."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tinyagents import (
    Agent,
    RunLimits,
    RunStatus,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
    SupervisorSpec,
    tool,
)
from tinyagents.errors import ConfigurationError
from tinyagents.events import SupervisorEvent
from tinyagents.harness import Middleware, ModelRequest, ModelResponse, Usage
from tinyagents.protocol import ReceiptStatus, SteeringDelivery
from tinyagents.steering import Decision
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    FunctionModel,
    Gate,
    ScriptedModel,
    reply,
    tool_call,
    tool_calls,
)

CALLS: list[str] = []


@tool
def search(query: str = "") -> str:
    """Search for something."""
    CALLS.append("search")
    return "nothing found"


@tool
def lookup(key: str = "") -> str:
    """Look something up."""
    CALLS.append("lookup")
    return "a value"


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.clear()


def used(response: ModelResponse, tokens: int) -> ModelResponse:
    response.usage = Usage(input_tokens=tokens, output_tokens=0)
    return response


def actions(recorder: EventRecorder) -> list[dict[str, Any]]:
    return [e.data for e in recorder.of_type("supervisor.action") if isinstance(e, SupervisorEvent)]


def verdict(passed: bool, reason: str) -> str:
    return f'{{"passed": {"true" if passed else "false"}, "reason": "{reason}"}}'


def hung_judge() -> FunctionModel:
    async def never(request: ModelRequest) -> str:
        await asyncio.Event().wait()
        return ""  # pragma: no cover

    return FunctionModel(never)


# --------------------------------------------------------------------------- rules


async def test_tool_repeated_pauses_once_after_the_third_call_and_the_run_resumes() -> None:
    spec = SupervisorSpec(rules=[{"when": "tool_repeated", "tool": "search", "count": 3}])
    model = ScriptedModel([tool_call("search") for _ in range(5)] + [reply("done")])
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(supervisor=spec, sinks=[recorder, waiter]) as rt:
        handle = await rt.start(Agent("a", model, tools=[search]), "find it")
        await waiter.event("run.paused", handle.run_id)
        assert CALLS == ["search"] * 3  # paused at after_tool_result of the third call
        [applied] = [
            e
            for e in rt.steering_history(handle.run_id)
            if e.type == "steering.applied" and e.kind is SteeringKind.PAUSE
        ]
        assert applied.affected["boundary"] == "after_tool_result"
        await handle.resume()
        result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert CALLS == ["search"] * 5
    assert actions(recorder) == [
        {
            "action": "pause",
            "source": "tool_repeated",
            "reason": "tool 'search' called 3 times (limit 3)",
            "iteration": 3,
            "correlation_id": applied.correlation_id,
        }
    ]
    assert len(recorder.of_type("supervisor.rule_fired")) == 1


async def test_abort_lands_between_two_tool_calls_of_one_turn() -> None:
    spec = SupervisorSpec(rules=[{"when": "tool_repeated", "count": 2}], on_violation="abort")
    model = ScriptedModel(
        [
            tool_calls(tool_call("search"), tool_call("search"), tool_call("lookup")),
            reply("never"),
        ]
    )
    recorder = EventRecorder()
    async with Runtime(supervisor=spec, sinks=[recorder]) as rt:
        handle = await rt.start(Agent("a", model, tools=[search, lookup]), "go")
        result = await handle.result()
    assert result.status is RunStatus.ABORTED
    assert result.error == "tool 'search' called 2 times (limit 2)"
    assert CALLS == ["search", "search"]  # lookup, the third call of the turn, never ran
    assert len(model.requests) == 1


async def test_an_abort_on_a_final_answer_turn_stops_the_run_before_its_outcome() -> None:
    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1, "then": "abort"}])
    async with Runtime(supervisor=spec) as rt:
        handle = await rt.start(Agent("a", ScriptedModel([reply("the answer")])), "go")
        result = await handle.result()
    assert result.status is RunStatus.ABORTED
    assert result.error == "iteration 1 reached (limit 1)"


async def test_iteration_reached_fires_once_at_its_iteration() -> None:
    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 2}], on_violation="steer")
    model = ScriptedModel([tool_call("search")] * 3 + [reply("done")])
    recorder = EventRecorder()
    async with Runtime(supervisor=spec, sinks=[recorder]) as rt:
        result = await (await rt.start(Agent("a", model, tools=[search]), "go")).result()
    assert result.status is RunStatus.COMPLETED
    assert [a["iteration"] for a in actions(recorder)] == [2]
    steered = [i for i, r in enumerate(model.requests) if "Supervisor guidance" in str(r.messages)]
    assert steered[0] == 2  # applied at iteration 2's boundary, seen by the third request


async def test_budget_fraction_never_fires_without_a_budget() -> None:
    spec = SupervisorSpec(rules=[{"when": "budget_fraction", "gt": 0.1}], on_violation="abort")
    model = ScriptedModel([used(tool_call("search"), 1000), used(reply("done"), 1000)])
    recorder = EventRecorder()
    async with Runtime(supervisor=spec, sinks=[recorder]) as rt:
        result = await (await rt.start(Agent("a", model, tools=[search]), "go")).result()
    assert result.status is RunStatus.COMPLETED
    assert recorder.of_type("supervisor.rule_fired") == []


async def test_budget_fraction_fires_once_past_its_fraction() -> None:
    spec = SupervisorSpec(rules=[{"when": "budget_fraction", "gt": 0.5}], on_violation="abort")
    model = ScriptedModel([used(tool_call("search"), 40), used(tool_call("search"), 20)])
    async with Runtime(supervisor=spec) as rt:
        agent = Agent("a", model, tools=[search], limits=RunLimits(max_tokens=100))
        result = await (await rt.start(agent, "go")).result()
    assert result.status is RunStatus.ABORTED
    assert result.error == "60 of 100 tokens used (more than 50% of the budget)"
    assert CALLS == ["search"]  # the second turn's tool never ran


async def test_a_rule_given_twice_acts_once() -> None:
    # the same rule twice in a spec (`tinyagents validate` warns of it) fired twice on one
    # event: two steers of one reason; a user means it once. A rule saying anything else
    # (another count) is another rule, and acts on its own.
    rule = {"when": "tool_repeated", "tool": "search", "count": 1, "then": "steer"}
    spec = SupervisorSpec(rules=[rule, {**rule, "count": 2}, rule])
    recorder = EventRecorder()
    async with Runtime(supervisor=spec, sinks=[recorder]) as rt:
        model = ScriptedModel([tool_call("search"), tool_call("search"), reply("done")])
        result = await (await rt.start(Agent("a", model, tools=[search]), "go")).result()
    assert result.status is RunStatus.COMPLETED
    reasons = [a["reason"] for a in actions(recorder)]
    assert reasons == [
        "tool 'search' called 1 times (limit 1)",
        "tool 'search' called 2 times (limit 2)",
    ]
    steers = [e for e in recorder.steering() if e.type == "steering.applied"]
    assert len(steers) == 2


@pytest.mark.parametrize(
    ("first", "second", "sent", "ended"),
    [
        # in the spec's order; an abort wins whatever came before it on that event ...
        ("steer", "abort", ["steer", "abort"], "budget"),
        ("pause", "abort", ["pause", "abort"], "budget"),
        # ... and nothing is sent after it (the later rule has fired all the same)
        ("abort", "pause", ["abort"], "iteration"),
        ("abort", "steer", ["abort"], "iteration"),
    ],
)
async def test_two_rules_firing_on_one_event_act_in_spec_order_and_an_abort_wins(
    first: str, second: str, sent: list[str], ended: str
) -> None:
    spec = SupervisorSpec(
        rules=[
            {"when": "iteration_reached", "gte": 1, "then": first},
            {"when": "budget_fraction", "gt": 0.1, "then": second},
        ]
    )
    recorder = EventRecorder()
    async with Runtime(supervisor=spec, sinks=[recorder]) as rt:
        model = ScriptedModel([used(tool_call("search"), 50), reply("done")])
        agent = Agent("a", model, tools=[search], limits=RunLimits(max_tokens=100))
        result = await (await rt.start(agent, "go")).result()
    fired = [e.rule for e in recorder.of_type("supervisor.rule_fired")]
    assert fired == ["iteration_reached", "budget_fraction"]
    assert [a["action"] for a in actions(recorder)] == sent
    assert result.status is RunStatus.ABORTED
    assert result.error is not None and result.error.startswith(
        "50 of 100 tokens" if ended == "budget" else "iteration 1 reached"
    )
    assert CALLS == []  # the abort landed before the tool call of that response
    # what the abort overtook on its way is superseded, never applied after it
    applied = [e.kind for e in recorder.steering() if e.type == "steering.applied"]
    assert applied == [SteeringKind.CANCEL]


async def test_an_agents_own_spec_supervises_it_in_a_plain_runtime() -> None:
    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1}], on_violation="abort")
    watched = Agent("watched", ScriptedModel([reply("x")]), supervisor=spec)
    free = Agent("free", ScriptedModel([reply("y")]))
    async with Runtime() as rt:
        assert (await (await rt.start(watched, "go")).result()).status is RunStatus.ABORTED
        assert (await (await rt.start(free, "go")).result()).status is RunStatus.COMPLETED
    result = await Agent("solo", ScriptedModel([reply("z")]), supervisor=spec).run("go")
    assert result.status is RunStatus.ABORTED


async def test_an_agents_spec_counting_a_tool_the_agent_lacks_is_refused_before_a_run() -> None:
    # its runs only ever narrow the agent's tools, so the rule could never fire: a misspelt
    # tool name left the agent without that rule, and nothing said so. Checked when a run
    # starts (the agent's tools are complete then: ``@agent.tool`` adds them after), and
    # nothing starts.
    spec = SupervisorSpec(rules=[{"when": "tool_repeated", "tool": "serach", "count": 2}])
    model = ScriptedModel([reply("x")])
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        agent = Agent("a", model, tools=[search], supervisor=spec)
        with pytest.raises(ConfigurationError, match=r"'serach'.*\(search\)"):
            await rt.start(agent, "go")
        with pytest.raises(ConfigurationError, match="no tools"):
            await Agent("a", model, supervisor=spec).run("go", runtime=rt)
        assert rt.runs.list() == [] and recorder.events == [] and model.requests == []
    fine = SupervisorSpec(rules=[{"when": "tool_repeated", "tool": "search"}])
    agent = Agent("a", ScriptedModel([reply("x")]), tools=[search], supervisor=fine)
    assert (await agent.run("go")).status is RunStatus.COMPLETED


async def test_a_rule_counts_a_tool_added_with_agent_tool_after_the_agent_was_made() -> None:
    # found: the spec was checked when the agent was made, so a pydantic-ai style agent
    # (``@agent.tool`` below ``Agent(...)``) could not be supervised by a rule naming its tool
    spec = SupervisorSpec(
        rules=[{"when": "tool_repeated", "tool": "fetch", "count": 2}], on_violation="abort"
    )
    agent = Agent("a", ScriptedModel([tool_call("fetch"), tool_call("fetch")]), supervisor=spec)

    @agent.tool_plain
    def fetch() -> str:
        """Fetch it."""
        return "fetched"

    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        result = await (await rt.start(agent, "go")).result()
    assert result.status is RunStatus.ABORTED
    assert [e.rule for e in recorder.of_type("supervisor.rule_fired")] == ["tool_repeated"]


# --------------------------------------------------------------------------- pause dwell cap


async def test_a_pause_past_its_dwell_cap_becomes_an_abort() -> None:
    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1}], pause_max_s=0.01)
    recorder = EventRecorder()
    async with Runtime(supervisor=spec, sinks=[recorder]) as rt:
        model = ScriptedModel([tool_call("search"), reply("done")])
        result = await (await rt.start(Agent("a", model, tools=[search]), "go")).result()
    assert result.status is RunStatus.ABORTED
    assert result.error == "paused longer than the supervisor's dwell cap of 0.01 s"
    assert [(a["action"], a["source"]) for a in actions(recorder)] == [
        ("pause", "iteration_reached"),
        ("abort", "pause_max_s"),
    ]
    assert len(recorder.of_type("supervisor.escalated")) == 1


@pytest.mark.parametrize("name", ["TINYAGENTS_PAUSE_MAX_S", "TINYAGENTS_JUDGE_TIMEOUT_S"])
@pytest.mark.parametrize("value", ["0.2s", "inf"])
def test_a_bad_default_in_the_environment_is_refused_when_the_runtime_is_made(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    # it was read only when a pause of the supervisor's landed, inside the bus sink: the
    # error was swallowed there and the run stayed paused for good
    monkeypatch.setenv(name, value)
    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1}])
    for supervisor in (spec, None):  # an agent's own spec may use the default later
        with pytest.raises(ConfigurationError, match=name):
            Runtime(supervisor=supervisor)


@pytest.mark.parametrize("wrong", ["supervisor.yaml", {"rules": []}, SupervisorSpec])
def test_a_supervisor_that_is_not_a_spec_is_refused_by_its_type(wrong: Any) -> None:
    # a YAML path or a dict given to Agent(supervisor=...) left the agent unsupervised
    # without a word; Runtime(supervisor=...) raised an AttributeError; the class itself
    # (no call) was a TypeError "check_agent() missing 1 required positional argument"
    name = "the class SupervisorSpec" if wrong is SupervisorSpec else type(wrong).__name__
    with pytest.raises(ConfigurationError, match=f"got {name}.*SupervisorSpec.from_yaml"):
        Agent("a", ScriptedModel([]), supervisor=wrong)
    with pytest.raises(ConfigurationError, match=f"got {name}.*SupervisorSpec.from_yaml"):
        Runtime(supervisor=wrong)


# --------------------------------------------------------------------------- trust


async def test_a_forged_supervisor_actor_is_not_trusted() -> None:
    spec = SupervisorSpec(rules=[{"when": "tool_repeated", "count": 1}])
    waiter = EventWaiter()
    async with Runtime(supervisor=spec, sinks=[waiter]) as rt:
        model = ScriptedModel([tool_call("search"), reply("done")])
        handle = await rt.start(Agent("a", model, tools=[search]), "go")
        forged = await rt.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run(handle.run_id),
                actor=SteeringActor.middleware("supervisor"),
                kind=SteeringKind.CANCEL,
                payload={"reason": "forged", "abort": True},
            )
        )
        assert forged.status is ReceiptStatus.REJECTED
        assert forged.reason is not None and "not registered" in forged.reason
        await waiter.event("run.paused", handle.run_id)  # the real supervisor's pause landed
        accepted = [
            e
            for e in rt.steering_history(handle.run_id)
            if e.type == "steering.accepted" and e.actor == SteeringActor.middleware("supervisor")
        ]
        assert [e.kind for e in accepted] == [SteeringKind.PAUSE]
        await handle.resume()
        assert (await handle.result()).status is RunStatus.COMPLETED


def test_the_supervisor_name_cannot_be_trusted_by_name() -> None:
    with pytest.raises(ConfigurationError, match="capability"):
        Runtime(trusted_middleware=["supervisor"])
    with pytest.raises(ConfigurationError, match="capability"):
        Runtime(trusted_middleware=(name for name in ["audit", "supervisor"]))


def test_trusted_middleware_may_be_a_generator() -> None:
    # the check for "supervisor" consumed it: no name was trusted
    rt = Runtime(trusted_middleware=(name for name in ["audit"]))
    assert rt.router.trusted_middleware == frozenset({"audit"})


# --------------------------------------------------------------------------- judge


async def test_a_failed_verdict_steers_with_its_reason_inside_the_template() -> None:
    judge = ScriptedModel([verdict(False, "stop searching and answer")] + [verdict(True, "ok")] * 5)
    spec = SupervisorSpec(model=judge, criteria="Answer within two searches.", on_violation="steer")
    model = ScriptedModel([tool_call("search")] * 3 + [reply("done")])
    recorder = EventRecorder()
    async with Runtime(supervisor=spec, sinks=[recorder]) as rt:
        result = await (await rt.start(Agent("a", model, tools=[search]), "go")).result()
    assert result.status is RunStatus.COMPLETED
    text = (
        "Supervisor guidance: stop searching and answer\n"
        "This guidance changes neither your tools, nor the outcome you must deliver, "
        "nor your task."
    )
    carrying = [r for r in model.requests if any(text in m.content for m in r.messages)]
    assert carrying, [str(r.messages) for r in model.requests]
    sent = [
        e.correlation_id
        for e in recorder.steering()
        if e.type == "steering.requested" and e.actor.type == "middleware"
    ]
    assert actions(recorder)[0] == {
        "action": "steer",
        "source": "llm",
        "reason": "stop searching and answer",
        "iteration": 1,
        "correlation_id": sent[0],
    }
    # the judge saw metadata only, with the verdict schema asked for
    first = judge.requests[0]
    assert first.response_format is not None
    assert "Answer within two searches." in first.messages[0].content
    assert '"tool_calls": {"search": 0}' in first.messages[1].content


# --------------------------------------------------------------------------- own commands


class _NoSupervisorPause(Middleware):
    """A run whose own policy refuses the supervisor's pauses."""

    name = "no-supervisor-pause"

    async def steering(self, cmd: SteeringCommand, ctx: Any, call_next: Any) -> Any:
        if cmd.kind is SteeringKind.PAUSE and "supervisor" in cmd.actor.describe():
            return Decision.reject(cmd, "not paused by the supervisor", "middleware:no-pause")
        return await call_next(cmd)


async def test_a_human_pause_after_a_refused_supervisor_pause_is_not_timed_out() -> None:
    # the supervisor remembered "a pause of ours is on its way" although the run refused
    # it; a human's later pause then counted as the supervisor's, and its dwell cap aborted
    # the run for a pause the supervisor never made
    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1}], pause_max_s=0.05)
    gate = Gate()
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(supervisor=spec, sinks=[recorder, waiter]) as rt:
        model = ScriptedModel([tool_call("hold"), reply("done")])
        agent = Agent("a", model, tools=[gate.tool()], middleware=[_NoSupervisorPause()])
        handle = await rt.start(agent, "go")
        await gate.entered.wait()
        assert [e.type for e in rt.steering_history(handle.run_id)][-1] == "steering.rejected"
        await handle.pause(reason="human review")
        gate.open()
        await waiter.event("run.paused", handle.run_id)
        await asyncio.sleep(0.3)  # past the dwell cap: a pause of the supervisor's would end
        assert handle.status is RunStatus.PAUSED
        await handle.resume()
        result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert not recorder.of_type("supervisor.escalated")


class _NoBudgetPause(Middleware):
    """A run whose own policy refuses the supervisor's pauses about its token budget."""

    name = "no-budget-pause"

    async def steering(self, cmd: SteeringCommand, ctx: Any, call_next: Any) -> Any:
        if cmd.kind is SteeringKind.PAUSE and "tokens used" in cmd.payload.get("reason", ""):
            return Decision.reject(cmd, "no budget pauses here", "middleware:no-budget-pause")
        return await call_next(cmd)


async def test_a_pause_of_ours_is_timed_out_when_a_later_one_of_ours_is_refused() -> None:
    # the supervisor followed one pause of its own per run: two rules paused on the same
    # response, the second pause (refused by the run's policy) took the place of the first
    # in its book, and its refusal cleared it; the first pause landed untracked, and the run
    # stayed paused for good, past the dwell cap that should have ended it
    spec = SupervisorSpec(
        rules=[{"when": "iteration_reached", "gte": 1}, {"when": "budget_fraction", "gt": 0.1}],
        pause_max_s=0.05,
    )
    recorder = EventRecorder()
    async with Runtime(supervisor=spec, sinks=[recorder]) as rt:
        model = ScriptedModel([used(tool_call("search"), 50), reply("done")])
        agent = Agent(
            "a",
            model,
            tools=[search],
            limits=RunLimits(max_tokens=100),
            middleware=[_NoBudgetPause()],
        )
        handle = await rt.start(agent, "go")
        result = await asyncio.wait_for(handle.result(), 60)  # a failsafe only
    assert result.status is RunStatus.ABORTED
    assert result.error == "paused longer than the supervisor's dwell cap of 0.05 s"
    refused = [e for e in recorder.steering() if e.type == "steering.rejected"]
    assert [e.reason for e in refused] == ["no budget pauses here"]


@pytest.mark.parametrize("action", ["abort", "steer", "pause"])
@pytest.mark.parametrize("reason", ["policy violated. " * 1200, "bad \ud800 run"])
async def test_a_judge_reason_too_long_or_not_utf8_still_acts(action: str, reason: str) -> None:
    # the reason went into the command as written, 20 KB past the payload limit, and the
    # command was rejected (an abort also stopped all later supervision); a verdict whose
    # reason is not UTF-8 is no verdict: a judge error, which on_judge_error acts on
    failed = f'{{"passed": false, "reason": {json.dumps(reason)}}}'
    on_error = "ignore" if action == "steer" else action
    spec = SupervisorSpec(
        model=FunctionModel(lambda r: failed), on_violation=action, on_judge_error=on_error
    )
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(supervisor=spec, sinks=[recorder, waiter]) as rt:
        model = ScriptedModel([tool_call("search"), tool_call("search"), reply("done")])
        handle = await rt.start(Agent("a", model, tools=[search]), "go")
        if action == "pause":
            await waiter.event("run.paused", handle.run_id)
            assert handle.status is RunStatus.PAUSED
            await handle.cancel()
        result = await handle.result()
    refused = [e for e in recorder.steering() if e.type in ("steering.rejected", "steering.failed")]
    assert refused == []
    if action == "abort":
        assert result.status is RunStatus.ABORTED
    if reason.isascii() or action != "steer":
        sent = actions(recorder)[0]["reason"]
        assert len(sent) <= 2_000 and sent.encode("utf-8")


async def test_the_verdict_event_carries_the_judges_reason_cut_as_the_commands_do() -> None:
    # the supervisor.judge_verdict event carried a judge's reason whole: a megabyte in the
    # event log of the run for every verdict
    failed = verdict(False, "policy violated. " * 1200)
    spec = SupervisorSpec(model=FunctionModel(lambda r: failed), on_violation="steer")
    recorder = EventRecorder()
    async with Runtime(supervisor=spec, sinks=[recorder]) as rt:
        model = ScriptedModel([tool_call("search"), reply("done")])
        await (await rt.start(Agent("a", model, tools=[search]), "go")).result()
    [event] = recorder.of_type("supervisor.judge_verdict")
    assert isinstance(event, SupervisorEvent)
    assert event.data["reason"] == actions(recorder)[0]["reason"]
    assert len(event.data["reason"]) == 2_000 and event.data["reason"].endswith("…")


async def test_a_judge_that_cannot_be_made_is_a_judge_error_not_a_stuck_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # making the judge raised inside rt.start after the run was registered: the run stayed
    # in the registry as running, with nothing driving it, and its result never came
    from tinyagents.supervisor import Supervisor

    def broken(self: Any, spec: Any) -> Any:
        raise ConfigurationError("no such model")

    monkeypatch.setattr(Supervisor, "_judge_for", broken)
    spec = SupervisorSpec(model="openai/judge", criteria="x")
    recorder = EventRecorder()
    async with Runtime(supervisor=spec, sinks=[recorder]) as rt:
        handle = await rt.start(Agent("a", ScriptedModel([reply("done")])), "go")
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status is RunStatus.COMPLETED  # fail-open: on_judge_error is "ignore"
    assert [e.data["error"] for e in recorder.of_type("supervisor.judge_error")] == [
        "ConfigurationError"
    ]


async def test_a_run_given_another_turn_is_supervised_again() -> None:
    # the watch ended when the run completed; an END_OF_TURN message reopened it, and its
    # second turn ran unsupervised (a "count: 1, then: abort" rule never fired)

    spec = SupervisorSpec(
        rules=[{"when": "tool_repeated", "tool": "search", "count": 1, "then": "abort"}]
    )
    model = ScriptedModel(
        [reply("first answer"), tool_call("search"), tool_call("search"), reply("second")]
    )
    waiter = EventWaiter()
    async with Runtime(supervisor=spec, sinks=[waiter]) as rt:
        handle = await rt.start(Agent("a", model, tools=[search]), "go")
        assert (await handle.result()).status is RunStatus.COMPLETED
        await handle.steer("now look it up", delivery=SteeringDelivery.END_OF_TURN)
        await waiter.event("run.resumed", handle.run_id)  # the late command reopened it
        result = await handle.result()
    assert result.status is RunStatus.ABORTED
    assert CALLS == ["search"]  # aborted after the first call, as in a first turn


async def test_a_pause_of_ours_landing_on_a_humans_pause_is_not_timed_out() -> None:
    # a human paused the run; the judge's failed verdict paused it too, on top (a pause of a
    # paused run changes nothing); the supervisor started its dwell cap all the same and
    # aborted the run under the human, whose pause "is never timed out"
    verdict_gate = asyncio.Event()

    async def judge(request: ModelRequest) -> str:
        await verdict_gate.wait()
        return verdict(False, "off track")

    spec = SupervisorSpec(model=FunctionModel(judge), on_violation="pause", pause_max_s=0.05)
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(supervisor=spec, sinks=[recorder, waiter]) as rt:
        handle: Any = None

        async def agent_model(request: ModelRequest) -> ModelResponse:
            if len(request.messages) == 1:
                await handle.pause(reason="human review")  # lands right after this answer
                return tool_call("search")
            return reply("done")

        handle = await rt.start(Agent("a", FunctionModel(agent_model), tools=[search]), "go")
        await waiter.event("run.paused", handle.run_id)
        verdict_gate.set()
        ours = await waiter.event("supervisor.action", handle.run_id)
        await asyncio.sleep(0.3)  # past the dwell cap: a pause of the supervisor's would end
        assert handle.status is RunStatus.PAUSED
        pauses = [
            e
            for e in recorder.steering()
            if e.type == "steering.applied" and e.kind is SteeringKind.PAUSE
        ]
        # the human's paused the run, the supervisor's found it paused already
        assert [e.affected["paused"] for e in pauses] == [True, False]
        assert [e.actor.type for e in pauses] == ["human", "middleware"]
        await handle.resume()
        result = await handle.result()
    assert ours.data["action"] == "pause"
    assert result.status is RunStatus.COMPLETED
    assert not recorder.of_type("supervisor.escalated")


async def test_a_humans_resume_overtaken_by_a_pause_of_ours_leaves_it_timed_out() -> None:
    # a human paused the run; the judge's failed verdict paused it too (on the paused run: it
    # started nothing, the human's pause held it); the human's resume, sent before that pause
    # and landing with it, was superseded by it. The run stayed paused by the supervisor's
    # pause alone, and nothing timed it out: paused for good, past pause_max_s
    verdict_gate = asyncio.Event()
    sent: list[str] = []
    handle: Any = None

    async def judge(request: ModelRequest) -> str:
        await verdict_gate.wait()
        sent.append((await handle.resume()).correlation_id)  # lands with the verdict's pause
        return verdict(False, "off track")

    spec = SupervisorSpec(model=FunctionModel(judge), on_violation="pause", pause_max_s=0.05)
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(supervisor=spec, sinks=[recorder, waiter]) as rt:

        async def agent_model(request: ModelRequest) -> ModelResponse:
            if len(request.messages) == 1:
                await handle.pause(reason="human review")  # lands right after this answer
                return tool_call("search")
            return reply("done")

        handle = await rt.start(Agent("a", FunctionModel(agent_model), tools=[search]), "go")
        await waiter.event("run.paused", handle.run_id)
        verdict_gate.set()
        await waiter.event("supervisor.action", handle.run_id)
        await waiter.event("steering.superseded", handle.run_id, correlation_id=sent[0])
        assert handle.status is RunStatus.PAUSED  # by the supervisor's pause alone now
        async with asyncio.timeout(60):  # a guard: the cap is 0.05 s
            result = await handle.result()
    assert result.status is RunStatus.ABORTED
    assert result.error == "paused longer than the supervisor's dwell cap of 0.05 s"


async def test_a_human_pausing_a_run_the_supervisor_paused_takes_it_over() -> None:
    # the supervisor paused the run and its dwell cap began; a human then paused it too (an
    # operator looking at it): the cap went on and aborted the run the human was holding
    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1}], pause_max_s=0.2)
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(supervisor=spec, sinks=[recorder, waiter]) as rt:
        model = ScriptedModel([tool_call("search"), reply("done")])
        handle = await rt.start(Agent("a", model, tools=[search]), "go")
        await waiter.event("run.paused", handle.run_id)
        receipt = await handle.pause(reason="operator looks into it")
        await waiter.event("steering.applied", handle.run_id, correlation_id=receipt.correlation_id)
        await asyncio.sleep(0.5)  # past the dwell cap the supervisor's pause started
        assert handle.status is RunStatus.PAUSED
        await handle.resume()
        result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert not recorder.of_type("supervisor.escalated")


def _held_from_above(run_id: str) -> Any:
    """Whether an event is the applied pause a paused run above passed down to ``run_id``."""
    return lambda e: (
        e.type == "steering.applied"
        and e.run_id == run_id
        and e.kind is SteeringKind.PAUSE
        and e.actor.type == "parent_agent"
    )


async def test_a_pause_passed_down_from_a_paused_parent_leaves_the_childs_cap_running() -> None:
    # The supervisor paused a child and its dwell cap began; a human then paused the child's
    # parent, whose hold passed a pause down to the child. The supervisor read that pause as
    # someone else's pause of the child and stopped the cap: the child stayed paused by the
    # supervisor's pause for good, past the cap (and after the parent's resume). The hold of
    # a run above is no pause of the child's own: the cap goes on.
    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1}], pause_max_s=1.0)
    parent_gate = Gate("wait")
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(sinks=[recorder, waiter]) as rt:
        parent_model = ScriptedModel([tool_call("wait"), reply("done")])
        parent = await rt.start(Agent("p", parent_model, tools=[parent_gate.tool()]), "go")
        await parent_gate.entered.wait()
        child_model = ScriptedModel([tool_call("search"), reply("never")])
        child_agent = Agent("c", child_model, tools=[search], supervisor=spec)
        child = await rt.start(child_agent, "go", parent=parent)
        await waiter.event("run.paused", child.run_id)  # by the supervisor's pause
        await parent.pause(reason="a look at the parent")
        held = await waiter.until(_held_from_above(child.run_id))
        async with asyncio.timeout(60):  # a guard: the cap is 1 s
            result = await child.result()
        parent_gate.open()
        await waiter.event("run.paused", parent.run_id)  # the human's pause holds it
        await parent.resume()
        assert (await parent.result()).status is RunStatus.COMPLETED
    assert result.status is RunStatus.ABORTED
    assert result.error == "paused longer than the supervisor's dwell cap of 1 s"
    [escalated] = recorder.of_type("supervisor.escalated")
    assert recorder.events.index(held) < recorder.events.index(escalated)
    assert held.affected["from_above"] == parent.run_id


async def test_a_pause_of_ours_on_a_child_held_from_above_is_timed_out() -> None:
    # A child was paused only by the hold of its paused parent; the judge's failed verdict
    # then paused it too. The supervisor took the child for paused by someone else already
    # (its pause "changed nothing") and started no cap: once the parent was resumed, the
    # child stayed paused by the supervisor's pause alone, with nothing to time it out.
    verdict_gate = asyncio.Event()

    async def judge(request: ModelRequest) -> str:
        await verdict_gate.wait()
        return verdict(False, "off track")

    spec = SupervisorSpec(model=FunctionModel(judge), on_violation="pause", pause_max_s=0.05)
    parent_gate, child_gate = Gate("wait"), Gate("hold")
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(sinks=[recorder, waiter]) as rt:
        parent_model = ScriptedModel([tool_call("wait"), reply("done")])
        parent = await rt.start(Agent("p", parent_model, tools=[parent_gate.tool()]), "go")
        await parent_gate.entered.wait()
        child_model = ScriptedModel([tool_call("hold"), reply("never")])
        child_agent = Agent("c", child_model, tools=[child_gate.tool()], supervisor=spec)
        child = await rt.start(child_agent, "go", parent=parent)
        await child_gate.entered.wait()
        await parent.pause(reason="a look at the parent")
        child_gate.open()
        await waiter.until(_held_from_above(child.run_id))
        verdict_gate.set()
        ours = await waiter.until(
            lambda e: (
                e.type == "steering.applied"
                and e.run_id == child.run_id
                and e.actor.type == "middleware"
            )
        )
        async with asyncio.timeout(60):  # a guard: the cap is 0.05 s
            result = await child.result()
        parent_gate.open()
        await parent.resume()
        assert (await parent.result()).status is RunStatus.COMPLETED
    assert (ours.affected["paused"], ours.affected["paused_by"]) == (False, "above")
    assert result.status is RunStatus.ABORTED
    assert result.error == "paused longer than the supervisor's dwell cap of 0.05 s"


async def test_a_humans_older_resume_does_not_undo_the_supervisors_later_pause() -> None:
    # a human paused and resumed the run while its model was answering; the answer tripped a
    # rule, and the supervisor's pause (critical, so applied first at that boundary) paused
    # the run; the human's older pause and resume were applied after it, and the resume
    # undid the supervisor's pause: the run went on and completed, the violation unheeded
    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1}], pause_max_s=30)
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(supervisor=spec, sinks=[recorder, waiter]) as rt:
        handle: Any = None
        sent: list[str] = []

        async def agent_model(request: ModelRequest) -> ModelResponse:
            if len(request.messages) == 1:
                await handle.pause(reason="a look")  # both land right after this answer
                sent.append((await handle.resume()).correlation_id)
                return tool_call("search")
            return reply("done")

        handle = await rt.start(Agent("a", FunctionModel(agent_model), tools=[search]), "go")
        ours = await waiter.event("supervisor.action", handle.run_id)
        await waiter.until(
            lambda e: (
                e.type in ("steering.applied", "steering.superseded")
                and getattr(e, "correlation_id", None) == sent[0]
            )
        )
        assert handle.status is RunStatus.PAUSED
        ends = {
            (e.kind, e.actor.type): e.type
            for e in rt.steering_history(handle.run_id)
            if e.type in ("steering.applied", "steering.superseded")
        }
        assert ends == {
            (SteeringKind.PAUSE, "middleware"): "steering.applied",
            (SteeringKind.PAUSE, "human"): "steering.applied",  # a pause always pauses
            (SteeringKind.RESUME, "human"): "steering.superseded",
        }
        await handle.resume()  # a resume sent after it does resume the run
        result = await handle.result()
    assert ours.data["action"] == "pause"
    assert result.status is RunStatus.COMPLETED
    assert CALLS == ["search"]


async def test_a_run_restarted_under_the_supervisors_pause_is_still_timed_out(
    tmp_path: Path,
) -> None:
    # the supervisor paused a run and its process stopped; started again under its id, the
    # run came back paused (its pause restored from the log) but with no dwell cap: the
    # supervisor's pause held it for good, never escalated to the abort the spec promises
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1}], pause_max_s=30)
    gate = Gate()
    waiter = EventWaiter()
    async with Runtime(store, supervisor=spec, sinks=[waiter]) as rt:
        model = ScriptedModel([tool_call("hold"), reply("never")])
        await rt.start(Agent("a", model, tools=[gate.tool()]), "go", run_id="r-held")
        await waiter.event("steering.accepted", "r-held", kind=SteeringKind.PAUSE)  # logged
        gate.open()
        await waiter.event("run.paused", "r-held")
        # The process stops here, the supervisor's pause holding the run.

    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1}], pause_max_s=0.05)
    recorder = EventRecorder()
    async with Runtime(store, supervisor=spec, sinks=[recorder]) as rt:
        model = ScriptedModel([reply("never")])
        handle = await rt.start(Agent("a", model, tools=[gate.tool()]), "go", run_id="r-held")
        result = await asyncio.wait_for(handle.result(), 60)  # a failsafe only
    assert result.status is RunStatus.ABORTED
    assert result.error == "paused longer than the supervisor's dwell cap of 0.05 s"
    assert model.requests == []
    assert len(recorder.of_type("supervisor.escalated")) == 1


async def test_a_run_restarted_under_a_humans_pause_is_not_timed_out(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    gate = Gate()
    waiter = EventWaiter()
    async with Runtime(store, sinks=[waiter]) as rt:
        model = ScriptedModel([tool_call("hold"), reply("never")])
        handle = await rt.start(Agent("a", model, tools=[gate.tool()]), "go", run_id="r-human")
        await gate.entered.wait()
        await handle.pause(reason="human review")
        gate.open()
        await waiter.event("run.paused", "r-human")

    spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 5}], pause_max_s=0.05)
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(store, supervisor=spec, sinks=[recorder, waiter]) as rt:
        model = ScriptedModel([reply("done")])
        handle = await rt.start(Agent("a", model, tools=[gate.tool()]), "go", run_id="r-human")
        await waiter.event("run.paused", "r-human")
        await asyncio.sleep(0.3)  # past the dwell cap: a pause of the supervisor's would end
        assert handle.status is RunStatus.PAUSED
        await handle.resume()
        result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert not recorder.of_type("supervisor.escalated")


class _AbortToSteer(Middleware):
    """A run whose own policy narrows the supervisor's abort to an instruction."""

    name = "abort-to-steer"

    async def steering(self, cmd: SteeringCommand, ctx: Any, call_next: Any) -> Any:
        if cmd.kind is SteeringKind.CANCEL and "supervisor" in cmd.actor.describe():
            narrowed = SteeringCommand(
                target=cmd.target,
                actor=cmd.actor,
                kind=SteeringKind.ADD_INSTRUCTION,
                payload={"text": "wrap up instead"},
                priority=cmd.priority,
            )
            return await call_next(narrowed)
        return await call_next(cmd)


async def test_an_abort_a_policy_turned_into_something_else_leaves_the_run_supervised() -> None:
    # the supervisor took "our abort is on its way" for good: the transformed command (same
    # correlation id, another kind) was applied, never refused, so every later rule and
    # verdict of that run was dropped in silence although the run went on
    spec = SupervisorSpec(
        rules=[
            {"when": "iteration_reached", "gte": 1, "then": "abort"},
            {"when": "tool_repeated", "tool": "search", "count": 2, "then": "steer"},
        ],
        steer_message="answer now",
    )
    model = ScriptedModel([tool_call("search")] * 3 + [reply("done")])
    recorder = EventRecorder()
    async with Runtime(supervisor=spec, sinks=[recorder]) as rt:
        agent = Agent("a", model, tools=[search], middleware=[_AbortToSteer()])
        handle = await rt.start(agent, "go")
        result = await handle.result()
        history = rt.steering_history(handle.run_id)
    assert result.status is RunStatus.COMPLETED
    assert [(a["action"], a["source"]) for a in actions(recorder)] == [
        ("abort", "iteration_reached"),
        ("steer", "tool_repeated"),
    ]
    applied = [e.kind for e in history if e.type == "steering.applied"]
    assert applied == [SteeringKind.ADD_INSTRUCTION, SteeringKind.ADD_INSTRUCTION]
    assert any("answer now" in m.content for m in model.requests[-1].messages)


class _HoldForReview(Middleware):
    """A run whose own policy holds it for review instead of letting the supervisor abort it
    (``turn``: what the supervisor's first ``times`` aborts become), then lets aborts through."""

    name = "hold-for-review"

    def __init__(self, turn: str, times: int) -> None:
        self.turn, self.times = turn, times

    async def steering(self, cmd: SteeringCommand, ctx: Any, call_next: Any) -> Any:
        if cmd.kind is not SteeringKind.CANCEL or "supervisor" not in cmd.actor.describe():
            return await call_next(cmd)
        if self.times == 0:
            return await call_next(cmd)
        self.times -= 1
        if self.turn == "reject":
            return Decision.reject(cmd, "held for review", "middleware:hold-for-review")
        held = cmd.model_copy(update={"kind": SteeringKind.PAUSE, "payload": {"reason": "review"}})
        return await call_next(held)


@pytest.mark.parametrize(
    ("action", "turn", "times"),
    [
        ("abort", "pause", 2),  # the rule's abort, then the dwell cap's, become pauses
        ("pause", "reject", 1),  # the dwell cap's abort is refused
    ],
)
async def test_a_run_held_by_a_policy_instead_of_aborted_is_still_timed_out(
    action: str, turn: str, times: int
) -> None:
    # a policy that turned every abort of the supervisor into a pause held the run for good:
    # the dwell cap's own abort became a pause on a run already paused, which the
    # supervisor took for someone else's, and nothing timed the run out again; a refused
    # dwell-cap abort left it paused for good the same way
    spec = SupervisorSpec(
        rules=[{"when": "iteration_reached", "gte": 1, "then": action}], pause_max_s=0.01
    )
    recorder = EventRecorder()
    async with Runtime(supervisor=spec, sinks=[recorder]) as rt:
        model = ScriptedModel([tool_call("search"), reply("never")])
        agent = Agent("a", model, tools=[search], middleware=[_HoldForReview(turn, times)])
        handle = await rt.start(agent, "go")
        result = await asyncio.wait_for(handle.result(), 60)  # a failsafe only
    assert result.status is RunStatus.ABORTED
    assert result.error == "paused longer than the supervisor's dwell cap of 0.01 s"
    assert len(recorder.of_type("supervisor.escalated")) == 2
    assert CALLS == []  # held from its first response on: the tool never ran


async def test_each_action_event_names_the_correlation_id_of_the_command_it_sent() -> None:
    # an operator reading supervisor.action could not tell which steering.* events were its
    # command's: two actions of one kind on one run looked alike
    spec = SupervisorSpec(
        rules=[
            {"when": "iteration_reached", "gte": 1, "then": "steer"},
            {"when": "iteration_reached", "gte": 2, "then": "pause"},
            {"when": "tool_repeated", "tool": "search", "count": 2, "then": "abort"},
        ],
    )
    model = ScriptedModel([tool_call("search")] * 3 + [reply("never")])
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(supervisor=spec, sinks=[recorder, waiter]) as rt:
        handle = await rt.start(Agent("a", model, tools=[search]), "go")
        await waiter.event("run.paused", handle.run_id)
        await handle.resume()
        result = await handle.result()
        history = rt.steering_history(handle.run_id)
    assert result.status is RunStatus.ABORTED
    sent = [
        (e.kind, e.correlation_id)
        for e in history
        if e.type == "steering.requested" and e.actor.type == "middleware"
    ]
    kinds = {"steer": SteeringKind.ADD_INSTRUCTION, "pause": SteeringKind.PAUSE}
    named = [
        (kinds.get(a["action"], SteeringKind.CANCEL), a["correlation_id"])
        for a in actions(recorder)
    ]
    assert [a["action"] for a in actions(recorder)] == ["steer", "pause", "abort"]
    assert named == sent
