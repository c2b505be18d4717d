"""Steering: the policy pipeline that accepts, rejects, transforms or defers a command, the
per-run queue that orders what was accepted, and the inbox a run takes it from.

    from tinyagents.steering import CheckPolicy, PolicyContext, PolicyPipeline, default_policies

    class NoCancels(CheckPolicy):
        policy_id = "no-cancels"

        def check(self, cmd: SteeringCommand, ctx: PolicyContext) -> str | None:
            return "cancels are off today" if cmd.kind == "cancel" else None

    rt = Runtime(policies=PolicyPipeline([*default_policies(), NoCancels()]))

The router that ties them together (``tinyagents.steering.router``) is the runtime's: it sits
above ``tinyagents.runs`` (it resolves targets to run handles), while a run handle holds its
inbox and policies from here, so this package does not import the router and nothing outside
the runtime needs it.
"""

from tinyagents.steering.conflicts import RedirectConflict, narrow_models, narrow_tools
from tinyagents.steering.inbox import Inbox
from tinyagents.steering.policies import (
    AllowlistPolicy,
    AuthorityPolicy,
    BudgetPolicy,
    PayloadPolicy,
    StalenessPolicy,
    default_pipeline,
    default_policies,
)
from tinyagents.steering.policy import (
    CallNext,
    CheckPolicy,
    Decision,
    Policy,
    PolicyContext,
    PolicyPipeline,
    SenderContext,
)
from tinyagents.steering.queue import SteeringQueue, order_key

__all__ = [
    "AllowlistPolicy",
    "AuthorityPolicy",
    "BudgetPolicy",
    "CallNext",
    "CheckPolicy",
    "Decision",
    "Inbox",
    "PayloadPolicy",
    "Policy",
    "PolicyContext",
    "PolicyPipeline",
    "RedirectConflict",
    "SenderContext",
    "StalenessPolicy",
    "SteeringQueue",
    "default_pipeline",
    "default_policies",
    "narrow_models",
    "narrow_tools",
    "order_key",
]
