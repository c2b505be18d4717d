"""A hostile or careless user's sixteenth round: the features added in round 15's day
(``RunLimits(max_cost=, max_input_tokens_per_request=)`` and their ``update_budget``
steering, ``@tool(args_validator=)``, a ``Command`` as a ``Send``'s argument, one-value
sub-graphs, thread holds of graph runs).

Each test is a probe that found something (named in its docstring) or holds a decision down.
Probed and held (no test added): ``RunLimits`` and ``update_budget`` given NaN, infinities,
negatives, booleans, text and integers past 4,300 digits for the two new limits (each a
typed refusal); ``args_validator``s that raise other exceptions (the model is told), return
values (ignored, as pydantic-ai's), are classes or callable objects, are async and hang
(the tool's timeout ends them), or change their arguments; a ``Command`` as a ``Send``'s
argument with odd or nested updates and resume values that are not JSON (an
``InvalidUpdateError`` naming it); one-value sub-graphs under class-state parents and the
reverse returning ``None``, other types and unknown keys; second graph runs on one thread
after a failed start, a failed, interrupted or cancelled first run (no hold left in the
store); ``delete_thread`` in a ``saving_together`` block that raises, is cancelled or
deletes twice (SQLite file and ``:memory:``, PostgreSQL); the CLI's dot-segment escaping.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from fractions import Fraction

import pytest

from tinyagents import Agent, ModelRetry, RunContext, RunLimits, RunStatus, Runtime, tool
from tinyagents.errors import ConfigurationError, SteeringRejected
from tinyagents.events import MASK, mask, summarize
from tinyagents.harness import ModelRequest, ModelResponse, Usage
from tinyagents.testkit import FunctionModel, ScriptedModel, tool_call


def _answer(text: str, *, cost: float) -> ModelResponse:
    return ModelResponse(text=text, usage=Usage(input_tokens=1, output_tokens=1, cost=cost))


def _called(name: str, *, cost: float) -> ModelResponse:
    return dataclasses.replace(
        tool_call(name), usage=Usage(input_tokens=1, output_tokens=1, cost=cost)
    )


#: A whole number Python neither prints nor reads as JSON (past 4,300 digits).
HUGE = 10**5000


@tool
def ping() -> str:
    return "pong"


# -- a cost budget spent to the cent, in binary floats -------------------------------------


async def test_a_cost_budget_spent_exactly_in_floats_that_do_not_add_up_exactly_completes() -> None:
    """Found: ``RunLimits(max_cost=0.3)`` and responses costing 0.1 and 0.2 ended the run
    ``limit_exceeded`` ("used 0.30000000000000004, allowed 0.3"): the sum of two binary
    floats passed the budget that the docs say may be used exactly. A cost within a
    rounding error of its budget has used it, not passed it (and the next request is
    refused, as a budget spent exactly)."""
    model = ScriptedModel([_called("ping", cost=0.1), _answer("ok", cost=0.2)])
    result = await Agent("a", model, tools=[ping], limits=RunLimits(max_cost=0.3)).run("go")
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == "ok"

    model = ScriptedModel([_called("ping", cost=0.1), _called("ping", cost=0.2), "never"])
    result = await Agent("a", model, tools=[ping], limits=RunLimits(max_cost=0.3)).run("go")
    assert result.status is RunStatus.LIMIT_EXCEEDED and "'max_cost'" in (result.error or "")
    assert len(model.requests) == 2  # spent: no third request

    model = ScriptedModel([_called("ping", cost=0.1), _answer("over", cost=0.2000001)])
    result = await Agent("a", model, tools=[ping], limits=RunLimits(max_cost=0.3)).run("go")
    assert result.status is RunStatus.LIMIT_EXCEEDED  # a real excess is still one


async def test_a_childs_cost_budget_may_be_set_to_exactly_what_its_parent_has_left() -> None:
    """Found: a parent with ``max_cost=0.3`` that spent 0.1 has 0.2 left, but
    ``update_budget(max_cost=0.2)`` on its child was rejected by the budget policy as above
    it ("ceiling 0.19999999999999998"): 0.3 - 0.1 in binary floats. The exact amount left
    is taken; more than it is still refused."""
    receipts: list = []
    release = asyncio.Event()

    async def child_answer(request: ModelRequest) -> ModelResponse:
        await release.wait()
        return _answer("child done", cost=0.2)

    @tool
    async def spawn(ctx: RunContext) -> str:
        child = await rt.start(
            Agent("c", FunctionModel(child_answer)), "go", parent=ctx.info.run_id
        )
        receipts.append(await child.update_budget(max_cost=0.2))
        with pytest.raises(SteeringRejected, match="exceeds what parent run"):
            await child.update_budget(max_cost=0.21)
        release.set()
        return str((await child.result()).status.value)

    model = ScriptedModel([_called("spawn", cost=0.1), "done"])
    async with Runtime() as rt:
        parent = await rt.start(
            Agent("p", model, tools=[spawn], limits=RunLimits(max_cost=0.3)), "go"
        )
        result = await parent.result()
    # the child spent all the parent had left: the child completed, the parent may make
    # no further request
    assert result.status is RunStatus.LIMIT_EXCEEDED and len(model.requests) == 1
    tool_out = [m.content for m in result.messages if m.role == "tool"]
    assert tool_out == ["completed"], tool_out
    (fits,) = receipts
    assert fits.accepted


# -- a tool's args_validator that is a generator ---------------------------------------------


def test_an_args_validator_that_is_a_generator_is_refused_with_its_tool() -> None:
    """Found: an ``args_validator`` written as a generator (sync or async: a ``yield`` left
    in it) was taken, and at each call its body never ran: calling it made a generator,
    which was not awaitable and was dropped, so the tool ran on arguments the validator
    would have refused. It is refused with its tool, a ``ConfigurationError``, as a
    validator that cannot be called ``(ctx, **arguments)`` is."""

    def checks(ctx: RunContext, x: int):  # type: ignore[no-untyped-def]
        if x < 0:
            raise ModelRetry("x must not be negative")
        yield

    async def checks_async(ctx: RunContext, x: int):  # type: ignore[no-untyped-def]
        if x < 0:
            raise ModelRetry("x must not be negative")
        yield

    class Checks:
        def __call__(self, ctx: RunContext, x: int):  # type: ignore[no-untyped-def]
            raise ModelRetry("never run")
            yield

    for validator in (checks, checks_async, Checks(), functools.partial(checks_async)):
        with pytest.raises(ConfigurationError, match=r"args_validator .*generator"):

            @tool(args_validator=validator)
            def double(x: int) -> int:
                return 2 * x


# -- huge integers inside what a summary prints -------------------------------------------------


def test_a_summary_of_a_value_whose_text_holds_a_huge_integer_names_it() -> None:
    """Found: round 15 named a huge integer that is a summary's key or value, but one inside
    what a summary prints (a tuple or frozenset key, a dataclass's field, a ``Fraction``)
    still raised a bare ``ValueError`` (Python prints no integer past 4,300 digits), from
    ``summarize`` and from ``mask`` (a tuple key): a tool call whose arguments held one
    failed its run on its event. Such a value is named by its type."""

    @dataclasses.dataclass
    class Box:
        n: int

    summary = summarize(
        {(HUGE, 1): 1, frozenset([HUGE]): 2, "box": Box(HUGE), "f": Fraction(HUGE, 3)}
    )
    assert summary == {
        "a tuple too long to print": 1,
        "a frozenset too long to print": 2,
        "box": "a Box too long to print",
        "f": "a Fraction too long to print",
    }
    json.loads(json.dumps(summary))
    assert summarize({"box": Box(HUGE)}, read_only=True) == {"box": "a Box too long to print"}
    masked = mask({(HUGE, 1): {"password": "p"}, "api_key": "k"})
    assert masked == {(HUGE, 1): {"password": MASK}, "api_key": MASK}
    assert summarize({(1, 2): Fraction(1, 3)}) == {"(1, 2)": "Fraction(1, 3)"}  # as before
