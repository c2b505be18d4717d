"""Bounded memory: finished runs leave memory once they leave the retention window (or on
``forget``), their history stays readable from a store, and duplicates are still answered."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from steerkit import apply_ready, finish_run, make_command, start_run

from tinyagents._clock import use_clock
from tinyagents.errors import ConfigurationError
from tinyagents.protocol import SteeringTarget
from tinyagents.runs import RunHandle
from tinyagents.runtime import Runtime
from tinyagents.store import SqliteStore
from tinyagents.testkit import FakeClock


async def _steered_run(rt: Runtime, run_id: str, commands: int = 2, **kw: object) -> RunHandle:
    """A run that takes ``commands`` instructions, applies them, and finishes."""
    handle = await start_run(rt, run_id, **kw)  # type: ignore[arg-type]
    for _ in range(commands):
        assert (await rt.submit(make_command(run_id))).status == "accepted"
    apply_ready(handle)
    await finish_run(rt, handle)
    return handle


async def test_only_the_most_recently_finished_runs_stay_in_memory() -> None:
    async with Runtime(retain_finished=3) as rt:
        for n in range(10):
            await _steered_run(rt, f"r-{n}")
        assert [i.run_id for i in rt.runs.list()] == ["r-7", "r-8", "r-9"]
        assert rt.tree("r-0") is None and rt.runs.get("r-0") is None
        assert rt.steering_history("r-0") == []
        assert len(rt.steering_history("r-9")) == 8
        assert sorted(rt.router._history) == ["r-7", "r-8", "r-9"]


async def test_finished_runs_older_than_retain_finished_s_are_released() -> None:
    clock = FakeClock()
    with use_clock(clock):
        async with Runtime(retain_finished=1000, retain_finished_s=60) as rt:
            await _steered_run(rt, "old-1")
            await _steered_run(rt, "old-2")
            clock.advance(61)
            await _steered_run(rt, "new")  # a run ending releases what has expired
            assert [i.run_id for i in rt.runs.list()] == ["new"]
            clock.advance(30)
            assert await rt.release_finished() == 0
            clock.advance(31)
            assert await rt.release_finished() == 1  # also without a run ending
            assert len(rt.runs) == 0 and not rt.router._history


async def test_a_tree_is_released_only_once_every_run_in_it_has_finished() -> None:
    async with Runtime(retain_finished=0) as rt:
        root = await start_run(rt, "root")
        child = await start_run(rt, "child", parent="root")
        await finish_run(rt, root)
        # The parent finished first: it stays while its child runs, and so does the child.
        assert "root" in rt.runs and "child" in rt.runs
        assert rt.tree("root") is not None
        await rt.submit(make_command("child"))
        apply_ready(child)
        await finish_run(rt, child)
        assert len(rt.runs) == 0 and rt.tree("root") is None
        assert not rt.router._history and len(rt.runs.tree) == 0


async def test_a_finished_child_of_a_running_parent_is_kept() -> None:
    async with Runtime(retain_finished=0) as rt:
        await start_run(rt, "parent")
        await _steered_run(rt, "child", parent="parent")
        # The parent may still wait on its child's result by id.
        assert rt.runs.get("child") is not None
        tree = rt.tree("parent")
        assert tree is not None and [c.info.run_id for c in tree.children] == ["child"]


async def test_forget_releases_a_finished_run_and_its_subtree_at_once() -> None:
    async with Runtime() as rt:
        await start_run(rt, "root")
        await start_run(rt, "child", parent="root")
        await _steered_run(rt, "grandchild", parent="child")
        await finish_run(rt, rt.runs.get("child"))  # type: ignore[arg-type]
        rt.forget("child")
        assert "child" not in rt.runs and "grandchild" not in rt.runs
        assert rt.steering_history("grandchild") == []
        tree = rt.tree("root")
        assert tree is not None and tree.children == []
        rt.forget("nobody")  # unknown: nothing to do
        await finish_run(rt, rt.runs.get("root"))  # type: ignore[arg-type]
        rt.forget("root")
        assert rt.tree("root") is None and len(rt.runs) == 0
        rt.forget("root")  # already released: nothing to do
        assert rt.runs.retained == 0


async def test_forget_refuses_a_run_that_is_running_or_has_a_running_descendant() -> None:
    async with Runtime() as rt:
        root = await start_run(rt, "root")
        await start_run(rt, "child", parent="root")
        await finish_run(rt, root)
        with pytest.raises(ConfigurationError, match="child is still running"):
            rt.forget("root")
        with pytest.raises(ConfigurationError, match="still running"):
            rt.forget("child")
        assert "root" in rt.runs and "child" in rt.runs


async def test_a_deferred_thread_command_is_not_released_with_the_runs() -> None:
    async with Runtime(retain_finished=0, testing=True) as rt:
        cmd = make_command(target=SteeringTarget.thread("t-1"))
        assert (await rt.submit(cmd)).status == "deferred"
        await _steered_run(rt, "other", thread_id="t-2")
        assert len(rt.runs) == 0
        assert rt.router.state(cmd.correlation_id) == "deferred"
        later = await start_run(rt, "later", thread_id="t-1")
        assert [c.correlation_id for c in apply_ready(later)] == [cmd.correlation_id]
        assert rt.router.state(cmd.correlation_id) == "applied"
        await finish_run(rt, later)
        assert len(rt.runs) == 0 and not rt.router._waiting and not rt.runs._threads


async def test_a_released_runs_history_is_read_from_the_store(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    async with Runtime(store=f"sqlite:///{db}", retain_finished=0) as rt:
        await _steered_run(rt, "r-1")
        assert rt.runs.get("r-1") is None and rt.steering_history("r-1") == []
        history = await rt.load_steering_history("r-1")
        assert [e.type for e in history] == [
            "steering.requested",
            "steering.accepted",
            "steering.requested",
            "steering.accepted",
            "steering.delivered",
            "steering.delivered",
            "steering.applied",
            "steering.applied",
        ]
    store = SqliteStore(db)
    await store.open()
    try:  # the released run's snapshot was saved too
        assert [r["run_id"] for r in await store.load_runs()] == ["r-1"]
    finally:
        await store.close()


async def test_a_released_runs_final_state_reaches_the_shared_store_while_it_runs_on(
    tmp_path: Path,
) -> None:
    # a released run's final snapshot waited for 256 more or for close: other processes on
    # the store listed it "running" meanwhile (and forever, if this one was then killed)
    db = tmp_path / "x.db"
    async with Runtime(store=f"sqlite:///{db}", retain_finished=0) as rt:
        await _steered_run(rt, "r-1")
        assert rt.runs.get("r-1") is None
        reader = SqliteStore(db)
        await reader.open()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60  # the runtime's snapshot tick (a bound against hangs)
            while loop.time() < deadline:
                snapshot = await reader.load_run("r-1")
                if snapshot is not None and snapshot["status"] == "completed":
                    break
                await asyncio.sleep(0.05)
            assert snapshot is not None and snapshot["status"] == "completed"
            await _steered_run(rt, "r-2")
            await rt.flush()  # at once, on request
            snapshot = await reader.load_run("r-2")
            assert snapshot is not None and snapshot["status"] == "completed"
        finally:
            await reader.close()


async def test_without_a_store_a_released_runs_history_is_gone() -> None:
    async with Runtime(retain_finished=0) as rt:
        await _steered_run(rt, "r-1")
        assert await rt.load_steering_history("r-1") == []


async def test_duplicates_are_answered_within_the_horizon_after_release() -> None:
    async with Runtime(retain_finished=0, dedupe_horizon=5) as rt:
        first = make_command("r-1")
        handle = await start_run(rt, "r-1")
        await rt.submit(first)
        apply_ready(handle)
        await finish_run(rt, handle)
        assert "r-1" not in rt.runs
        assert (await rt.submit(first)).status == "duplicate"
        live = await start_run(rt, "live")
        for _ in range(5):
            await rt.submit(make_command("live"))
        apply_ready(live)
        # Past the horizon the id is forgotten: the command is judged anew (its run is gone).
        again = await rt.submit(first)
        assert again.status == "rejected" and "not found" in (again.reason or "")
        assert len(rt.router._seen) <= 5 and len(rt.router._terminal) <= 5


async def test_an_open_commands_id_is_never_forgotten() -> None:
    async with Runtime(dedupe_horizon=2) as rt:
        await start_run(rt, "r-1")
        pending = make_command("r-1")
        await rt.submit(pending)
        for _ in range(4):
            await rt.submit(make_command("r-1"))
        assert (await rt.submit(pending)).status == "duplicate"


async def test_more_open_commands_than_the_horizon_keep_every_id_taken() -> None:
    """Past the horizon with every older id open, the id being submitted was the one
    forgotten: a resend of it (still open) was taken as new, replaced the first in the
    router's books, and the run failed at delivery ("command ... is not open")."""
    async with Runtime(dedupe_horizon=2) as rt:
        handle = await start_run(rt, "r-1")
        sent = [make_command("r-1", correlation_id=f"c-{n}") for n in range(4)]
        for cmd in sent:
            assert (await rt.submit(cmd)).accepted
        for cmd in sent:
            assert (await rt.submit(cmd)).status == "duplicate"
        assert [c.correlation_id for c in apply_ready(handle)] == ["c-0", "c-1", "c-2", "c-3"]
        assert not rt.router.open_commands()
        await finish_run(rt, handle)


