"""The vocabulary every layer shares: commands, targets, actors, kinds, payloads, the receipt,
``Boundary``, ``CommandState``, and ``RunStatus`` with its ``UNFINISHED_RUN_STATUSES`` (DESIGN.md §1,
the protocol layer).

    from tinyagents.protocol import SteeringCommand, SteeringKind, SteeringTarget, SteeringActor

    cmd = SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=SteeringActor.human("ana", tenant_id="acme", scopes={"agent:control"}),
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "focus on billing"},
    )

Nothing here imports from tinyagents outside this package except the two modules that sit
below every layer: ``tinyagents._clock`` (ids and time) and ``tinyagents.errors`` (the
exception tree, which imports nothing from tinyagents, so the command models can raise
``InvalidCommandError`` and ``SteeringRejected`` can carry a receipt without a cycle).
``PAYLOAD_MODELS`` (``tinyagents.protocol.payloads``) is imported on first use.
"""

from typing import TYPE_CHECKING

from tinyagents._lazy import lazy_names
from tinyagents.protocol.boundary import Boundary
from tinyagents.protocol.commands import (
    COMMAND_ADAPTER,
    CONTROL_KINDS,
    MESSAGE_KINDS,
    AgentRunTarget,
    AnyActor,
    AnyTarget,
    GraphNodeTarget,
    GraphSupervisorActor,
    GraphTaskTarget,
    HumanActor,
    MiddlewareActor,
    ParentAgentActor,
    ReceiptStatus,
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringPolicyRef,
    SteeringPriority,
    SteeringReceipt,
    SteeringTarget,
    SubAgentRunTarget,
    TestActor,
    ThreadTarget,
    command_json_schema,
    validate_payload,
)
from tinyagents.protocol.state import UNFINISHED_RUN_STATUSES, CommandState, RunStatus

if TYPE_CHECKING:  # imported on first use (tinyagents._lazy)
    from tinyagents.protocol.payloads import PAYLOAD_MODELS

__all__ = [
    "COMMAND_ADAPTER",
    "CONTROL_KINDS",
    "MESSAGE_KINDS",
    "PAYLOAD_MODELS",
    "UNFINISHED_RUN_STATUSES",
    "AgentRunTarget",
    "AnyActor",
    "AnyTarget",
    "Boundary",
    "CommandState",
    "GraphNodeTarget",
    "GraphSupervisorActor",
    "GraphTaskTarget",
    "HumanActor",
    "MiddlewareActor",
    "ParentAgentActor",
    "ReceiptStatus",
    "RunStatus",
    "SteeringActor",
    "SteeringCommand",
    "SteeringDelivery",
    "SteeringKind",
    "SteeringPolicyRef",
    "SteeringPriority",
    "SteeringReceipt",
    "SteeringTarget",
    "SubAgentRunTarget",
    "TestActor",
    "ThreadTarget",
    "command_json_schema",
    "validate_payload",
]

__getattr__, __dir__ = lazy_names(__name__, {"PAYLOAD_MODELS": "tinyagents.protocol.payloads"})
