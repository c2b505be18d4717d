"""tinyagents: steer agent runs while they run.

The names below are the public contract (DESIGN.md section 3), each re-exported from the one
subpackage that exports it (``tinyagents.harness``, ``.protocol``, ``.runs``, ``.steering``) or
from ``tinyagents.errors`` and ``tinyagents.runtime``; ``LiteLLMModel``, ``Supervisor`` and ``SupervisorSpec``
are imported on first use (``tinyagents._lazy``). Graph building blocks live in
``tinyagents.graph``, test fakes in ``tinyagents.testkit``, events in ``tinyagents.events``,
stores and checkpointers in ``tinyagents.store`` and ``tinyagents.store.checkpoint``;
docs/architecture.md shows how the subpackages stack.
"""

from typing import TYPE_CHECKING

from tinyagents._lazy import lazy_names
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
    ModelRetry,
    ModelServerError,
    ModelTimeoutError,
    ToolFailed,
    UnsupportedOutputError,
)
from tinyagents.harness import (
    Agent,
    FunctionToolset,
    Message,
    Middleware,
    Model,
    ModelRequest,
    ModelResponse,
    NativeOutput,
    PromptedOutput,
    RunContext,
    SteeringRenderer,
    StructuredDict,
    SubAgent,
    SubAgentSession,
    SubAgentTool,
    TextOutput,
    Tool,
    ToolCall,
    ToolOutput,
    ToolResult,
    Toolset,
    Usage,
    capture_run_messages,
    orchestrator_tools,
    tool,
)
from tinyagents.protocol import (
    Boundary,
    CommandState,
    RunStatus,
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
    RunUsage,
)
from tinyagents.runtime import Runtime
from tinyagents.steering import Decision, PolicyContext, PolicyPipeline, RedirectConflict

if TYPE_CHECKING:  # imported on first use (tinyagents._lazy): an agent given a model string
    # loads the first, a runtime the others with the first run it has to watch
    from tinyagents.harness.litellm_model import LiteLLMModel
    from tinyagents.supervisor.spec import SupervisorSpec
    from tinyagents.supervisor.supervisor import Supervisor

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "Boundary",
    "CommandState",
    "Decision",
    "FunctionToolset",
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
    "ModelRetry",
    "ModelServerError",
    "ModelTimeoutError",
    "NativeOutput",
    "PolicyContext",
    "PolicyPipeline",
    "PromptedOutput",
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
    "StructuredDict",
    "SubAgent",
    "SubAgentSession",
    "SubAgentTool",
    "Supervisor",
    "SupervisorSpec",
    "TextOutput",
    "Tool",
    "ToolCall",
    "ToolFailed",
    "ToolOutput",
    "ToolResult",
    "Toolset",
    "UnsupportedOutputError",
    "Usage",
    "__version__",
    "capture_run_messages",
    "orchestrator_tools",
    "tool",
]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "LiteLLMModel": "tinyagents.harness.litellm_model",
        "Supervisor": "tinyagents.supervisor.supervisor",
        "SupervisorSpec": "tinyagents.supervisor.spec",
    },
)