async def test_duplicates_are_answered_by_the_store_past_the_horizon(tmp_path: Path) -> None:
    async with Runtime(
        store=f"sqlite:///{tmp_path / 'x.db'}", retain_finished=0, dedupe_horizon=1
    ) as rt:
        first = make_command("r-1")
        handle = await start_run(rt, "r-1")
        await rt.submit(first)
        apply_ready(handle)
        await finish_run(rt, handle)
        for n in range(3):
            await _steered_run(rt, f"r-{n + 2}", commands=1)
        assert len(rt.router._seen) <= 1
        assert (await rt.submit(first)).status == "duplicate"


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "sqlite"])
async def test_memory_is_flat_in_the_number_of_finished_runs(tmp_path: Path, durable: bool) -> None:
    store = f"sqlite:///{tmp_path / 'x.db'}" if durable else None
    async with Runtime(store, retain_finished=10, dedupe_horizon=50) as rt:
        for n in range(300):
            root = await start_run(rt, f"r-{n}", thread_id=f"t-{n}")
            await _steered_run(rt, f"c-{n}", parent=f"r-{n}")
            await rt.submit(make_command(f"r-{n}"))
            apply_ready(root)
            await finish_run(rt, root)
        router, registry = rt.router, rt.runs
        assert len(registry) == 10 and len(registry.tree) == 10 and registry.retained == 10
        assert len(router._history) <= 10 and len(registry._threads) <= 10
        assert not registry._live and len(registry._finished) == 5
        assert len(router._seen) <= 50 and len(router._terminal) <= 50
        assert len(router._seen_order) <= 51
        assert not router._tracked and not router._waiting


