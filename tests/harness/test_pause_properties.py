"""Property: along any sequence of pauses and resumes sent by operators to any runs of a run
tree, once every command has landed each run is paused exactly when a pause of its own holds
it (its last own word was a pause) or a run above it, paused by its own pause, holds it — and
every command reached exactly one terminal state.

The model of the holds (``tinyagents.harness.pausing``): a run's own pause makes it hold every
live agent run below that it does not hold yet; its own resume lets go of every run it holds
and of every hold on itself; a run is paused while its own pause or any hold is on it.

Every run waits inside its model call (``Stepper``); the tree is settled after each command
(each run with commands queued let through its boundaries, until none is open).
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyagents import Agent, RunHandle, RunStatus, Runtime, tool
from tinyagents.protocol import SteeringActor, SteeringDelivery
from tinyagents.testkit import EventRecorder, FunctionModel, tool_call

OPERATORS = [SteeringActor.human(f"op{i}", scopes=["agent:control"]) for i in range(2)]


@tool
async def noop() -> str:
    """Do nothing."""
    return "ok"


class Tick:
    """Set at every event of the runtime (a sink) and every model call parked: what a wait
    for a condition wakes on."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __call__(self, _event: object) -> None:
        self.event.set()

    async def until(self, check: Any) -> None:
        while True:
            self.event.clear()
            if check():
                return
            await self.event.wait()


class Stepper:
    """A run's model: each call parks until ``step`` lets it go, then calls ``noop``."""

    def __init__(self, tick: Tick) -> None:
        self.parked: list[asyncio.Future[None]] = []
        self.tick = tick

    async def model(self, request: Any) -> Any:
        arrived: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.parked.append(arrived)
        self.tick(None)
        await arrived
        return tool_call("noop")

    def step(self) -> bool:
        """Let the parked call go; False if the run is not parked in its model."""
        if not self.parked:
            return False
        self.parked.pop().set_result(None)
        return True


#: the tree: run i's parent is PARENTS[i] (None: the root)
PARENTS = [None, 0, 0, 1, 3]

plan = st.lists(
    st.tuples(st.sampled_from(["pause", "resume"]), st.integers(0, len(PARENTS) - 1)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(steps=plan)
def test_a_run_is_paused_exactly_while_its_own_pause_or_a_hold_from_above_is_on_it(
    steps: list[tuple[str, int]],
) -> None:
    asyncio.run(asyncio.wait_for(_check(steps), 60))


def _below(index: int) -> list[int]:
    out, frontier = [], [index]
    while frontier:
        kids = [i for i, p in enumerate(PARENTS) if p in frontier]
        out += kids
        frontier = kids
    return out


async def _check(steps: list[tuple[str, int]]) -> None:
    recorder, tick = EventRecorder(), Tick()
    async with Runtime(sinks=[recorder, tick]) as rt:
        runs: list[tuple[RunHandle, Stepper]] = []
        for index, parent in enumerate(PARENTS):
            stepper = Stepper(tick)
            agent = Agent(f"a{index}", model=FunctionModel(stepper.model), tools=[noop])
            above = runs[parent][0] if parent is not None else None
            handle = await rt.start(agent, "go", parent=above)
            runs.append((handle, stepper))
            await tick.until(lambda s=stepper: bool(s.parked))
        own = [False] * len(PARENTS)
        held_by: list[set[int]] = [set() for _ in PARENTS]
        holds: list[set[int]] = [set() for _ in PARENTS]
        for kind, at in steps:
            handle = runs[at][0]
            operator = OPERATORS[at % 2]
            if kind == "pause":
                await handle.pause(actor=operator)
                own[at] = True
                for below in _below(at):
                    if below not in holds[at]:
                        holds[at].add(below)
                        held_by[below].add(at)
            else:
                await handle.resume(actor=operator)
                own[at] = False
                held_by[at].clear()
                for below in holds[at]:
                    held_by[below].discard(at)
                holds[at].clear()
            await _settle(rt, runs, tick)
            for index, (run, _) in enumerate(runs):
                expected = own[index] or bool(held_by[index])
                paused = run.info.status is RunStatus.PAUSED
                assert paused == expected, (index, steps)
        for handle, _ in runs:
            await handle.cancel(delivery=SteeringDelivery.IMMEDIATE, actor=OPERATORS[0])
        for handle, _ in runs:
            await asyncio.wait_for(handle.result(), 60)
    recorder.assert_every_command_terminal()


async def _settle(rt: Runtime, runs: list[tuple[RunHandle, Stepper]], tick: Tick) -> None:
    """Let the runs through their boundaries until every pause or resume passed down was
    sent and every command has landed."""
    while True:
        passing = [
            t
            for t in asyncio.all_tasks()
            if t.get_name().startswith("pause-subtree-") and not t.done()
        ]
        if passing:
            await asyncio.gather(*passing)
            continue
        if not rt.router.open_commands():
            return
        for handle, stepper in runs:
            if len(handle.inbox) and handle.info.status is not RunStatus.PAUSED:
                if stepper.step():
                    # through its boundaries: parked in its model again, or paused
                    await tick.until(
                        lambda h=handle, s=stepper: (
                            bool(s.parked) or h.info.status is RunStatus.PAUSED
                        )
                    )
        await asyncio.sleep(0)  # a paused run takes what was sent to it: one loop turn
