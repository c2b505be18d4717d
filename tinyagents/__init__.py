"""tinyagents: steer agent runs while they run.

The names below are the public contract (DESIGN.md section 3). Graph building blocks live in
``tinyagents.graph``, test fakes in ``tinyagents.testkit``, errors in ``tinyagents.errors``.
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
from tinyagents.harness.agent import Agent
from tinyagents.harness.context import RunContext
from tinyagents.harness.litellm_model import LiteLLMModel
from tinyagents.harness.middleware import Middleware
from tinyagents.harness.model import Message, Model, ModelRequest, ModelResponse, ToolCall, Usage
from tinyagents.harness.orchestrator import orchestrator_tools
from tinyagents.harness.render import SteeringRenderer
from tinyagents.harness.subagent import SubAgent, SubAgentSession, SubAgentTool
from tinyagents.harness.tools import Tool, ToolResult, tool
from tinyagents.protocol.boundary import Boundary
from tinyagents.protocol.commands import (
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringPolicyRef,
    SteeringPriority,
    SteeringReceipt,
    SteeringTarget,
)
from tinyagents.protocol.state import CommandState
from tinyagents.runs.handle import RunDriver, RunHandle, RunResult
from tinyagents.runs.info import RunInfo, RunStatus
from tinyagents.runs.limits import RunLimits, RunUsage
from tinyagents.runtime import Runtime
from tinyagents.steering.conflicts import RedirectConflict
from tinyagents.steering.policy import Decision, PolicyContext, PolicyPipeline

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
    "Tool",
    "ToolCall",
    "ToolResult",
    "Usage",
    "__version__",
    "orchestrator_tools",
    "tool",
]
