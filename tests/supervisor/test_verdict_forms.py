"""Which judge answers are a verdict. An answer that could be read two ways is no verdict (a
``JudgeError``, which ``on_judge_error`` handles), never a pass or a failure picked for it: a
failure aborts or pauses a run, a pass lets a violation go on."""

from __future__ import annotations

import pytest

from tinyagents import Agent, RunStatus, Runtime, SupervisorSpec, tool
from tinyagents.harness import ModelResponse, ToolCall
from tinyagents.supervisor.judge import Judge, JudgeError, JudgeInput, parse_verdict
from tinyagents.testkit import EventWaiter, ScriptedModel, reply, tool_call


def _metadata() -> JudgeInput:
    return JudgeInput(
        iteration=1, tokens_used=10, token_budget=None, tool_calls={}, undeclared_tool_calls=0
    )


@pytest.mark.parametrize(
    "answer",
    [
        # not a JSON boolean: pydantic's lax mode read each of these as one
        '{"passed": "false", "reason": "x"}',
        '{"passed": "n", "reason": "x"}',
        '{"passed": "NO", "reason": "x"}',
        '{"passed": "on", "reason": "x"}',
        '{"passed": 0, "reason": "x"}',
        '{"passed": 1.0, "reason": "x"}',
        # "passed" twice: JSON keeps the last, so the answer said both
        '{"passed": false, "passed": true, "reason": "x"}',
        '{"passed": true, "reason": "fine", "reason": "loops"}',
        # "passed" in another case beside it: which one is the verdict?
        '{"passed": true, "Passed": false, "reason": "x"}',
        '{"PASSED": false, "reason": "x"}',
        '{"passed": false, "Reason": "x"}',
        # a verdict that is no verdict after an example that is one: the example was taken
        'A pass reads {"passed": true, "reason": "ok"}. Mine: {"passed": "no", "reason": "x"}',
        'A pass reads {"passed": true, "reason": "ok"}. Mine: {"passed": false, "passed": true}',
        # an object inside another is no verdict of its own
        '{"verdict": {"passed": false, "reason": "wrapped"}}',
        "I would not abort",
    ],
)
async def test_an_ambiguous_answer_is_a_judge_error_not_a_verdict(answer: str) -> None:
    assert parse_verdict(ModelResponse(text=answer)) is None
    with pytest.raises(JudgeError, match="did not answer a verdict"):
        await Judge(ScriptedModel([answer]), criteria="", timeout_s=60).verdict(_metadata())


def test_an_object_inside_the_verdict_never_overrules_it() -> None:
    # read from the last "{" back, the failing object inside a passing verdict was taken as
    # the verdict: the run was aborted by a detail of a pass
    answer = (
        'Verdict: {"passed": true, "reason": "on topic", "checks": '
        '{"passed": false, "reason": "one slow call"}}'
    )
    verdict = parse_verdict(ModelResponse(text=answer))
    assert verdict is not None
    assert (verdict.passed, verdict.reason) == (True, "on topic")


@pytest.mark.parametrize(
    "answer",
    [
        '{"passed": false, "reason": "loops"}',
        '{"passed": false, "reason": "loops", "confidence": 0.9}',  # other keys are ignored
        'Example: {"passed": true, "reason": "ok"}. Mine: {"passed": false, "reason": "loops"}',
    ],
)
def test_the_accepted_forms_are_still_verdicts(answer: str) -> None:
    verdict = parse_verdict(ModelResponse(text=answer))
    assert verdict is not None
    assert (verdict.passed, verdict.reason) == (False, "loops")


def test_a_tool_call_verdict_is_held_to_the_same_forms() -> None:
    def called(args: dict[str, object]) -> ModelResponse:
        return ModelResponse(text="", tool_calls=[ToolCall(id="c1", name="verdict", args=args)])

    assert parse_verdict(called({"passed": "false", "reason": "x"})) is None
    assert parse_verdict(called({"passed": True, "Passed": False})) is None
    verdict = parse_verdict(called({"passed": False, "reason": "x"}))
    assert verdict is not None and verdict.passed is False


async def test_a_run_is_not_aborted_on_an_ambiguous_answer() -> None:
    waiter = EventWaiter()

    @tool
    async def work() -> str:
        """Work."""
        await waiter.until(lambda e: e.type.startswith("supervisor.judge_"))
        return "ok"

    judge = ScriptedModel(['{"passed": "no", "reason": "maybe"}'])
    spec = SupervisorSpec(model=judge, on_violation="abort")
    async with Runtime(supervisor=spec, sinks=[waiter]) as rt:
        model = ScriptedModel([tool_call("work"), reply("done")])
        result = await (await rt.start(Agent("a", model, tools=[work]), "go")).result()
        # the judge error is said; the default on_judge_error goes on (fail-open)
        assert rt.supervisor.judge_failures == 1
    assert result.status is RunStatus.COMPLETED
