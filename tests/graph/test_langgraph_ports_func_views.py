"""An entrypoint's state as LangGraph shows it (its function's return value) through the doors
that still showed its internal state (``input``, ``output``, ``previous``): ``graph.iter``,
an entrypoint as a ``StateGraph``'s node streamed with ``subgraphs=True``, and the checkpoint
``update_state(as_node="__input__")`` makes. The same program on both libraries, compared,
as in ``test_langgraph_ports_func.py``.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langgraph_kit import cfg, lg_memory
from test_langgraph_ports_func import OURS, THEIRS, ainvoke, asking_graph, shaped, shown, streamed

from tinyagents.store.checkpoint import Checkpointer

pytest.importorskip("langgraph.func")


def adding_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    async def double(x: int) -> int:
        return x * 2

    @g.entrypoint(checkpointer=cp)
    async def flow(x: int, previous: Any = None) -> Any:
        return [await double(x) + 1, previous]

    return flow


@pytest.mark.parametrize("build", [adding_graph, asking_graph])
async def test_iter_of_an_entrypoint_ends_on_its_return_value(
    checkpointer: Checkpointer, build: Any
) -> None:
    # LangGraph has no iter: its ainvoke's value (a paused run's: get_state's values) is
    # what our iter's last step carries, as run's result does
    theirs = build(THEIRS, lg_memory.InMemorySaver(), [])
    expected = []
    for item in (3, 4):
        out = await theirs.ainvoke(item, cfg("1"))
        expected.append(
            (await theirs.aget_state(cfg("1"))).values if "__interrupt__" in out else out
        )
    ours = build(OURS, checkpointer, [])
    got = []
    for item in (3, 4):
        async with ours.iter(item, thread_id="1") as run:
            steps = [step async for step in run.supersteps()]
        assert all(s.result is None for s in steps[:-1])
        final = steps[-1].result
        assert final is not None
        got.append(final.state)
    assert got == expected


class S(TypedDict, total=False):
    x: int
    y: int


def entry_node_graph(g: Any, cp: Any, calls: list[Any]) -> Any:
    @g.task
    async def double(x: int) -> int:
        return x * 2

    @g.entrypoint()
    async def inner(state: dict[str, Any]) -> dict[str, Any]:
        return {"y": await double(state["x"]) + 1}

    builder = g.StateGraph(S).add_node("inner", inner).add_edge(g.START, "inner")
    return builder.add_edge("inner", g.END).compile(checkpointer=cp)


def untimed(item: Any) -> Any:
    """A ``tasks`` item without its id and LangGraph's ``triggers`` (ours has none)."""
    payload = item[-1]
    if isinstance(payload, dict) and "id" in payload:
        payload = {k: v for k, v in payload.items() if k not in ("id", "triggers")}
    return (*item[:-1], payload)


@pytest.mark.parametrize(
    "mode", ["values", "updates", "tasks", ["values", "updates"], ["updates", "tasks"]]
)
@pytest.mark.parametrize("saved", [True, False])
async def test_an_entrypoint_node_streamed_with_subgraphs_shows_its_functions_view(
    checkpointer: Checkpointer, mode: Any, saved: bool
) -> None:
    # an entrypoint as a StateGraph's node: with subgraphs=True its items are those of
    # its own stream (its return value, {name: value}, each task call's {task: result}),
    # under the node's namespace; its task calls have no namespace of their own
    seen = []
    theirs = lg_memory.InMemorySaver() if saved else None
    for g, cp in ((OURS, checkpointer if saved else None), (THEIRS, theirs)):
        graph = entry_node_graph(g, cp, [])
        items = await streamed(graph, {"x": 1}, "s", mode=mode, subgraphs=True)
        seen.append([untimed(shaped(i)) for i in items])
    assert seen[0] == seen[1]


async def test_update_state_as_input_has_the_entrypoint_next(checkpointer: Checkpointer) -> None:
    # LangGraph's entrypoint reads its input from __start__: the checkpoint an update as
    # __input__ makes has the entrypoint next (and as its task), a new thread's and a used one's
    seen = []
    for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver())):
        graph = asking_graph(g, cp, [])
        views = []
        for item in (None, 1):
            if item is not None:
                await ainvoke(graph, item)
            if hasattr(graph, "aupdate_state"):
                await graph.aupdate_state(cfg("1"), 7, as_node="__input__")
                snap = await graph.aget_state(cfg("1"))
            else:
                await graph.update_state("1", 7, as_node="__input__")
                snap = await graph.get_state("1")
            views.append((snap.values, snap.next, [t.name for t in snap.tasks]))
            views.append(shown(await ainvoke(graph, None)))
        seen.append(views)
    assert seen[0] == seen[1]
