"""Checkpointed state graphs: supersteps, reducers, interrupts, commands and sub-graphs.

graph = (
    StateGraph(State)
    .add_node("draft", draft)
    .add_node("review", review)
    .add_edge(START, "draft")
    .add_edge("draft", "review")
    .add_edge("review", END)
    .compile(checkpointer=MemoryCheckpointer())
)
result = await graph.run({"topic": "x"}, thread_id="t1")
if result.status == "interrupted":
    result = await graph.run(Command(resume={result.interrupts[0].id: "ok"}), thread_id="t1")

A node taking a parameter named ``runtime`` gets a ``GraphRuntime`` (LangGraph's ``Runtime``:
the run's ``context=``, checked against ``StateGraph(..., context_schema=...)``, and its
stream writer); ``get_runtime()`` and ``get_stream_writer()`` read it inside a node or task.

LangGraph's functional API, ``@entrypoint`` and ``@task`` (``tinyagents.graph.func``), makes a
one-node graph of a function whose task calls are saved with the thread.
"""

from tinyagents.graph.agent_node import AgentNode
from tinyagents.graph.builder import MAX_NODE_NAME_LENGTH, StateGraph
from tinyagents.graph.caching import CachePolicy
from tinyagents.graph.compiled import CompiledGraph
from tinyagents.graph.context import NodeContext
from tinyagents.graph.func import Entrypoint, Task, TaskFuture, entrypoint, task
from tinyagents.graph.graph_runtime import (
    ExecutionInfo,
    GraphRuntime,
    get_runtime,
    get_stream_writer,
)
from tinyagents.graph.interrupts import Interrupt, is_invalid_resume
from tinyagents.graph.longterm import get_store
from tinyagents.graph.reducers import (
    REMOVE_ALL_MESSAGES,
    Overwrite,
    UntrackedValue,
    add_messages,
    append,
    overwrite,
    union,
)
from tinyagents.graph.state import IsLastStep, RemainingSteps, StateView
from tinyagents.graph.types import (
    END,
    START,
    CheckpointInfo,
    Command,
    GraphResult,
    GraphStatus,
    NodeError,
    RetryPolicy,
    Send,
    StateSnapshot,
    StateUpdate,
    TaskState,
    TimeoutPolicy,
    default_retry_on,
    interrupt,
)

__all__ = [
    "END",
    "MAX_NODE_NAME_LENGTH",
    "REMOVE_ALL_MESSAGES",
    "START",
    "AgentNode",
    "CachePolicy",
    "CheckpointInfo",
    "Command",
    "CompiledGraph",
    "Entrypoint",
    "ExecutionInfo",
    "GraphResult",
    "GraphRuntime",
    "GraphStatus",
    "Interrupt",
    "IsLastStep",
    "NodeContext",
    "NodeError",
    "Overwrite",
    "RemainingSteps",
    "RetryPolicy",
    "Send",
    "StateGraph",
    "StateSnapshot",
    "StateUpdate",
    "StateView",
    "Task",
    "TaskFuture",
    "TaskState",
    "TimeoutPolicy",
    "UntrackedValue",
    "add_messages",
    "append",
    "default_retry_on",
    "entrypoint",
    "get_runtime",
    "get_store",
    "get_stream_writer",
    "interrupt",
    "is_invalid_resume",
    "overwrite",
    "task",
    "union",
]
