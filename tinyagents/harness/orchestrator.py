"""Tools with which a parent model runs several children at once and steers them.

    orchestrator = Agent("orchestrator", model, tools=orchestrator_tools([research, critic]))

The steering these tools send carries the actor ``parent_agent(parent_run_id, agent_id)``, so
the authority policy lets a parent steer only its own descendants.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from tinyagents.errors import ConfigurationError, ToolError
from tinyagents.harness.agent import Agent
from tinyagents.harness.context import RunContext
from tinyagents.harness.subagent import SubAgent, as_subagent, start_child
from tinyagents.harness.tools import InvalidArguments, Tool, refuse_unknown_arguments
from tinyagents.protocol.commands import (
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)


class _OrchestratorTool(Tool):
    def __init__(
        self,
        toolkit: OrchestratorToolkit,
        *,
        name: str,
        description: str,
        properties: dict[str, Any],
        required: list[str],
    ) -> None:
        self.toolkit = toolkit
        super().__init__(
            name=name,
            description=description,
            parameters={
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        )

    def text(self, args: dict[str, Any], key: str) -> str:
        """A required string argument; anything else is refused before the tool does a thing
        (a child started on "" or "None" works, and spends, on no task)."""
        value = args.get(key)
        if not isinstance(value, str) or not value.strip():
            raise InvalidArguments(f"tool {self.name!r} needs a non-empty string {key!r}")
        return value


class OrchestratorToolkit:
    """Holds the sub-agents a parent may spawn; ``tools()`` returns the four tools."""

    def __init__(self, children: Sequence[SubAgent | Agent]) -> None:
        subagents = [as_subagent(c, taker="orchestrator_tools") for c in children]
        if not subagents:
            raise ConfigurationError(
                "orchestrator_tools needs at least one sub-agent to spawn (spawn_subagent "
                "would offer an empty list of names, a schema providers refuse)"
            )
        self.subagents: dict[str, SubAgent] = {}
        for sub in subagents:
            if sub.name in self.subagents:
                raise ConfigurationError(
                    f"orchestrator_tools got two sub-agents named {sub.name!r}; the model picks "
                    "one by name: give one another with SubAgent(agent, name=...)"
                )
            self.subagents[sub.name] = sub

    def tools(self) -> list[Tool]:
        names = sorted(self.subagents)
        return [
            SpawnTool(self, names),
            SteerTool(self),
            WaitTool(self),
            CancelTool(self),
        ]

    @staticmethod
    def context(ctx: Any, tool: str) -> RunContext:
        if not isinstance(ctx, RunContext):
            raise ToolError(f"{tool} must be called from an agent run")
        return ctx

    async def send(
        self, ctx: RunContext, run_id: str, kind: SteeringKind, payload: dict[str, Any]
    ) -> str:
        child = ctx.runtime.runs.get(run_id)
        mine = ctx.runtime.runs.tree.is_descendant(run_id, of=ctx.run_id)
        if child is not None and mine and child.status.finished:
            # accepted, the command would fail later where the model cannot see it, and the
            # model would wait for a child that never reads it (another run's end is not
            # told: its commands are refused by the authority policy, as ever)
            raise ToolError(
                f"run {run_id} has already ended ({child.status.value}): nothing was sent; "
                "spawn a new sub-agent for more work"
            )
        receipt = await ctx.runtime.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run(run_id),
                actor=SteeringActor.parent_agent(ctx.run_id, ctx.agent.name),
                kind=kind,
                payload=payload,
            )
        )
        if receipt.status == ReceiptStatus.REJECTED:
            raise ToolError(f"{kind.value} for run {run_id} was rejected: {receipt.reason}")
        return f"{kind.value} {receipt.status.value} for run {run_id} ({receipt.correlation_id})"


class SpawnTool(_OrchestratorTool):
    def __init__(self, toolkit: OrchestratorToolkit, names: list[str]) -> None:
        catalogue = "; ".join(f"{n}: {toolkit.subagents[n].description}" for n in names)
        super().__init__(
            toolkit,
            name="spawn_subagent",
            description=f"Start a sub-agent in the background and return its run id. Available: {catalogue}",
            properties={"name": {"type": "string", "enum": names}, "input": {"type": "string"}},
            required=["name", "input"],
        )

    async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
        ctx = self.toolkit.context(ctx, self.name)
        refuse_unknown_arguments(self, args)
        name = args.get("name")
        sub = self.toolkit.subagents.get(name) if isinstance(name, str) else None
        if sub is None:
            raise InvalidArguments(
                f"no sub-agent {name!r}; available: {sorted(self.toolkit.subagents)}"
            )
        task = self.text(args, "input")
        handle = await start_child(sub, task, ctx)
        return {"run_id": handle.run_id, "name": sub.name}


class SteerTool(_OrchestratorTool):
    def __init__(self, toolkit: OrchestratorToolkit) -> None:
        super().__init__(
            toolkit,
            name="steer_subagent",
            description="Send an instruction to a running sub-agent; it sees it at its next safe boundary.",
            properties={"run_id": {"type": "string"}, "text": {"type": "string"}},
            required=["run_id", "text"],
        )

    async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
        ctx = self.toolkit.context(ctx, self.name)
        refuse_unknown_arguments(self, args)
        run_id, text = self.text(args, "run_id"), self.text(args, "text")
        return await self.toolkit.send(ctx, run_id, SteeringKind.ADD_INSTRUCTION, {"text": text})


class WaitTool(_OrchestratorTool):
    def __init__(self, toolkit: OrchestratorToolkit) -> None:
        super().__init__(
            toolkit,
            name="wait_subagents",
            description="Wait until the given sub-agent runs end; returns each one's status and output.",
            properties={"run_ids": {"type": "array", "items": {"type": "string"}}},
            required=["run_ids"],
        )

    async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
        ctx = self.toolkit.context(ctx, self.name)
        refuse_unknown_arguments(self, args)
        run_ids = args.get("run_ids")
        if not isinstance(run_ids, list) or not all(isinstance(r, str) for r in run_ids):
            raise InvalidArguments(f"tool {self.name!r} needs 'run_ids': a list of run id strings")
        handles = []
        for run_id in run_ids:
            handle = ctx.runtime.runs.get(run_id)
            if handle is None or not ctx.runtime.runs.tree.is_descendant(run_id, of=ctx.run_id):
                raise ToolError(f"run {run_id} is not a sub-agent of this run")
            handles.append(handle)
        results = await asyncio.gather(*(h.result() for h in handles))
        return [
            {"run_id": r.run_id, "status": r.status.value, "output": r.output, "error": r.error}
            for r in results
        ]


class CancelTool(_OrchestratorTool):
    def __init__(self, toolkit: OrchestratorToolkit) -> None:
        super().__init__(
            toolkit,
            name="cancel_subagent",
            description="Cancel a running sub-agent (and its own children).",
            properties={"run_id": {"type": "string"}, "reason": {"type": "string"}},
            required=["run_id"],
        )

    async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
        ctx = self.toolkit.context(ctx, self.name)
        refuse_unknown_arguments(self, args)
        run_id, reason = self.text(args, "run_id"), args.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise InvalidArguments(f"tool {self.name!r} takes an optional string 'reason'")
        payload = {"reason": reason} if reason else {}
        return await self.toolkit.send(ctx, run_id, SteeringKind.CANCEL, payload)


def orchestrator_tools(subagents: Sequence[SubAgent | Agent]) -> list[Tool]:
    """``spawn_subagent``, ``steer_subagent``, ``wait_subagents``, ``cancel_subagent``. An
    ``Agent`` is taken as ``SubAgent(agent)``."""
    return OrchestratorToolkit(subagents).tools()
