"""Supervision: declarative rules and an LLM judge that pause, steer or abort agent runs.

See docs/supervisor.md. ``SupervisorSpec`` declares it; the runtime owns the ``Supervisor``
that applies it.

Each name is imported from its module on first use (``tinyagents._lazy``): a runtime loads
``settings`` alone until it has a run to watch (a ``SupervisorSpec`` given to it, to an agent
or to a graph), and ``import tinyagents`` loads none of this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyagents._lazy import lazy_names

if TYPE_CHECKING:  # what __getattr__ imports (tinyagents._lazy)
    from tinyagents.supervisor.spec import ModelEntry, SupervisorSpec, SupervisorSpecError
    from tinyagents.supervisor.supervisor import Supervisor

__all__ = ["ModelEntry", "Supervisor", "SupervisorSpec", "SupervisorSpecError"]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "ModelEntry": f"{__name__}.spec",
        "Supervisor": f"{__name__}.supervisor",
        "SupervisorSpec": f"{__name__}.spec",
        "SupervisorSpecError": f"{__name__}.spec",
    },
)
