"""Supervision: declarative rules and an LLM judge that pause, steer or abort agent runs.

See docs/supervisor.md. ``SupervisorSpec`` declares it; the runtime owns the ``Supervisor``
that applies it.
"""

from tinyagents.supervisor.spec import ModelEntry, SupervisorSpec, SupervisorSpecError
from tinyagents.supervisor.supervisor import Supervisor

__all__ = ["ModelEntry", "Supervisor", "SupervisorSpec", "SupervisorSpecError"]
