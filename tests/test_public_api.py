"""The names DESIGN.md promises are importable, and importing the package stays light."""

from __future__ import annotations

import subprocess
import sys

import tinyagents

CONTRACT = [
    "Runtime", "Agent", "tool", "RunLimits", "RunHandle", "RunResult", "RunStatus", "RunInfo",
    "SteeringCommand", "SteeringTarget", "SteeringActor", "SteeringKind", "SteeringPriority",
    "SteeringDelivery", "SteeringPolicyRef", "SteeringReceipt",
    "SubAgent", "SubAgentTool", "SubAgentSession", "LiteLLMModel",
]  # fmt: skip


def test_every_name_in_all_imports() -> None:
    for name in tinyagents.__all__:
        assert getattr(tinyagents, name) is not None, name


def test_contract_names_are_exported() -> None:
    missing = [n for n in CONTRACT if n not in tinyagents.__all__]
    assert missing == []


def test_testkit_contract() -> None:
    from tinyagents.testkit import (
        EventRecorder,
        FakeClock,
        FunctionModel,
        ScriptedModel,
        reply,
        tool_call,
    )

    assert all([EventRecorder, FakeClock, FunctionModel, ScriptedModel, reply, tool_call])


def test_errors_contract() -> None:
    from tinyagents.errors import RunCancelled, RunLimitExceeded, ThreadBusy, TinyAgentsError

    assert issubclass(RunLimitExceeded, TinyAgentsError)
    assert issubclass(RunCancelled, TinyAgentsError)
    assert issubclass(ThreadBusy, TinyAgentsError)


def test_import_is_light() -> None:
    code = (
        "import sys, tinyagents; "
        "heavy = [m for m in ('litellm', 'fastapi', 'redis', 'asyncpg', 'langgraph', 'aiohttp') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
