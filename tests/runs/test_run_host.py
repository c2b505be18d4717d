"""The execution layer needs of a runtime only what ``RunHost`` lists: a host made of the
control layer's parts and nothing else runs an agent and steers it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_host import FakeHost

from tinyagents.harness import Agent, SubAgent
from tinyagents.runs import RunHost, RunStatus
from tinyagents.runtime import Runtime
from tinyagents.testkit import ScriptedModel, reply, tool_call


def test_runtime_and_a_fake_host_are_run_hosts() -> None:
    assert isinstance(Runtime(), RunHost)
    assert isinstance(FakeHost(), RunHost)
    assert not isinstance(object(), RunHost)


async def test_a_host_with_only_the_protocol_runs_and_steers_an_agent() -> None:
    host = FakeHost()
    model = ScriptedModel([tool_call("lookup", q="billing"), reply("done")])

    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    agent = Agent("worker", model=model, tools=[lookup])
    handle = await SubAgent(agent, description="works").start("task", runtime=host)
    receipt = await handle.steer("focus on billing")
    result = await handle.result()
    assert receipt.accepted and result.status is RunStatus.COMPLETED
    assert result.output == "done"
    assert "focus on billing" in str(model.requests[0].messages)
    assert [e.type for e in host.router.history(handle.run_id)][-1] == "steering.applied"
    # Agent.run takes the host too.
    again = Agent("again", model=ScriptedModel([reply("ok")]))
    assert (await again.run("task", runtime=host)).output == "ok"


SNIPPET = """
from tinyagents.runs.host import RunHost
from tinyagents.runtime import Runtime

host: RunHost = Runtime()
not_a_host: RunHost = object()
"""


def test_runtime_satisfies_run_host_for_the_type_checker(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    source = tmp_path / "snippet.py"
    source.write_text(SNIPPET)
    out, err, status = api.run([str(source), "--no-error-summary", "--follow-imports=silent"])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, out + err
    assert len(errors) == 1 and "snippet.py:6:" in errors[0], out
