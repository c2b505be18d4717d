"""The LLM judge through litellm's real HTTP path when its provider fails: an HTTP error,
a page that is no JSON, an answer off the verdict's schema, no answer in time. Each is one
``supervisor.judge_error`` event, the supervisor goes on, and ``on_judge_error`` decides the
run: it goes on (ignore), is aborted (abort), or is paused and, left paused, aborted at the
dwell cap (pause): never paused and forgotten."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

import asyncio
from typing import Any

import pytest

from tinyagents import Agent, RunStatus, Runtime, SupervisorSpec, tool
from tinyagents.events import SupervisorEvent
from tinyagents.testkit import (
    ErrorReply,
    EventRecorder,
    EventWaiter,
    Fault,
    OpenAICompatServer,
    ScriptedModel,
    reply,
    tool_call,
)

FAULTS: dict[str, tuple[Any, str]] = {
    "http-503": (ErrorReply(status=503, message="overloaded"), "ModelServerError"),
    "html-page": (Fault(body="<html>Bad Gateway</html>"), "ModelResponseNotJSON"),
    "off-schema": ('{"verdict": "fine", "score": 0.9}', "JudgeError"),
    "no-answer-in-time": (Fault(delay_s=60, then='{"passed": true}'), "TimeoutError"),
}


def judged_agent(waiter: EventWaiter) -> Agent:
    """An agent whose one tool returns once the judge said something (so the run is still
    going when the judge's error is acted on)."""

    @tool
    async def work() -> str:
        """Do some work."""
        await waiter.until(lambda e: e.type.startswith("supervisor.judge_"))
        return "worked"

    return Agent("a", ScriptedModel([tool_call("work"), reply("done")]), tools=[work])


def spec_for(server: OpenAICompatServer, on_judge_error: str) -> SupervisorSpec:
    return SupervisorSpec(
        model="openai/judge",
        api_base=server.base_url,
        api_key_env="JUDGE_KEY",
        on_judge_error=on_judge_error,  # type: ignore[arg-type]
        judge_timeout_s=1,
        pause_max_s=0.2,
    )


def supervisor_events(recorder: EventRecorder) -> list[tuple[str, dict[str, Any]]]:
    return [
        (e.type, e.data)
        for e in recorder.events
        if isinstance(e, SupervisorEvent) and e.type != "supervisor.started"
    ]


async def judged_run(
    fault: Any, on_judge_error: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, EventRecorder, OpenAICompatServer]:
    monkeypatch.setenv("JUDGE_KEY", "sk-judge")
    waiter, recorder = EventWaiter(), EventRecorder()
    async with OpenAICompatServer([fault] * 3) as server:
        spec = spec_for(server, on_judge_error)
        async with Runtime(supervisor=spec, sinks=[waiter, recorder]) as rt:
            handle = await rt.start(judged_agent(waiter), "go")
            async with asyncio.timeout(60):  # a hang guard, not a measurement
                result = await handle.result()
                if on_judge_error != "abort" and isinstance(fault, Fault) and fault.delay_s:
                    await server.wait_for_disconnects(1)
    return result, recorder, server


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_a_failing_judge_fails_open_with_one_event_by_default(
    fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, error = FAULTS[fault]
    result, recorder, server = await judged_run(script, "ignore", monkeypatch)
    assert result.status is RunStatus.COMPLETED and result.output == "done"
    [(kind, data)] = [e for e in supervisor_events(recorder) if e[0] != "supervisor.finished"]
    assert kind == "supervisor.judge_error" and data["error"] == error
    assert data["iteration"] == 1
    if fault == "no-answer-in-time":
        assert server.disconnected == [1]  # the judge's request was closed, not left open


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_a_judge_failing_closed_pauses_and_the_dwell_cap_aborts(
    fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, error = FAULTS[fault]
    result, recorder, _ = await judged_run(script, "pause", monkeypatch)
    assert result.status is RunStatus.ABORTED
    assert result.error == "paused longer than the supervisor's dwell cap of 0.2 s"
    said = [
        (kind, data.get("action"), data.get("source"), data.get("reason"))
        for kind, data in supervisor_events(recorder)
        if kind != "supervisor.finished"
    ]
    why = f"judge unavailable ({error})"
    cap = "paused longer than the supervisor's dwell cap of 0.2 s"
    assert said == [
        ("supervisor.judge_error", None, None, None),
        ("supervisor.action", "pause", "judge_error", why),
        ("supervisor.escalated", None, None, cap),
        ("supervisor.action", "abort", "pause_max_s", cap),
    ]
    assert [e.type for e in recorder.events if e.run_id == result.run_id].count("run.paused") == 1


async def test_a_judge_failing_closed_with_abort_aborts_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result, recorder, _ = await judged_run(FAULTS["http-503"][0], "abort", monkeypatch)
    assert result.status is RunStatus.ABORTED
    assert result.error == "judge unavailable (ModelServerError)"
    [(_, data)] = [e for e in supervisor_events(recorder) if e[0] == "supervisor.action"]
    assert (data["action"], data["source"]) == ("abort", "judge_error")


async def test_a_judges_request_in_flight_is_closed_when_its_run_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-judge")
    slow = Fault(delay_s=60, then='{"passed": true, "reason": "fine"}')
    async with OpenAICompatServer([slow]) as server:
        spec = SupervisorSpec(
            model="openai/judge",
            api_base=server.base_url,
            api_key_env="JUDGE_KEY",
            judge_timeout_s=120,
        )

        @tool
        async def work() -> str:
            """Work until the judge was asked."""
            await server.wait_for_requests(1)
            return "worked"

        model = ScriptedModel([tool_call("work"), tool_call("work"), reply("done")])
        async with Runtime(supervisor=spec, testing=True) as rt:
            handle = await rt.start(Agent("a", model, tools=[work]), "go")
            await server.wait_for_requests(1)
            await handle.cancel(immediate=True)
            async with asyncio.timeout(60):  # a hang guard, not a measurement
                result = await handle.result()
                await server.wait_for_disconnects(1)
    assert result.status is RunStatus.CANCELLED
    assert server.disconnected == [1]