@pytest.mark.parametrize(
    "bad",
    [
        {"retain_finished": -1},
        {"retain_finished_s": -1.0},
        {"dedupe_horizon": 0},
        # of the wrong kind: a TypeError from a comparison, or taken (NaN released every
        # finished run at once, True kept one, 2.5 was a horizon of three ids)
        {"retain_finished": "5"},
        {"retain_finished": True},
        {"retain_finished": 2.5},
        {"retain_finished": float("nan")},
        {"retain_finished_s": "1"},
        {"retain_finished_s": float("nan")},
        {"retain_finished_s": True},
        {"dedupe_horizon": "9"},
        {"dedupe_horizon": 2.5},
        {"dedupe_horizon": True},
    ],
)
def test_bad_retention_settings_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        Runtime(**bad)  # type: ignore[arg-type]


async def test_a_run_reopened_while_its_tree_left_the_window_is_released_when_it_ends() -> None:
    """An END_OF_TURN message reopens a finished run; another run finishing meanwhile sweeps
    its tree from the window (not released: a run of it is going). When the reopened run
    ended again, its tree never re-entered the window: held for ever."""
    from tinyagents import Agent
    from tinyagents.protocol import SteeringDelivery
    from tinyagents.testkit import FunctionModel, Gate, ScriptedModel, reply

    async with Runtime(retain_finished=1) as rt:
        gate = Gate("second turn")
        turns = 0

        async def answer(request: object) -> object:
            nonlocal turns
            turns += 1
            if turns == 2:
                await gate.wait()
            return reply(f"turn {turns}")

        handle = await rt.start(Agent("talker", FunctionModel(answer)), "hi")
        await handle.result()
        await handle.steer("one more thing", delivery=SteeringDelivery.END_OF_TURN)  # reopens
        await gate.entered.wait()
        filler = await rt.start(Agent("filler", ScriptedModel([reply("x")])), "go")
        await filler.result()
        await rt.release_finished()
        assert handle.run_id in rt.runs  # going: not released
        gate.open()
        assert (await handle.result()).output == "turn 2"
        for _ in range(2):
            await (await rt.start(Agent("filler", ScriptedModel([reply("x")])), "go")).result()
        await rt.release_finished()
        assert handle.run_id not in rt.runs and len(rt.runs) == 1


async def test_a_command_logged_while_its_run_is_released_leaves_no_history_behind(
    tmp_path: Path,
) -> None:
    """The store's write of a command was under way while its run finished and was released
    (retain_finished=0): its events started a steering history for the released run that
    nothing dropped again. A run a command is being submitted to is now kept until the
    command has its outcome, and released by the next pass of the window."""
    from tinyagents import Agent
    from tinyagents.testkit import Gate

    async with Runtime(f"sqlite:///{tmp_path / 'x.db'}", retain_finished=0) as rt:
        gate, writing, go_on = Gate("model"), asyncio.Event(), asyncio.Event()
        append = rt.store.append_command

        async def slow_append(cmd: Any, **kw: Any) -> bool:  # the real write, held back
            writing.set()
            await go_on.wait()
            return await append(cmd, **kw)

        rt.store.append_command = slow_append  # type: ignore[method-assign]
        handle = await rt.start(Agent("a", gate.model("x")), "go")
        await gate.entered.wait()
        late = asyncio.create_task(handle.steer("late one", check=False))
        await writing.wait()
        gate.open()
        try:
            await handle.result()
            assert handle.run_id in rt.runs  # kept: a command is on its way to it
        finally:
            go_on.set()
        await late
        assert await rt.release_finished() == 1
        assert handle.run_id not in rt.runs  # released
        assert rt.steering_history(handle.run_id) == []
        assert not [run_id for run_id in rt.router._history if run_id not in rt.runs]
