"""The agent harness: models, tools, the model-tool loop, sub-agents and middleware.

    from tinyagents.harness import Agent, SubAgent, SubAgentTool, tool

    @tool
    async def search(query: str) -> str:
        return "invoice #1042 was charged twice"   # its docstring describes it to the model

    research = SubAgent(Agent("research", "openai/gpt-4o-mini", tools=[search]),
                        description="finds evidence")
    orchestrator = Agent("orchestrator", model, tools=[SubAgentTool(research)])

A model is any ``Model`` (the testkit's scripted ones included) or a litellm model string,
which ``LiteLLMModel`` wraps (its module is imported with the first such string, or the first
time the name is read: ``tinyagents.harness._litellm``); litellm itself on the first call. The loop stops at
safe boundaries to take steering, which reaches the model through ``SteeringRenderer``.
"""

from typing import TYPE_CHECKING

from tinyagents._lazy import lazy_names
from tinyagents.harness.agent import Agent
from tinyagents.harness.capture import capture_run_messages
from tinyagents.harness.context import RunContext
from tinyagents.harness.middleware import Middleware
from tinyagents.harness.model import (
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    ToolCall,
    ToolSpec,
    Usage,
)
from tinyagents.harness.orchestrator import orchestrator_tools
from tinyagents.harness.output import (
    NativeOutput,
    PromptedOutput,
    StructuredDict,
    TextOutput,
    ToolOutput,
)
from tinyagents.harness.render import SteeringRenderer
from tinyagents.harness.subagent import SubAgent, SubAgentSession, SubAgentTool
from tinyagents.harness.tools import FunctionTool, Tool, ToolResult, tool
from tinyagents.harness.toolsets import (
    CombinedToolset,
    FilteredToolset,
    FunctionToolset,
    PrefixedToolset,
    PreparedToolset,
    RenamedToolset,
    Toolset,
    WrapperToolset,
)

if TYPE_CHECKING:  # imported on first use (tinyagents.harness._litellm)
    from tinyagents.harness.litellm_model import LiteLLMModel

__all__ = [
    "Agent",
    "CombinedToolset",
    "FilteredToolset",
    "FunctionTool",
    "FunctionToolset",
    "LiteLLMModel",
    "Message",
    "Middleware",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "NativeOutput",
    "PrefixedToolset",
    "PreparedToolset",
    "PromptedOutput",
    "RenamedToolset",
    "RunContext",
    "SteeringRenderer",
    "StreamChunk",
    "StructuredDict",
    "SubAgent",
    "SubAgentSession",
    "SubAgentTool",
    "TextOutput",
    "Tool",
    "ToolCall",
    "ToolOutput",
    "ToolResult",
    "ToolSpec",
    "Toolset",
    "Usage",
    "WrapperToolset",
    "capture_run_messages",
    "orchestrator_tools",
    "tool",
]

__getattr__, __dir__ = lazy_names(__name__, {"LiteLLMModel": "tinyagents.harness.litellm_model"})
