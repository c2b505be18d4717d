"""``RunContext`` for a tool call: the call's id, the tool's name and how many calls of the
tool just before it failed (``retry``), as pydantic-ai's ``RunContext`` offers them."""

from __future__ import annotations

from typing import Any

from tinyagents import Agent, Middleware, RunContext, tool
from tinyagents.errors import ToolError
from tinyagents.testkit import ScriptedModel, reply, tool_call


async def test_a_tool_sees_its_call_and_how_often_it_failed_just_before() -> None:
    seen: list[tuple[str | None, str | None, int]] = []

    @tool
    def flaky(n: int, ctx: RunContext) -> str:
        """Fail unless n is 0."""
        seen.append((ctx.tool_call_id, ctx.tool_name, ctx.retry))
        if n:
            raise ToolError("try again")
        return "ok"

    @tool
    def other(ctx: RunContext) -> str:
        """Always works."""
        seen.append((ctx.tool_call_id, ctx.tool_name, ctx.retry))
        return "fine"

    model = ScriptedModel(
        [
            tool_call("flaky", id="c1", n=1),
            tool_call("flaky", id="c2", n=1),
            tool_call("other", id="c3"),  # another tool's success does not reset flaky's
            tool_call("flaky", id="c4", n="not a number"),  # bad arguments fail too
            tool_call("flaky", id="c5", n=0),
            tool_call("flaky", id="c6", n=0),  # after a success: 0 again
            reply("done"),
        ]
    )
    result = await Agent("a", model, tools=[flaky, other]).run("go")
    assert result.output == "done"
    assert seen == [
        ("c1", "flaky", 0),
        ("c2", "flaky", 1),
        ("c3", "other", 0),
        # c4 never ran (its arguments were refused), yet it failed: c5 is the third retry
        ("c5", "flaky", 3),
        ("c6", "flaky", 0),
    ]


async def test_middleware_sees_the_calls_context_around_a_tool_and_none_around_a_model() -> None:
    seen: list[tuple[str, str | None, str | None, int]] = []

    class Watch(Middleware):
        name = "watch"

        async def model(self, request: Any, ctx: RunContext, call_next: Any) -> Any:
            seen.append(("model", ctx.tool_call_id, ctx.tool_name, ctx.retry))
            return await call_next(request)

        async def tool(self, call: Any, ctx: RunContext, call_next: Any) -> Any:
            seen.append(("tool", ctx.tool_call_id, ctx.tool_name, ctx.retry))
            return await call_next(call)

    @tool
    def ping(ctx: RunContext) -> str:
        """Answer pong."""
        assert ctx.run_id  # the run's own fields are there as ever
        return "pong"

    model = ScriptedModel([tool_call("ping", id="p1"), reply("done")])
    await Agent("a", model, tools=[ping], middleware=[Watch()]).run("go")
    assert seen == [
        ("model", None, None, 0),
        ("tool", "p1", "ping", 0),
        ("model", None, None, 0),
    ]
