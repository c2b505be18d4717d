"""Harness middleware: one shape, ``async (item, ctx, call_next)``, folded like ASGI.

A ``Middleware`` wraps model calls (``model``), tool calls (``tool``) and may take part in the
policy decision for steering sent to its run (``steering``, a regular steering policy scoped
to the run). Override only what you need; the defaults pass through.

    class Redact(Middleware):
        async def model(self, request, ctx, call_next):
            request.messages = [scrub(m) for m in request.messages]
            return await call_next(request)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tinyagents.harness.model import ModelRequest, ModelResponse, ToolCall
from tinyagents.harness.tools import ToolResult
from tinyagents.protocol.commands import SteeringCommand
from tinyagents.steering.policy import CallNext, Decision, PolicyContext

if TYPE_CHECKING:
    from tinyagents.harness.context import RunContext

T = TypeVar("T")
R = TypeVar("R")
Handler = Callable[[T], Awaitable[R]]


class Middleware:
    """Base class: every hook passes straight through."""

    #: Identifies the middleware in steering decisions (``policy_id`` of its verdicts).
    name: str = "middleware"

    async def model(
        self,
        request: ModelRequest,
        ctx: RunContext,
        call_next: Handler[ModelRequest, ModelResponse],
    ) -> ModelResponse:
        return await call_next(request)

    async def tool(
        self, call: ToolCall, ctx: RunContext, call_next: Handler[ToolCall, ToolResult]
    ) -> ToolResult:
        return await call_next(call)

    async def steering(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        return await call_next(cmd)


def fold(
    hooks: Sequence[Callable[[T, Any, Handler[T, R]], Awaitable[R]]],
    ctx: Any,
    inner: Handler[T, R],
) -> Handler[T, R]:
    """Compose ``hooks`` around ``inner``; the first hook is the outermost."""
    handler = inner
    for hook in reversed(hooks):
        handler = _bind(hook, ctx, handler)
    return handler


def _bind(
    hook: Callable[[T, Any, Handler[T, R]], Awaitable[R]], ctx: Any, nxt: Handler[T, R]
) -> Handler[T, R]:
    async def step(item: T) -> R:
        return await hook(item, ctx, nxt)

    return step


class SteeringHook:
    """Adapts a middleware's ``steering`` method to the policy shape (``policy_id`` + call)."""

    def __init__(self, middleware: Middleware) -> None:
        self.middleware = middleware
        self.policy_id = f"middleware:{middleware.name}"

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        passed: list[Decision] = []

        async def next_and_remember(c: SteeringCommand) -> Decision:
            passed.append(await call_next(c))
            return passed[-1]

        decision = await self.middleware.steering(cmd, ctx, next_and_remember)
        if decision.status != "accept" and not any(decision is d for d in passed):
            # A verdict of this middleware (not one it passed on): it is named after it.
            decision.policy_id = self.policy_id
        return decision


def overrides(middleware: Middleware, method: str) -> bool:
    return getattr(type(middleware), method) is not getattr(Middleware, method)
