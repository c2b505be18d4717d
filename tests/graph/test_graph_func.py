"""``@entrypoint`` and ``@task`` (``tinyagents.graph.func``) on our own terms: an entrypoint is
a ``CompiledGraph`` run with ``run``/``stream``/``get_state``, steerable in a ``Runtime``; task
calls are sub-graph calls saved with the thread. (The side-by-side ports with LangGraph are in
``test_langgraph_ports_func.py``.)"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Any, TypedDict

import pytest

from tinyagents import Runtime
from tinyagents.errors import ConfigurationError, GraphError
from tinyagents.graph import (
    END,
    START,
    Command,
    CompiledGraph,
    Entrypoint,
    RetryPolicy,
    StateGraph,
    StateUpdate,
    entrypoint,
    interrupt,
    task,
)
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.runs import RunStatus
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer
from tinyagents.testkit import EventWaiter


async def test_an_entrypoint_is_a_compiled_graph_of_one_node(checkpointer: Checkpointer) -> None:
    calls: list[int] = []

    @task
    def add_one(x: int) -> int:
        calls.append(x)
        return x + 1

    @entrypoint(checkpointer=checkpointer)
    async def flow(x: int) -> dict[str, Any]:
        return {"sum": await add_one(x) + await add_one(x * 10)}

    assert isinstance(flow, Entrypoint) and isinstance(flow, CompiledGraph)
    assert list(flow.nodes) == ["flow"] and flow.name == "flow"
    result = await flow.run(1, thread_id="t")
    assert result.status == "completed"
    assert result.state == {"sum": 13}  # the return value: the user's view of the state
    state = await flow.get_state("t", subgraphs=True)
    assert state.values == {"sum": 13} and state.next == ()  # LangGraph's: the return value
    # the thread's own checkpoints are a graph's: its input, the step applying it, the node's
    assert [h.source for h in await flow.history("t")] == ["loop", "loop", "input"]
    assert calls == [1, 10]


async def test_a_stream_yields_the_entrypoints_update(checkpointer: Checkpointer) -> None:
    @task
    async def shout(text: str) -> str:
        return text.upper()

    @entrypoint(checkpointer=checkpointer)
    async def flow(text: str) -> str:
        return await shout(text)

    items = [item async for item in flow.stream("hi", thread_id="t", mode="updates")]
    assert items == [{"shout": "HI"}, {"flow": "HI"}]  # LangGraph's: the task's, the node's
    nested = [
        item async for item in flow.stream("yo", thread_id="t", mode="updates", subgraphs=True)
    ]
    assert nested == [((), {"shout": "YO"}), ((), {"flow": "YO"})]
    # the task call has no values of its own (LangGraph's task shows none)
    both = [i async for i in flow.stream("ho", thread_id="t", mode=["values"], subgraphs=True)]
    assert both == [((), "values", "HO")]
    # its tasks items are LangGraph's: the call's (args, kwargs) and result, the node's
    tasks = [i async for i in flow.stream("x", thread_id="t", mode="tasks")]
    assert [(i["name"], i.get("input", i.get("result"))) for i in tasks] == [
        ("flow", "x"),
        ("shout", (("x",), {})),
        ("shout", {"__return__": "X"}),
        ("flow", {"__end__": "X"}),
    ]


async def test_an_entrypoints_stream_with_a_runtime_and_one_left_early(
    checkpointer: Checkpointer,
) -> None:
    # the stream with runtime= is translated too; one left after its first item lets go of
    # the thread (the next run of it does not wait)
    @task
    async def shout(text: str) -> str:
        return text.upper()

    @entrypoint(checkpointer=checkpointer)
    async def flow(text: str) -> str:
        return await shout(text) + "!"

    async with Runtime(testing=True) as rt:
        items = [i async for i in flow.stream("a", thread_id="t", mode="updates", runtime=rt)]
    assert items == [{"shout": "A"}, {"flow": "A!"}]
    async for item in flow.stream("b", thread_id="t", mode=["updates", "values"]):
        assert item == ("updates", {"shout": "B"})
        break
    assert await asyncio.wait_for(flow.ainvoke("c", thread_id="t"), 30) == "C!"
    assert (await flow.get_state("t")).values == "C!"


async def test_tasks_that_pause_together_are_asked_together(
    checkpointer: Checkpointer,
) -> None:
    asked: list[str] = []

    @task
    def ask(who: str) -> str:
        asked.append(who)
        return f"{who}={interrupt(who)}"

    @entrypoint(checkpointer=checkpointer)
    async def flow(names: list[str]) -> list[str]:
        futures = [ask(n) for n in names]
        return [await f for f in futures]

    paused = await flow.run(["ann", "bob"], thread_id="t")
    assert paused.status == "interrupted"
    assert sorted(i.value for i in paused.interrupts) == ["ann", "bob"]
    assert [i.ns.split(":")[0] for i in paused.interrupts] == ["flow", "flow"]
    # get_state shows the paused entrypoint's task asking both; its task calls have no
    # state of their own (LangGraph's are no sub-graphs)
    state = await flow.get_state("t", subgraphs=True)
    [paused_task] = state.tasks
    assert paused_task.name == "flow" and len(paused_task.interrupts) == 2
    assert paused_task.states == () and paused_task.state is None
    answers = {i.id: i.value.upper() for i in paused.interrupts}
    done = await flow.run(Command(resume=answers), thread_id="t")
    assert done.status == "completed" and done.state == ["ann=ANN", "bob=BOB"]


async def test_a_task_left_unawaited_still_runs_and_its_question_pauses(
    checkpointer: Checkpointer,
) -> None:
    ran: list[str] = []

    @task
    def side(x: int) -> None:
        ran.append(f"side {interrupt('go on?')}")

    @entrypoint(checkpointer=checkpointer)
    async def flow(x: int) -> int:
        side(x)  # never awaited: it runs all the same, as LangGraph's
        return x

    paused = await flow.run(1, thread_id="t")
    assert paused.status == "interrupted" and [i.value for i in paused.interrupts] == ["go on?"]
    done = await flow.run(Command(resume="yes"), thread_id="t")
    assert done.status == "completed" and done.state == 1
    assert ran == ["side yes"]


async def test_a_task_called_from_a_graph_node_is_saved_with_the_thread(
    checkpointer: Checkpointer,
) -> None:
    calls: list[int] = []

    @task
    async def square(x: int) -> int:
        calls.append(x)
        return x * x

    async def node(state: dict[str, Any]) -> dict[str, Any]:
        total = sum(await asyncio.gather(*(square(x) for x in state["xs"])))
        return {"total": f"{total} {interrupt('ok?')}"}

    class State(TypedDict, total=False):
        xs: list[int]
        total: str

    graph = StateGraph(State).add_node("sum", node).add_edge(START, "sum").add_edge("sum", END)
    compiled = graph.compile(checkpointer=checkpointer)
    assert (await compiled.run({"xs": [1, 2, 3]}, thread_id="t")).status == "interrupted"
    done = await compiled.run(Command(resume="fine"), thread_id="t")
    assert done.state["total"] == "14 fine" and sorted(calls) == [1, 2, 3]


async def test_without_a_checkpointer_tasks_run_and_interrupt_is_an_error() -> None:
    @task
    def double(x: int) -> int:
        return 2 * x

    @entrypoint()
    def flow(x: int) -> int:
        return double(x).result() + double(x + 1).result()

    assert await flow.ainvoke(1) == 6

    @entrypoint()
    def asks(x: int) -> Any:
        return interrupt("q")

    result = await asks.run(1)
    assert result.status == "failed" and isinstance(result.error, GraphError)


async def test_misuse_is_said_plainly() -> None:
    @task
    def double(x: int) -> int:
        return 2 * x

    with pytest.raises(GraphError, match="outside a running @entrypoint"):
        double(1)

    @task
    async def slow(x: int) -> int:
        await asyncio.sleep(0)
        return x

    @entrypoint(checkpointer=MemoryCheckpointer())
    async def flow(x: int) -> int:
        return slow(x).result()  # an async entrypoint awaits its tasks

    result = await flow.run(1, thread_id="t")
    assert result.status == "failed" and "cannot wait" in str(result.error)
    with pytest.raises(ValueError, match="at least one parameter"):
        entrypoint()(lambda: None)


def test_invoke_runs_without_an_event_loop() -> None:
    @entrypoint(checkpointer=MemoryCheckpointer())
    def flow(x: int, *, previous: Any = None) -> Any:
        return entrypoint.final(value=(x, previous), save=x * 2)

    config = {"configurable": {"thread_id": "t"}}
    assert flow.invoke(1, config) == (1, None)
    assert flow.invoke(5, config) == (5, 2)


# -- steering -------------------------------------------------------------------------------

HUMAN = SteeringActor.test()


@pytest.mark.parametrize("to", ["task", "run"])
@pytest.mark.parametrize("where", ["entrypoint", "task"])
async def test_steering_answers_an_entrypoints_question(
    checkpointer: Checkpointer, where: str, to: str
) -> None:
    calls: list[str] = []

    @task
    def draft(topic: str) -> str:
        calls.append("draft")
        return f"draft about {topic}"

    @task
    def sign(text: str) -> str:
        calls.append("sign")
        return f"{text}, signed by {interrupt('who signs?')}"

    @entrypoint(checkpointer=checkpointer)
    def flow(topic: str) -> str:
        text = draft(topic).result()
        if where == "task":
            return sign(text).result()
        return f"{text}, signed by {interrupt('who signs?')}"

    async with Runtime(testing=True) as rt:
        waiter = EventWaiter()
        rt.bus.add_sink(waiter)
        handle = await rt.start_graph(flow, "cats", thread_id="t")
        asked = await waiter.event("graph.interrupt", handle.run_id)
        assert asked.data["value"] == "who signs?"
        answer = SteeringCommand(
            target=SteeringTarget.graph_task(handle.run_id, asked.task_id)
            if to == "task"
            else SteeringTarget.agent_run(handle.run_id),
            actor=HUMAN,
            kind=SteeringKind.PROVIDE_CONTEXT,
            payload={"value": "ana"},
        )
        receipt = await rt.submit(answer)
        assert receipt.status.value == "accepted"
        result = await handle.result()
    assert result.status == RunStatus.COMPLETED
    assert result.output == "draft about cats, signed by ana"
    # the finished draft was not written again when the entrypoint ran again
    assert calls.count("draft") == 1


async def test_an_entrypoint_as_a_node_takes_the_state_and_returns_the_update(
    checkpointer: Checkpointer,
) -> None:
    calls: list[str] = []

    @task
    def polish(text: str) -> str:
        calls.append(text)
        return text.title()

    @entrypoint()
    def editor(state: dict[str, Any]) -> dict[str, Any]:
        text = polish(state["text"]).result()
        return {"text": f"{text} ({interrupt('publish?')})"}

    class Doc(TypedDict, total=False):
        text: str

    graph = StateGraph(Doc).add_node(editor).add_edge(START, "editor").add_edge("editor", END)
    compiled = graph.compile(checkpointer=checkpointer)
    paused = await compiled.run({"text": "a cat"}, thread_id="t")
    assert paused.status == "interrupted" and paused.interrupts[0].value == "publish?"
    done = await compiled.run(Command(resume="yes"), thread_id="t")
    assert done.state == {"text": "A Cat (yes)"}
    assert calls == ["a cat"]  # the task that had finished was not run again


def test_the_example_drafts_once_and_counts_its_reports(tmp_path: Path, run_script: Any) -> None:
    example = Path(__file__).parents[2] / "examples" / "functional_api.py"
    done = run_script(example, tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1:4] == [
        "answer: accepted",
        "completed {'text': 'Intro: cats are great. Body: cats are great. -- signed by dana', "
        "'report_no': 1}",
        "drafted: ['intro', 'body']",
    ]
    assert lines[-1].endswith("signed by ana', 'report_no': 2}")


async def test_a_sync_task_waits_for_the_tasks_it_calls(checkpointer: Checkpointer) -> None:
    calls: list[str] = []

    @task
    def inner(x: int) -> int:
        calls.append("inner")
        return x + 1

    @task
    def outer(x: int) -> int:
        calls.append("outer")
        return inner(x).result() * 2  # a sync task runs on a thread of its own: it may wait

    @entrypoint(checkpointer=checkpointer)
    def flow(x: int) -> str:
        return f"{outer(x).result()} {interrupt('ok?')}"

    assert (await flow.run(1, thread_id="t")).status == "interrupted"
    done = await flow.run(Command(resume="ok"), thread_id="t")
    assert done.state == "4 ok" and calls == ["outer", "inner"]

    async def node(state: dict[str, Any]) -> dict[str, Any]:
        return {"n": await outer(state["n"])}  # from a graph node too

    class N(TypedDict):
        n: int

    graph = StateGraph(N).add_node("n", node).add_edge(START, "n").add_edge("n", END)
    result = await graph.compile(checkpointer=checkpointer).run({"n": 2}, thread_id="g")
    assert result.state == {"n": 6}


async def test_a_cancelled_sync_entrypoints_thread_starts_no_task(
    checkpointer: Checkpointer,
) -> None:
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()
    ran: list[int] = []
    refused: list[GraphError] = []

    @task
    def late(x: int) -> None:
        ran.append(x)

    @entrypoint(checkpointer=checkpointer)
    def flow(x: int) -> None:
        try:
            entered.set()
            release.wait()
            try:
                late(x)
            except GraphError as exc:
                refused.append(exc)
        finally:
            finished.set()

    running = asyncio.create_task(flow.run(1, thread_id="t"))
    await asyncio.to_thread(entered.wait)
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    release.set()  # the thread, left behind, goes on
    await asyncio.to_thread(finished.wait)
    assert ran == [] and "after its entrypoint's run stopped" in str(refused[0])


async def test_a_tasks_name_and_retry_policy(checkpointer: Checkpointer) -> None:
    attempts: list[int] = []

    @task(name="fetch", retry_policy=RetryPolicy(max_attempts=3, retry_on=ConnectionError))
    def flaky(x: int) -> int:
        attempts.append(x)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return x

    @entrypoint(checkpointer=checkpointer)
    def flow(x: int) -> int:
        return flaky(x).result()

    items = [i async for i in flow.stream(7, thread_id="t", mode="updates", subgraphs=True)]
    assert items == [((), {"fetch": 7}), ((), {"flow": 7})]
    assert attempts == [7, 7, 7]


async def test_a_retried_entrypoint_does_not_run_its_finished_tasks_again(
    checkpointer: Checkpointer,
) -> None:
    calls: list[str] = []

    @task
    def step(name: str) -> str:
        calls.append(name)
        return name

    @entrypoint(checkpointer=checkpointer, retry_policy=RetryPolicy(retry_on=ConnectionError))
    def flow(x: int) -> list[str]:
        first = step("first").result()
        if calls.count("first") == 1 and len(calls) == 1:
            calls.append("failed")
            raise ConnectionError("flaky")
        return [first, step("second").result()]

    result = await flow.run(1, thread_id="t")
    assert result.state == ["first", "second"]
    assert calls == ["first", "failed", "second"]


async def test_a_started_entrypoints_result_and_stream_show_its_values(
    checkpointer: Checkpointer,
) -> None:
    # run(runtime=), rt.start_graph's result and handle.stream() show the function's view:
    # its return value, as graph.stream and get_state do (not the internal input/output/
    # previous state)
    @task
    async def shout(text: str) -> str:
        return text.upper()

    @entrypoint(checkpointer=checkpointer)
    async def flow(text: str) -> str:
        loud = await shout(text)
        return f"{loud} {interrupt('more?')}"

    async with Runtime(testing=True) as rt:
        paused = await flow.run("a", thread_id="r", runtime=rt)
        assert paused.status == "interrupted" and paused.state is None  # nothing returned yet
        handle = await rt.start_graph(flow, Command(resume="yes"), thread_id="r")
        items = [i async for i in handle.stream(["updates", "values", "tasks"], subgraphs=True)]
        result = await handle.result()
    assert result.status == RunStatus.COMPLETED and result.output == "A yes"
    assert [(ns, mode, p) for ns, mode, p in items if mode != "tasks"] == [
        ((), "values", None),
        ((), "updates", {"flow": "A yes"}),
        ((), "values", "A yes"),
    ]
    # the node's input and result, and the start (alone) of the task call it had finished
    assert [p.get("input", p.get("result")) for _, mode, p in items if mode == "tasks"] == [
        "a",
        (("a",), {}),
        {"__end__": "A yes"},
    ]
    again = await flow.run("b", thread_id="r")
    assert again.status == "interrupted" and again.state == "A yes"  # the last return value


async def test_update_state_writes_what_the_function_returns(checkpointer: Checkpointer) -> None:
    @entrypoint(checkpointer=checkpointer)
    def flow(x: int, previous: Any = None) -> Any:
        return entrypoint.final(value=[x, previous], save=x)

    await flow.run(1, thread_id="t")
    await flow.update_state("t", entrypoint.final(value="shown", save=10))
    assert (await flow.get_state("t")).values == "shown"
    assert (await flow.run(2, thread_id="t")).state == [2, 10]
    await flow.bulk_update_state("t", [[StateUpdate(values="bulk")]])
    assert (await flow.get_state("t")).values == "bulk"
    assert await flow.ainvoke(3, thread_id="t") == [3, "bulk"]


async def test_a_task_named_as_a_graphs_node_is_no_task(checkpointer: Checkpointer) -> None:
    # a task call is known by its graph, not by its name: a node of a graph called inside,
    # named as a task and writing only "output", shows as that graph's, under its namespace
    @task
    def step(x: int) -> int:
        return x + 1

    class Out(TypedDict):
        output: int

    def node(state: Out) -> Out:
        return {"output": state["output"] * 10}

    inner = StateGraph(Out).add_node("step", node).add_edge(START, "step")
    sub = inner.add_edge("step", END).compile()

    @entrypoint(checkpointer=checkpointer)
    async def flow(x: int) -> int:
        out: int = (await sub.run({"output": await step(x)})).state["output"]
        return out

    flat = [i async for i in flow.stream(1, thread_id="t", mode="updates")]
    assert flat == [{"step": 2}, {"flow": 20}]
    nested = [i async for i in flow.stream(1, thread_id="u", mode="updates", subgraphs=True)]
    assert [(ns != (), p) for ns, p in nested] == [
        (False, {"step": 2}),
        (True, {"step": {"output": 20}}),
        (False, {"flow": 20}),
    ]


async def test_an_entrypoint_streams_updates_by_default_through_every_door(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's entrypoint has stream_mode "updates": stream(), with runtime= too, and a
    # stream called inside another entrypoint; a started run's handle.stream() keeps values
    @entrypoint()
    async def inner(text: str) -> str:
        return text + "?"

    @entrypoint(checkpointer=checkpointer)
    async def flow(text: str) -> str:
        return "".join([str(item) async for item in inner.stream(text)]) + "!"

    assert [i async for i in flow.stream("a", thread_id="t")] == [{"flow": "{'inner': 'a?'}!"}]
    async with Runtime(testing=True) as rt:
        items = [i async for i in flow.stream("b", thread_id="u", runtime=rt)]
    assert items == [{"flow": "{'inner': 'b?'}!"}]


async def test_update_state_as_input_saves_an_entrypoints_input(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's update_state(config, "hi", as_node="__input__") then stream(None): the
    # function runs on "hi"
    @entrypoint(checkpointer=checkpointer)
    def flow(text: str) -> str:
        return text.upper() + "!"

    await flow.update_state("t", "hi", as_node="__input__")
    snap = await flow.get_state("t")
    assert snap.values is None and snap.metadata["source"] == "input"
    assert [i async for i in flow.stream(None, thread_id="t")] == [{"flow": "HI!"}]
    assert (await flow.get_state("t")).values == "HI!"


async def test_an_entrypoint_takes_run_and_stream_as_any_graph_with_its_own_default_mode() -> None:
    # one signature each (CompiledGraph's): the entrypoint only says its stream_mode, and
    # run's result shows the function's value as the base shows any graph's state; an
    # explicit mode=None is a bad mode here too (tests/graph/test_hostile_stream_modes.py)
    assert "stream" not in Entrypoint.__dict__ and "run" not in Entrypoint.__dict__
    assert (Entrypoint.stream_mode, CompiledGraph.stream_mode) == ("updates", "values")

    @entrypoint()
    async def flow(x: int) -> int:
        return x + 1

    assert [i async for i in flow.stream(1)] == [{"flow": 2}]
    assert [i async for i in flow.stream(1, mode="values")] == [2]
    assert (await flow.run(1)).state == 2
    with pytest.raises(ConfigurationError):
        flow.stream(1, mode=None)  # type: ignore[arg-type]
