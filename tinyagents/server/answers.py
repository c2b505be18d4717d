"""The shapes of the operator API's reads, as its OpenAPI document declares them.

The reads answer the dicts the runtime and the store keep (``RunInfo.snapshot``,
``LiveRuns.snapshot``, ``command_history``, the trace's frames); these models describe them
for a client made from the document (a generated client, a validating proxy), and are never
used to rebuild an answer: each allows more properties than it names (a newer server may add
some), and only a run's ids and status are always there (a listed run whose stored snapshot
is damaged has no more; see ``tinyagents.store.base.damaged_run``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class PendingCommand(_Open):
    """A command the run accepted and has not yet applied."""

    correlation_id: str
    kind: str
    state: str = Field(description="its CommandState (accepted, deferred, delivered...)")
    actor: str | None = None
    delivery: str | None = None


class PendingInterrupt(_Open):
    """A question the run waits on; answer it with approve / reject / provide_context, whose
    ``payload.interrupt_id`` is this ``id``, sent to its task."""

    id: str
    task_id: str | None = None
    node: str | None = None
    value: Any = Field(default=None, description="what interrupt() asked, as JSON")
    response_schema: dict[str, Any] | None = Field(
        default=None, description="the JSON Schema the answer must meet, when it was given one"
    )


class DamagedSnapshot(_Open):
    """Why a listed run shows only its row's ids: its stored snapshot does not read."""

    type: str = Field(description="damaged_snapshot")
    message: str


class RunSnapshot(_Open):
    """A run as the API shows it: its place in its tree, what it may use and has used, and
    what it waits on."""

    run_id: str
    root_run_id: str
    tenant_id: str
    status: str = Field(
        description="a RunStatus: running, paused, interrupted, completed, failed, "
        "cancelled, aborted, limit_exceeded... (a damaged row: its column as stored)"
    )
    parent_run_id: str | None = None
    thread_id: str | None = None
    agent_id: str | None = None
    task_id: str | None = None
    node_id: str | None = None
    depth: int | None = None
    kind: str | None = Field(default=None, description="agent or graph")
    tools: list[str] | None = Field(default=None, description="the tools it may call (None: any)")
    models: list[str] | None = None
    accepts: list[str] | None = Field(
        default=None,
        description="the steering kinds a command to it can be applied with (absent or null: "
        "every kind); a graph task's entry of a function or sub-graph node has it, its graph "
        "run refusing the rest (pause, resume, instructions, tools... reach an agent node's "
        "run alone)",
    )
    limits: dict[str, Any] | None = None
    usage: dict[str, Any] | None = Field(
        default=None,
        description="live counters (model_calls, tool_calls, tokens, cost; a NaN or an "
        'infinity as the string "NaN", "Infinity" or "-Infinity")',
    )
    created_at: str | None = Field(default=None, description="ISO 8601")
    updated_at: str | None = Field(default=None, description="ISO 8601: its owner's last write")
    owner: str | None = Field(default=None, description="the runtime that runs it")
    owner_silent: bool | None = Field(
        default=None, description="true when its owner has written nothing for a while (gone?)"
    )
    pending_commands: list[PendingCommand] | None = None
    interrupts: list[PendingInterrupt] | None = None
    error: DamagedSnapshot | None = Field(
        default=None, description="only on a listed run whose stored snapshot does not read"
    )


class RunTreeNode(RunSnapshot):
    """A run and the runs below it."""

    children: list[RunTreeNode] = Field(default_factory=list)
    truncated: bool | None = Field(
        default=None,
        description="on the run asked for: true when runs were left out (past ?limit= or 64 "
        "levels down)",
    )


class CommandStep(_Open):
    """One step a command went through (a steering event)."""

    id: int = Field(description="its event-log id")
    type: str = Field(description="steering.requested, steering.accepted, ...")
    at: str
    reason: str | None = None


class CommandHistoryEntry(_Open):
    """A command sent to the run, with the steps it went through."""

    correlation_id: str
    kind: str
    actor: str
    target: str | None = None
    payload_summary: Any = None
    state: str = Field(description="the CommandState of its latest step on the page")
    terminal: bool
    reason: str | None = None
    policy_id: str | None = None
    events: list[CommandStep]


class TraceFrame(_Open):
    """One event of the run, with its event-log ``id``; the other fields are its type's."""

    id: int
    type: str
    at: str | None = None
    run_id: str | None = None
    root_run_id: str | None = None


class Liveness(BaseModel):
    """``/healthz``: the process answers HTTP."""

    status: Literal["ok"]


class Readiness(BaseModel):
    """``/readyz``: whether each thing this server uses answers (why not is logged)."""

    status: Literal["ready", "unavailable"]
    checks: dict[str, Literal["ok", "unavailable"]] = Field(
        description="runtime, store and redis (those this server uses): ok or unavailable"
    )
