"""Property tests: reducer results do not depend on task completion order, and checkpoints
load back exactly what was saved (snapshots and deltas mixed)."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from tinyagents.graph import END, START, Send, StateGraph, add_messages, union
from tinyagents.graph.reducers import MISSING
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer, SqliteCheckpointer


def concat(left: str, right: str) -> str:
    """A reducer that is not commutative: order matters."""
    return left + right


class Merged(TypedDict, total=False):
    log: Annotated[list[int], operator.add]
    messages: Annotated[list[dict[str, Any]], add_messages]
    seen: Annotated[set[int], union]
    low: Annotated[int, min]
    high: Annotated[int, max]
    text: Annotated[str, concat]


def fan_out_graph(delays: list[int]) -> Any:
    async def work(arg: dict[str, int]) -> dict[str, Any]:
        i = arg["i"]
        for _ in range(delays[i]):
            await asyncio.sleep(0)  # a different number of yields per task: any finish order
        return {
            "log": [i],
            "messages": [{"id": f"m{i % 3}", "by": i}],
            "seen": {i % 4},
            "low": i,
            "high": i,
            "text": str(i),
        }

    graph = StateGraph(Merged).add_node("work", work).add_edge("work", END)
    graph.add_conditional_edges(
        START, lambda s: [Send("work", {"i": i}) for i in range(len(delays))]
    )
    return graph.compile()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=8))
async def test_reducers_do_not_depend_on_completion_order(delays: list[int]) -> None:
    n = len(delays)
    shuffled = await fan_out_graph(delays).run({"text": ""})
    in_order = await fan_out_graph([0] * n).run({"text": ""})
    assert shuffled.state == in_order.state
    assert shuffled.state["log"] == list(range(n))
    assert shuffled.state["text"] == "".join(str(i) for i in range(n))
    # the last writer (by task order) of each message id wins, at that id's first position
    winners = {f"m{k}": max(i for i in range(n) if i % 3 == k) for k in range(min(n, 3))}
    assert shuffled.state["messages"] == [{"id": m, "by": by} for m, by in winners.items()]
    assert shuffled.state["low"] == 0 and shuffled.state["high"] == n - 1


class Point(BaseModel):
    x: int
    label: str


class Everything(TypedDict, total=False):
    number: int
    point: Point
    log: Annotated[list[str], operator.add]
    messages: Annotated[list[dict[str, Any]], add_messages]
    tags: Annotated[set[str], union]
    low: Annotated[int, min]
    total: Annotated[int, operator.add]
    pairs: tuple[int, int]


words = st.text(alphabet="abcé✓ ", max_size=5)
update = st.fixed_dictionaries(
    {},
    optional={
        "number": st.integers(),
        "point": st.builds(Point, x=st.integers(), label=words),
        "log": st.lists(words, max_size=3),
        "messages": st.lists(
            st.fixed_dictionaries({"id": st.sampled_from(["a", "b", "c"]), "text": words}),
            max_size=3,
        ),
        "tags": st.sets(words, max_size=3),
        "low": st.integers(),
        "total": st.integers(min_value=-100, max_value=100),
        "pairs": st.tuples(st.integers(), st.integers()),
    },
).filter(bool)


def model_apply(graph: Any, values: dict[str, Any], upd: dict[str, Any]) -> dict[str, Any]:
    """The expected values, computed with the reducers on plain Python objects."""
    out = {
        k: (list(v) if isinstance(v, list) else set(v) if isinstance(v, set) else v)
        for k, v in values.items()
    }
    for key, value in upd.items():
        reducer = graph.schema.channels[key].reducer
        out[key], _ = reducer.apply(key, out.get(key, MISSING), [value])
    return out


async def _backend(kind: str, snapshot_every: int) -> Checkpointer:
    if kind == "memory":
        return MemoryCheckpointer(snapshot_every=snapshot_every)
    cp = SqliteCheckpointer(":memory:", snapshot_every=snapshot_every)
    await cp.setup()
    return cp


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["memory", "sqlite"]),
    snapshot_every=st.integers(min_value=1, max_value=4),
    updates=st.lists(update, min_size=1, max_size=8),
)
async def test_checkpoints_load_back_what_was_saved(
    kind: str, snapshot_every: int, updates: list[dict[str, Any]]
) -> None:
    cp = await _backend(kind, snapshot_every)
    try:
        graph = StateGraph(Everything).add_node("n", lambda s: None).add_edge(START, "n")
        compiled = graph.add_edge("n", END).compile(checkpointer=cp)
        # a new thread's reducer channels start at their type's empty value ([], 0, set())
        expected: dict[str, Any] = compiled.schema.initial()
        checkpoints: list[tuple[str, dict[str, Any]]] = []
        for upd in updates:
            expected = model_apply(compiled, expected, upd)
            checkpoint_id = await compiled.update_state("t", upd)
            checkpoints.append((checkpoint_id, expected))
            assert (await compiled.get_state("t")).values == expected
        for checkpoint_id, values in checkpoints:  # every older checkpoint, too
            assert (await compiled.get_state("t", checkpoint_id)).values == values
        loaded = (await compiled.get_state("t")).values
        if "point" in loaded:
            assert isinstance(loaded["point"], Point)
        if "tags" in loaded:
            assert isinstance(loaded["tags"], set)
        if "pairs" in loaded:
            assert isinstance(loaded["pairs"], tuple)
    finally:
        await cp.aclose()
