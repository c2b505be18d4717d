"""``RunContext``: what tools and middleware of a run can reach (a tool receives it as ``ctx``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tinyagents.runs.info import RunInfo

if TYPE_CHECKING:
    from tinyagents.harness.agent import Agent
    from tinyagents.harness.loop import AgentRun
    from tinyagents.runs.handle import RunHandle
    from tinyagents.runs.host import RunHost


@dataclass(slots=True, kw_only=True)
class RunContext:
    runtime: RunHost
    handle: RunHandle
    agent: Agent
    run: AgentRun

    @property
    def info(self) -> RunInfo:
        return self.handle.info

    @property
    def run_id(self) -> str:
        return self.handle.run_id
