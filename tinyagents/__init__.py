"""tinyagents: steer agent runs while they run.

The names below are the public contract (DESIGN.md section 3), each re-exported from the one
subpackage that exports it (``tinyagents.harness``, ``.protocol``, ``.runs``, ``.steering``) or
from ``tinyagents.errors`` and ``tinyagents.runtime``. Graph building blocks live in
``tinyagents.graph``, test fakes in ``tinyagents.testkit``, events in ``tinyagents.events``,
stores and checkpointers in ``tinyagents.store`` and ``tinyagents.store.checkpoint``;
docs/architecture.md shows how the subpackages stack.
"""

from tinyagents.errors import (
    MissingAPIKeyError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelEmptyResponse,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelRequestRejected,
    ModelResponseError,
    ModelResponseNotJSON,
    ModelServerError,
    ModelTimeoutError,
)
from tinyagents.harness import (
    Agent,
    LiteLLMModel,
    Message,
    Middleware,
    Model,
    ModelRequest,
    ModelResponse,
    RunContext,
    SteeringRenderer,
    SubAgent,
    SubAgentSession,
    SubAgentTool,
    Tool,
    ToolCall,
    ToolResult,
    Usage,
    orchestrator_tools,
    tool,
)
from tinyagents.protocol import (
    Boundary,
    CommandState,
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringPolicyRef,
    SteeringPriority,
    SteeringReceipt,
    SteeringTarget,
)
from tinyagents.runs import (
    RunDriver,
    RunHandle,
    RunInfo,
    RunLimits,
    RunResult,
    RunStatus,
    RunUsage,
)
from tinyagents.runtime import Runtime
from tinyagents.steering import Decision, PolicyContext, PolicyPipeline, RedirectConflict
from tinyagents.supervisor import Supervisor, SupervisorSpec

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "Boundary",
    "CommandState",
    "Decision",
    "LiteLLMModel",
    "Message",
    "Middleware",
    "MissingAPIKeyError",
    "Model",
    "ModelAuthenticationError",
    "ModelConnectionError",
    "ModelEmptyResponse",
    "ModelError",
    "ModelNotFoundError",
    "ModelRateLimitError",
    "ModelRequest",
    "ModelRequestRejected",
    "ModelResponse",
    "ModelResponseError",
    "ModelResponseNotJSON",
    "ModelServerError",
    "ModelTimeoutError",
    "PolicyContext",
    "PolicyPipeline",
    "RedirectConflict",
    "RunContext",
    "RunDriver",
    "RunHandle",
    "RunInfo",
    "RunLimits",
    "RunResult",
    "RunStatus",
    "RunUsage",
    "Runtime",
    "SteeringActor",
    "SteeringCommand",
    "SteeringDelivery",
    "SteeringKind",
    "SteeringPolicyRef",
    "SteeringPriority",
    "SteeringReceipt",
    "SteeringRenderer",
    "SteeringTarget",
    "SubAgent",
    "SubAgentSession",
    "SubAgentTool",
    "Supervisor",
    "SupervisorSpec",
    "Tool",
    "ToolCall",
    "ToolResult",
    "Usage",
    "__version__",
    "orchestrator_tools",
    "tool",
]
