"""LangGraph's functional API (``langgraph.func``: ``@entrypoint``, ``@task``): the same
program on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``
(each test's comment names the LangGraph test it follows, in
``libs/langgraph/tests/test_pregel.py`` / ``test_pregel_async.py``).

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture). Both are called with ``ainvoke(input, config)``, and streamed
(``astream`` / ``stream``) and read (``aget_state`` / ``get_state``) where their views are compared.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, TypedDict

import pytest
from langgraph_kit import OURS as OURS_GRAPH
from langgraph_kit import THEIRS as THEIRS_GRAPH
from langgraph_kit import cfg, lg_memory, shape

from tinyagents.graph import entrypoint, task
from tinyagents.store.checkpoint import Checkpointer

lg_func = pytest.importorskip("langgraph.func")

OURS = SimpleNamespace(**vars(OURS_GRAPH), entrypoint=entrypoint, task=task)
THEIRS = SimpleNamespace(**vars(THEIRS_GRAPH), entrypoint=lg_func.entrypoint, task=lg_func.task)


def shown(out: Any) -> Any:
    """An ``ainvoke`` result, the same for both libraries: a paused run as its questions."""
    if isinstance(out, dict) and "__interrupt__" in out:
        return ("interrupted", [i.value for i in out["__interrupt__"]])
    return out


async def ainvoke(graph: Any, item: Any) -> Any:
    """``graph.ainvoke(item, config)``; for one of our ``StateGraph``s, which has ``run``
    instead, its state (with the questions, as LangGraph's ``__interrupt__``)."""
    if hasattr(graph, "ainvoke"):
        return await graph.ainvoke(item, cfg("1"))
    result = (await graph.run(item, thread_id="1")).raise_for_status()
    if result.status == "interrupted":
        return {**result.state, "__interrupt__": result.interrupts}
    return result.state


async def both(
    build: Any, checkpointer: Checkpointer, inputs: list[Any]
) -> tuple[list[Any], list[Any]]:
    """``build(g, cp, calls)`` made on both libraries and given ``inputs`` in turn on one
    thread (a ``("resume", x)`` input is ``Command(resume=x)``); each library's outputs and
    calls must be the same (tasks that run together may start their work in either order:
    compared sorted): returns them (ours)."""
    seen: list[tuple[list[Any], list[Any]]] = []
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        calls: list[Any] = []
        graph = build(g, cp, calls)
        outs = []
        for item in inputs:
            if isinstance(item, tuple) and item[0] == "resume":
                item = g.Command(resume=item[1])
            outs.append(shown(await ainvoke(graph, item)))
        seen.append((outs, calls))
    (ours, our_calls), (theirs, their_calls) = seen
    assert ours == theirs
    assert sorted(our_calls, key=repr) == sorted(their_calls, key=repr)
    return seen[0]


def mapper_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    async def mapper(input: int) -> str:
        calls.append(input)
        await asyncio.sleep(0)
        return str(input) * 2

    @g.entrypoint(checkpointer=cp)
    async def graph(input: list[int]) -> list[str]:
        mapped = await asyncio.gather(*[mapper(i) for i in input])
        answer = g.interrupt("question")
        return [m + answer for m in mapped]

    return graph


async def test_finished_tasks_do_not_run_again_on_resume(checkpointer: Checkpointer) -> None:
    # test_imp_task (async): tasks gathered, then an interrupt in the entrypoint; the
    # resume runs the entrypoint again from its top, and the mapped results come back saved
    outs, calls = await both(mapper_graph, checkpointer, [[0, 1], ("resume", "answer")])
    assert outs == [("interrupted", ["question"]), ["00answer", "11answer"]]
    assert sorted(calls) == [0, 1]


def foo_bar_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    def foo(state: dict[str, str]) -> dict[str, str]:
        calls.append("foo")
        return {"a": state["a"] + "foo"}

    @g.task
    def bar(state: dict[str, str]) -> dict[str, str]:
        calls.append("bar")
        value = g.interrupt("Please provide value")
        return {"a": state["a"] + "bar" + value}

    @g.entrypoint(checkpointer=cp)
    def graph(inputs: dict[str, str]) -> dict[str, str]:
        return bar(foo(inputs).result()).result()

    return graph


async def test_an_interrupt_inside_a_task(checkpointer: Checkpointer) -> None:
    # test_interrupt_task_functional: the task that asked runs again with the answer; the one
    # before it does not
    outs, calls = await both(foo_bar_graph, checkpointer, [{"a": ""}, ("resume", "bar")])
    assert outs == [("interrupted", ["Please provide value"]), {"a": "foobarbar"}]
    assert calls == ["foo", "bar", "bar"]


def doubling_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    @g.entrypoint(checkpointer=cp)
    def graph(_: Any) -> list[Any]:
        values: list[Any] = []
        for idx in [1, 2, 3]:
            values.append(double(idx).result())
            values.append(g.interrupt({"a": "boo"}))
        return values

    return graph


async def test_several_interrupts_in_turn(checkpointer: Checkpointer) -> None:
    # test_multiple_interrupts_functional: each resume answers the next question; each
    # task call runs once
    inputs = [{}, ("resume", "a"), ("resume", "b"), ("resume", "c")]
    outs, calls = await both(doubling_graph, checkpointer, inputs)
    assert outs[-1] == [2, "a", 4, "b", 6, "c"]
    assert outs[:3] == [("interrupted", [{"a": "boo"}])] * 3
    assert calls == [1, 2, 3]


def saving_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.entrypoint(checkpointer=cp)
    def graph(inputs: int, *, previous: Any) -> Any:
        previous = previous or 0
        calls.append(previous)
        return g.entrypoint.final(value=previous, save=previous + inputs)

    return graph


async def test_final_saves_what_previous_reads(checkpointer: Checkpointer) -> None:
    # test_entrypoint_final (entrypoint.final(value, save) and the previous parameter)
    outs, _ = await both(saving_graph, checkpointer, [1, 2, 3])
    assert outs == [0, 1, 3]


def previous_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.entrypoint(checkpointer=cp)
    async def graph(number: int, previous: Any = None) -> list[Any]:
        return [number, previous]

    return graph


async def test_previous_is_the_last_return_value(checkpointer: Checkpointer) -> None:
    # the entrypoint docstring's "Accessing the previous return value"
    outs, _ = await both(previous_graph, checkpointer, [1, 2])
    assert outs == [[1, None], [2, [1, None]]]


def mixed_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    async def slow_add(x: int) -> int:
        calls.append(("async", x))
        return x + 1

    @g.task
    def plain_add(x: int) -> int:
        calls.append(("sync", x))
        return x + 10

    @g.entrypoint(checkpointer=cp)
    def graph(x: int) -> int:
        first = slow_add(x)  # an async task from a sync entrypoint
        second = plain_add(x)
        return first.result() + second.result()

    return graph


async def test_async_tasks_in_a_sync_entrypoint(checkpointer: Checkpointer) -> None:
    # test_imp_sync_from_async (its mirror): both kinds of task in a sync entrypoint
    outs, calls = await both(mixed_graph, checkpointer, [1])
    assert outs == [13]
    assert sorted(calls) == [("async", 1), ("sync", 1)]


def failing_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    def boom(x: int) -> int:
        calls.append(x)
        raise ValueError(f"bad {x}")

    @g.entrypoint(checkpointer=cp)
    async def graph(x: int) -> str:
        try:
            await boom(x)
        except ValueError as exc:
            return f"caught {exc}"
        return "not reached"

    return graph


async def test_a_task_error_is_raised_where_it_is_awaited(checkpointer: Checkpointer) -> None:
    # a task's error reaches the entrypoint, which may catch it (test_imp_exception)
    outs, calls = await both(failing_graph, checkpointer, [3])
    assert outs == ["caught bad 3"]
    assert calls == [3]


class Doc(TypedDict, total=False):
    text: str


def editor_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    def polish(text: str) -> str:
        calls.append(text)
        return text.title()

    @g.entrypoint()
    def editor(state: dict[str, Any]) -> dict[str, Any]:
        text = polish(state["text"]).result()
        return {"text": f"{text} ({g.interrupt('publish?')})"}

    graph = g.StateGraph(Doc).add_node("editor", editor)
    return graph.add_edge(g.START, "editor").add_edge("editor", g.END).compile(checkpointer=cp)


async def test_an_entrypoint_as_a_graph_node(checkpointer: Checkpointer) -> None:
    # an entrypoint added to a StateGraph: it takes the state and returns the node's update;
    # its finished task is not run again when the node resumes
    outs, calls = await both(editor_graph, checkpointer, [{"text": "a cat"}, ("resume", "yes")])
    assert outs == [("interrupted", ["publish?"]), {"text": "A Cat (yes)"}]
    assert calls == ["a cat"]


def cancelling_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    started = {1: asyncio.Event()}

    @g.task
    async def mapper(input: int) -> str:
        calls.append(("call", input))
        if input == 1:
            started[1].set()
            try:
                await asyncio.Event().wait()  # until cancelled
            except asyncio.CancelledError:
                calls.append(("cancelled", input))
                raise
        return str(input) * 2

    @g.entrypoint(checkpointer=cp)
    async def graph(input: list[int]) -> list[str]:
        started[1] = asyncio.Event()
        futures = [mapper(i) for i in input]
        await started[1].wait()
        futures.pop().cancel()  # cancel one
        mapped = await asyncio.gather(*futures)
        answer = g.interrupt("question")
        return [m + answer for m in mapped]

    return graph


async def test_a_cancelled_task_runs_again_on_resume(checkpointer: Checkpointer) -> None:
    # test_imp_task_cancel (an event instead of its sleeps): the cancelled call saved
    # nothing, so the resumed entrypoint runs it again (and cancels it again)
    outs, calls = await both(cancelling_graph, checkpointer, [[0, 1], ("resume", "answer")])
    assert outs == [("interrupted", ["question"]), ["00answer"]]
    assert sorted(calls) == [
        ("call", 0),
        ("call", 1),
        ("call", 1),
        ("cancelled", 1),
        ("cancelled", 1),
    ]


def nested_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    def submapper(input: int) -> str:
        calls.append(("sub", input))
        return str(input)

    @g.task
    async def mapper(input: int) -> str:
        calls.append(("map", input))
        return await submapper(input) * 2

    @g.entrypoint()
    async def add_a(input: list[str]) -> list[str]:
        return [it + "a" for it in input]

    @g.entrypoint(checkpointer=cp)
    async def graph(input: list[int]) -> list[str]:
        mapped = await asyncio.gather(*[mapper(i) for i in input])
        answer = g.interrupt("question")
        return await add_a.ainvoke([m + answer for m in mapped])

    return graph


async def test_tasks_calling_tasks_and_an_entrypoint_called_inside(
    checkpointer: Checkpointer,
) -> None:
    # test_imp_nested (its sub-graph an entrypoint; as written, with StateGraph(list[str]),
    # in test_langgraph_ports_root.py): a
    # task awaiting a task, none of them run again on resume
    outs, calls = await both(nested_graph, checkpointer, [[0, 1], ("resume", "answer")])
    assert outs == [("interrupted", ["question"]), ["00answera", "11answera"]]
    assert sorted(calls) == [("map", 0), ("map", 1), ("sub", 0), ("sub", 1)]


def chained_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task()
    def foo(state: dict[str, str]) -> dict[str, str]:
        return {"a": state["a"] + "foo", "b": "bar"}

    @g.task
    def bar(a: str, b: str, c: str | None = None) -> dict[str, str]:
        return {"a": a + b, "c": (c or "") + "bark"}

    @g.task()
    def baz(state: dict[str, str]) -> dict[str, str]:
        return {"a": state["a"] + "baz", "c": "something else"}

    @g.entrypoint(checkpointer=cp)
    def graph(state: dict[str, str]) -> dict[str, str]:
        foo_result = foo(state).result()
        fut_bar = bar(foo_result["a"], foo_result["b"])
        fut_baz = baz(fut_bar.result())
        return fut_baz.result()

    return graph


async def test_tasks_with_several_arguments_chained(checkpointer: Checkpointer) -> None:
    # test_imp_sync_from_async (its output; its stream items are the tasks' updates there,
    # under their calls' namespaces here)
    outs, _ = await both(chained_graph, checkpointer, [{"a": "0"}])
    assert outs == [{"a": "0foobarbaz", "c": "something else"}]


def plain(item: Any) -> Any:
    """A stream item (or a pair, or a namespaced one) with each ``Interrupt`` as its value,
    the same for both libraries."""
    if isinstance(item, tuple):
        return tuple(plain(i) for i in item)
    if isinstance(item, dict) and "__interrupt__" in item:
        return {**item, "__interrupt__": [i.value for i in item["__interrupt__"]]}
    return item


async def streamed(graph: Any, item: Any, thread: str, **kw: Any) -> list[Any]:
    """``graph.astream(item, config, stream_mode=...)`` (LangGraph's) or ``graph.stream(item,
    thread_id=..., mode=...)`` (ours), its items listed."""
    if hasattr(graph, "astream"):
        kw["stream_mode"] = kw.pop("mode")
        return [plain(i) async for i in graph.astream(item, cfg(thread), **kw)]
    return [plain(i) async for i in graph.stream(item, thread_id=thread, **kw)]


async def state_values(graph: Any, thread: str) -> tuple[Any, list[Any]]:
    """The thread's head values and its history's values, newest first (a value repeated by
    consecutive checkpoints once: ours has a checkpoint of its own for the input step)."""
    if hasattr(graph, "aget_state"):
        head = (await graph.aget_state(cfg(thread))).values
        listed = [s.values async for s in graph.aget_state_history(cfg(thread))]
    else:
        head = (await graph.get_state(thread)).values
        listed = [
            (await graph.get_state(thread, info.checkpoint_id)).values
            for info in await graph.history(thread)
        ]
    return head, [v for i, v in enumerate(listed) if i == 0 or listed[i - 1] != v]


def asking_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    def foo(x: int) -> int:
        calls.append(x)
        return x + 1

    @g.entrypoint(checkpointer=cp)
    def wf(x: int) -> dict[str, Any]:
        a = foo(x).result()
        return {"a": a, "v": g.interrupt("q")}

    return wf


def final_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    async def times_ten(x: int) -> int:
        calls.append(x)
        return x * 10

    @g.entrypoint(checkpointer=cp)
    async def awf(x: int, previous: Any = None) -> Any:
        a = await times_ten(x)
        return g.entrypoint.final(value=a, save=[a, previous])

    return awf


@pytest.mark.parametrize(
    "mode", ["values", "updates", ["values", "updates"], ["updates", "custom"]]
)
@pytest.mark.parametrize("build", [asking_graph, final_graph])
async def test_an_entrypoints_stream_and_state_are_its_return_values(
    checkpointer: Checkpointer, build: Any, mode: Any
) -> None:
    # LangGraph's entrypoint state is its return value (entrypoint.final's value): the
    # "values" items and get_state().values are it, the "updates" items {name: value}, a task
    # call's result {task: result}, an interrupt {"__interrupt__": (...)}
    seen = []
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        graph = build(g, cp, [])
        first = await streamed(graph, 1, "s", mode=mode)
        second_input = g.Command(resume="R") if build is asking_graph else 2
        second = await streamed(graph, second_input, "s", mode=mode)
        seen.append((first, second, await state_values(graph, "s")))
    assert seen[0] == seen[1]


async def test_an_entrypoints_stream_with_subgraphs_shows_task_updates_at_its_top(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's tasks write in the entrypoint's own Pregel: with subgraphs=True their
    # updates are led by the top's namespace, ()
    seen = []
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        graph = final_graph(g, cp, [])
        seen.append(await streamed(graph, 1, "s", mode="updates", subgraphs=True))
    assert seen[0] == seen[1] == [((), {"times_ten": 10}), ((), {"awf": 10})]


async def test_an_entrypoints_state_while_it_waits_is_its_last_return_value(
    checkpointer: Checkpointer,
) -> None:
    # get_state of a paused first run: None (nothing returned yet), as LangGraph's
    seen = []
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        graph = asking_graph(g, cp, [])
        await ainvoke(graph, 1)
        seen.append(await state_values(graph, "1"))
    assert seen[0] == seen[1] == (None, [None])


@pytest.mark.parametrize("mode", ["updates", ["values", "updates"]])
async def test_the_stream_of_tasks_calling_tasks_and_an_entrypoint_inside(
    checkpointer: Checkpointer, mode: Any
) -> None:
    # test_imp_nested's stream: a task's call of a task shows its update at the top too; the
    # entrypoint called inside shows none (tasks run together: compared sorted)
    seen = []
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        graph = nested_graph(g, cp, [])
        first = await streamed(graph, [0, 1], "s", mode=mode)
        second = await streamed(graph, g.Command(resume="answer"), "s", mode=mode)
        seen.append((sorted(first, key=repr), second))
    assert seen[0] == seen[1]


@pytest.mark.parametrize("mode", ["values", "updates", ["values", "updates"]])
async def test_the_stream_of_an_interrupt_inside_a_task(
    checkpointer: Checkpointer, mode: Any
) -> None:
    # test_interrupt_task_functional's stream: the task's question shows once, at the top
    seen = []
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        graph = foo_bar_graph(g, cp, [])
        first = await streamed(graph, {"a": ""}, "s", mode=mode)
        second = await streamed(graph, g.Command(resume="bar"), "s", mode=mode)
        seen.append((first, second, await state_values(graph, "s")))
    assert seen[0] == seen[1]


def tasks_item(item: Any, ids: dict[str, int]) -> Any:
    """A ``tasks`` stream item the same for both libraries: each id as the order it was first
    seen in (each library has its own ids), without LangGraph's ``triggers`` and
    ``response_schema``; a namespaced item's namespace without its task ids."""
    if isinstance(item, tuple):
        return (
            *(shape(i) if isinstance(i, tuple) else i for i in item[:-1]),
            tasks_item(item[-1], ids),
        )
    if not isinstance(item, dict) or "id" not in item:
        return plain(item)
    out = {k: v for k, v in item.items() if k != "triggers"}
    out["id"] = ids.setdefault(item["id"], len(ids))
    if "interrupts" in out:
        out["interrupts"] = [i["value"] for i in out["interrupts"]]
    if out.get("error") is not None:
        out["error"] = repr(out["error"])
    return out


@pytest.mark.parametrize("subgraphs", [False, True])
@pytest.mark.parametrize("build", [asking_graph, foo_bar_graph, final_graph])
async def test_an_entrypoints_tasks_stream(
    checkpointer: Checkpointer, build: Any, subgraphs: bool
) -> None:
    # LangGraph's "tasks" items of an entrypoint: its node's input is the run's input and its
    # result {"__end__": return value}; a task call's (at the top: LangGraph's tasks are
    # tasks of the entrypoint's own Pregel) its input (args, kwargs) and result
    # {"__return__": result}; a task that pauses has no end (its entrypoint's end asks); on
    # resume a call that had finished shows its start again, alone (its result is saved)
    seen = []
    first_input = {"a": ""} if build is foo_bar_graph else 1
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        graph = build(g, cp, [])
        ids: dict[str, int] = {}
        runs = [first_input, 2 if build is final_graph else g.Command(resume="R")]
        items = []
        for item in runs:
            got = await streamed(graph, item, "s", mode="tasks", subgraphs=subgraphs)
            items.append([tasks_item(i, ids) for i in got])
        seen.append(items)
    assert seen[0] == seen[1]


def shaped(item: Any) -> Any:
    """A ``subgraphs=True`` item with its namespace as node names only, and without our call
    numbers (ours counts a node's task calls among its sub-graph calls: ``("wf", "1")`` for
    a graph it calls after a task, LangGraph's ``("wf",)``: its task calls are no calls)."""
    if not isinstance(item, tuple):
        return item
    return (tuple(p for p in shape(item[0]) if not p.isdigit()), *item[1:])


@pytest.mark.parametrize("mode", ["values", ["values", "updates"]])
@pytest.mark.parametrize("build", [asking_graph, foo_bar_graph, nested_graph])
async def test_an_entrypoints_stream_with_subgraphs_shows_no_task_state(
    checkpointer: Checkpointer, build: Any, mode: Any
) -> None:
    # a task call has no state of its own in LangGraph: with subgraphs=True no item of it
    # but its update (at the top), and its question once, at the top
    seen = []
    first_input = {"a": ""} if build is foo_bar_graph else [0, 1] if build is nested_graph else 1
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        graph = build(g, cp, [])
        first = await streamed(graph, first_input, "s", mode=mode, subgraphs=True)
        second = await streamed(graph, g.Command(resume="R"), "s", mode=mode, subgraphs=True)
        if build is nested_graph:  # its tasks run together: in either order
            first = sorted(first, key=repr)
        seen.append(([shaped(i) for i in first], [shaped(i) for i in second]))
    assert seen[0] == seen[1]


@pytest.mark.parametrize("build", [asking_graph, foo_bar_graph])
async def test_an_entrypoints_state_with_subgraphs_has_no_task_states(
    checkpointer: Checkpointer, build: Any
) -> None:
    # LangGraph's task calls are no sub-graphs: a paused entrypoint's task has no state
    seen = []
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        graph = build(g, cp, [])
        await ainvoke(graph, {"a": ""} if build is foo_bar_graph else 1)
        if hasattr(graph, "aget_state"):
            snap = await graph.aget_state(cfg("1"), subgraphs=True)
        else:
            snap = await graph.get_state("1", subgraphs=True)
        seen.append((snap.values, snap.next, [(t.name, t.state) for t in snap.tasks]))
    assert seen[0] == seen[1]


def previous_asking_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    def bar(x: int) -> int:
        return x + g.interrupt("b")

    @g.entrypoint(checkpointer=cp)
    def wf(x: int, previous: Any = None) -> Any:
        calls.append(previous)
        return g.entrypoint.final(value=bar(x).result(), save=[x, previous])

    return wf


@pytest.mark.parametrize("kind", ["value", "final", "none"])
async def test_update_state_of_an_entrypoint_is_its_return_value(
    checkpointer: Checkpointer, kind: str
) -> None:
    # LangGraph's update_state of an entrypoint writes as its node: the value is the state
    # (and what the next run's previous reads), entrypoint.final(value, save) each; the
    # paused run counts as done
    seen = []
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        calls: list[Any] = []
        graph = previous_asking_graph(g, cp, calls)
        await ainvoke(graph, 1)
        update = {"value": {"z": 1}, "final": g.entrypoint.final(value="V", save="S")}.get(kind)
        if hasattr(graph, "aupdate_state"):
            await graph.aupdate_state(cfg("1"), update)
            snap = await graph.aget_state(cfg("1"))
        else:
            await graph.update_state("1", update)
            snap = await graph.get_state("1")
        outs = [shown(await ainvoke(graph, 5)), shown(await ainvoke(graph, g.Command(resume=1)))]
        seen.append((snap.values, snap.next, outs, calls))
    assert seen[0] == seen[1]


def callable_object_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    class Doubler:
        __name__ = "dbl"

        async def __call__(self, x: int) -> int:
            calls.append(x)
            await asyncio.sleep(0)
            return x * 2

    dbl = g.task(Doubler())

    class Flow:
        __name__ = "flow"

        async def __call__(self, x: int) -> int:
            return await dbl(x) + g.interrupt("more?")

    return g.entrypoint(checkpointer=cp)(Flow())


async def test_an_async_callable_object_as_entrypoint_and_task(checkpointer: Checkpointer) -> None:
    # an object with ``async def __call__`` is async (LangGraph's is_async_callable)
    outs, calls = await both(callable_object_graph, checkpointer, [3, ("resume", 1)])
    assert outs == [("interrupted", ["more?"]), 7]
    assert calls == [3]


class Out(TypedDict, total=False):
    output: Any


def task_named_node_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    def shout(text: str) -> str:
        return text.upper()

    def node(state: Out) -> Out:  # a node named as the task, writing only "output"
        return {"output": state["output"] + "!"}

    sub = g.StateGraph(Out).add_node("shout", node)
    sub = sub.add_edge(g.START, "shout").add_edge("shout", g.END).compile()

    @g.entrypoint(checkpointer=cp)
    async def wf(text: str) -> Any:
        loud = await shout(text)
        if hasattr(sub, "ainvoke"):
            out = await sub.ainvoke({"output": loud})
        else:
            out = (await sub.run({"output": loud})).state
        return out["output"]

    return wf


@pytest.mark.parametrize("mode", ["updates", ["updates", "values"]])
async def test_a_sub_graph_node_named_as_a_task_is_no_task(
    checkpointer: Checkpointer, mode: Any
) -> None:
    # only a task call's update shows at the top: a sub-graph's node of that name and shape
    # shows with subgraphs=True only, under its namespace
    seen = []
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        graph = task_named_node_graph(g, cp, [])
        flat = await streamed(graph, "hi", "s", mode=mode)
        nested = await streamed(graph, "ho", "t", mode=mode, subgraphs=True)
        seen.append((flat, [shaped(i) for i in nested]))
    assert seen[0] == seen[1]


async def test_an_entrypoints_history_shows_its_task_result_as_the_return_value(
    checkpointer: Checkpointer,
) -> None:
    # the history's checkpoint before the node ran: its task's result is what it returned
    # (entrypoint.final's value), a PregelTask's of LangGraph's one output channel (ours has
    # a checkpoint of its own for the input step, before its node's: left out)
    seen = []
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        graph = saving_graph(g, cp, [])
        await ainvoke(graph, 3)
        if hasattr(graph, "aget_state_history"):
            snaps = [s async for s in graph.aget_state_history(cfg("1"))]
        else:
            snaps = [
                await graph.get_state("1", i.checkpoint_id)
                for i in await graph.history("1")
                if "__start__" not in i.next
            ]
        seen.append([(s.values, s.next, [(t.name, t.result) for t in s.tasks]) for s in snaps])
    assert seen[0] == seen[1] == [(0, (), []), (None, ("graph",), [("graph", 0)])]
