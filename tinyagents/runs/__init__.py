"""Runs: who is running, under whom, within which limits, and the handles to reach them.

    handle = await rt.start(agent, "task")        # a RunHandle
    handle.info                                   # its RunInfo: ids, depth, status, limits
    rt.runs.get(handle.run_id)                    # the RunRegistry
    rt.tree(handle.info.root_run_id)              # the RunTree around it

``RunHost`` is what the execution layer (agent loop, graph runtime) sees of the runtime, and
``RunDriver`` the hooks it gives back; ``Runtime`` implements the one, ``AgentRun`` and the
graph driver the other.
"""

# ``RunStatus`` moved to the protocol layer (every layer reads it); still importable from here.
from tinyagents.protocol import RunStatus as RunStatus
from tinyagents.runs.handle import RunDriver, RunHandle, RunResult
from tinyagents.runs.host import RunHost
from tinyagents.runs.info import RunInfo
from tinyagents.runs.limits import RunLimits, RunUsage
from tinyagents.runs.registry import RunRegistry
from tinyagents.runs.tree import RunTree, RunTreeNode

__all__ = [
    "RunDriver",
    "RunHandle",
    "RunHost",
    "RunInfo",
    "RunLimits",
    "RunRegistry",
    "RunResult",
    "RunTree",
    "RunTreeNode",
    "RunUsage",
]
