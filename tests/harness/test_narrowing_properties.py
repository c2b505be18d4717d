"""Property: along any sequence of narrowings of any runs of a run tree, with children started
before and after them, once every command has landed no run has a tool or model its parent
does not (every run's agent names the same ones, so "what its parent was left with" is its
parent's list), and a run withholds from its children at least what its parent withholds.

Every run waits inside its model call; the check is made once the tree is settled (each run
with commands queued let through one round of boundaries, until none is left): between a
narrowing and a run's next boundary a running child still has what it had, by design.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyagents import Agent, RunHandle, Runtime, tool
from tinyagents.errors import ModelsWithheld, RunLimitExceeded
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.testkit import EventWaiter, FunctionModel, tool_call

TOOLS = ("t0", "t1", "t2", "t3")
MODELS = ("m0", "m1", "m2")


def _tool(name: str) -> Any:
    async def noop() -> str:
        return name

    return tool(name=name, description=f"Tool {name}.")(noop)


class Stepper:
    """A run's model: each call parks until ``step`` lets it go, then calls a tool (the
    run passes a round of boundaries and parks in its next model call)."""

    def __init__(self) -> None:
        self.parked: asyncio.Queue[asyncio.Future[None]] = asyncio.Queue()
        self.current: asyncio.Future[None] | None = None

    async def model(self, request: Any) -> Any:
        arrived: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.parked.put_nowait(arrived)
        await arrived
        return tool_call(TOOLS[0])

    async def wait_parked(self) -> None:
        self.current = await self.parked.get()

    async def step(self) -> None:
        assert self.current is not None
        self.current.set_result(None)
        await self.wait_parked()


def _agent(index: int, stepper: Stepper) -> Agent:
    return Agent(
        f"a{index}",
        model=FunctionModel(stepper.model, name=MODELS[0]),
        models=list(MODELS),
        tools=[_tool(name) for name in TOOLS],
    )


#: ("start", parent index) starts a child under a run; ("tools"|"models", run index, picks)
#: narrows a run to the names at ``picks`` of those it has now.
steps = st.lists(
    st.one_of(
        st.tuples(st.just("start"), st.integers(0, 20)),
        st.tuples(
            st.sampled_from(["tools", "models"]),
            st.integers(0, 20),
            st.sets(st.integers(0, 3), max_size=4),
        ),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(plan=steps)
def test_no_run_is_left_with_more_than_its_parent(plan: list[tuple[Any, ...]]) -> None:
    asyncio.run(asyncio.wait_for(_check(plan), 60))


async def _check(plan: list[tuple[Any, ...]]) -> None:
    waiter = EventWaiter()
    async with Runtime(testing=True, sinks=[waiter]) as rt:
        root = await _start(rt, 0, None)
        assert root is not None
        runs = [root]
        for step in plan:
            if step[0] == "start":
                child = await _start(rt, len(runs), runs[step[1] % len(runs)][0])
                if child is not None:
                    runs.append(child)
            else:
                kind, at, picks = step
                await _narrow(rt, runs[at % len(runs)][0], kind, picks)
            await _settle(rt, runs)
            _assert_bounded(rt, [handle for handle, _ in runs])
        for handle, _ in runs:
            await handle.cancel(delivery=SteeringDelivery.IMMEDIATE)


async def _start(
    rt: Runtime, index: int, parent: RunHandle | None
) -> tuple[RunHandle, Stepper] | None:
    stepper = Stepper()
    try:
        handle = await rt.start(_agent(index, stepper), "go", parent=parent)
    except (ModelsWithheld, RunLimitExceeded):
        return None  # every model taken from a run above, or too deep: it does not start
    await stepper.wait_parked()
    return handle, stepper


async def _narrow(rt: Runtime, run: RunHandle, kind: str, picks: set[int]) -> None:
    current = sorted(run.info.tools or ()) if kind == "tools" else list(run.info.models or ())
    left = [current[i] for i in sorted(picks) if i < len(current)]
    if kind == "models" and not left:
        return  # a constrain_model names at least one model
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run(run.run_id),
        actor=SteeringActor.test(),
        kind=SteeringKind.CONSTRAIN_TOOLS if kind == "tools" else SteeringKind.CONSTRAIN_MODEL,
        payload={kind: left},
    )
    assert (await rt.submit(cmd)).status == "accepted"


async def _settle(rt: Runtime, runs: list[tuple[RunHandle, Stepper]]) -> None:
    """Let the runs through their boundaries until every narrowing was passed down and every
    command has landed."""
    while True:
        passing = [
            t
            for t in asyncio.all_tasks()
            if t.get_name().startswith("narrow-subtree-") and not t.done()
        ]
        await asyncio.gather(*passing)
        if passing:
            continue
        if not rt.router.open_commands():
            return
        for handle, stepper in runs:
            if len(handle.inbox):
                await stepper.step()


def _assert_bounded(rt: Runtime, runs: list[RunHandle]) -> None:
    for run in runs:
        info = run.info
        parent = rt.runs.tree.get(info.parent_run_id) if info.parent_run_id else None
        if parent is None:
            continue
        assert set(info.tools or ()) <= set(parent.tools or ()), info.run_id
        assert info.withheld_tools >= parent.withheld_tools, info.run_id
        assert info.withheld_models >= parent.withheld_models, info.run_id
        models = set(info.models or ())
        # a running run whose every model was taken from above keeps them (documented)
        if not models <= info.withheld_models:
            assert models <= set(parent.models or ()), info.run_id
