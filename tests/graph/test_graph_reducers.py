"""Reducers one by one: values, deltas (what a checkpoint stores) and replay."""

from __future__ import annotations

import operator

import pytest

from tinyagents.errors import InvalidUpdateError
from tinyagents.graph import Overwrite, add_messages, union
from tinyagents.graph.reducers import (
    MISSING,
    Append,
    LastValue,
    Messages,
    Replaced,
    Union,
    reduce,
    resolve,
)


def test_overwrite_takes_one_write_and_refuses_two() -> None:
    assert LastValue().apply("k", 1, [2]) == (2, 2)
    with pytest.raises(InvalidUpdateError, match="'k' received 2 writes"):
        LastValue().apply("k", 1, [2, 3])


def test_append_stores_only_the_new_items_as_delta() -> None:
    reducer = Append()
    value, delta = reducer.apply("k", MISSING, [["a"], "b"])
    assert value == ["a", "b"] and delta == ["a", "b"]
    value, delta = reducer.apply("k", value, [["c"]])
    assert value == ["a", "b", "c"]
    assert delta == ["c"]  # not the whole list
    assert reducer.replay(["a", "b"], delta) == ["a", "b", "c"]


def test_append_never_aliases_the_callers_list() -> None:
    given = ["a"]
    value, _ = Append().apply("k", MISSING, [given])
    value.append("b")
    assert given == ["a"]


def test_add_messages_replaces_by_id_and_appends_the_rest() -> None:
    merged = add_messages(
        [{"id": "1", "text": "hi"}, {"id": "2", "text": "yo"}],
        [{"id": "1", "text": "hi, edited"}, {"id": "3", "text": "new"}, {"text": "no id"}],
    )
    assert merged == [
        {"id": "1", "text": "hi, edited"},
        {"id": "2", "text": "yo"},
        {"id": "3", "text": "new"},
        {"text": "no id"},
    ]


def test_add_messages_reducer_works_on_objects_with_an_id() -> None:
    class Msg:
        def __init__(self, id: str, text: str) -> None:
            self.id, self.text = id, text

    reducer = Messages()
    value, _ = reducer.apply("m", MISSING, [[Msg("a", "1"), Msg("b", "2")]])
    value, delta = reducer.apply("m", value, [Msg("a", "1*")])
    assert [m.text for m in value] == ["1*", "2"]
    assert [m.text for m in delta] == ["1*"]


def test_union_min_max_and_custom_binary() -> None:
    value, delta = Union().apply("t", {"a"}, [{"b"}, "c"])
    assert value == {"a", "b", "c"} and sorted(delta) == ["b", "c"]
    assert union({"a"}, "b") == {"a", "b"}
    assert resolve(min, int).apply("lo", 5, [7, 3]) == (3, 3)
    assert resolve(max, int).apply("hi", MISSING, [7, 3]) == (7, 7)
    total = resolve(operator.add, int)
    assert total.apply("n", MISSING, [2, 3]) == (5, 5)
    assert resolve(operator.add, list[int]).apply("l", [1], [[2]]) == ([1, 2], [2])


def test_diff_gives_a_subgraph_output_as_writes() -> None:
    assert Append().diff(["a"], ["a", "b", "c"]) == [["b", "c"]]
    assert Append().diff(["a"], ["a"]) == []
    # a sub-graph that overwrote the list (not an extension): the parent's is overwritten
    assert Append().diff(["a", "b"], ["x"]) == [Overwrite(["x"])]
    assert Messages().diff([{"id": "1", "t": "x"}], [{"id": "1", "t": "y"}, {"id": "2"}]) == [
        [{"id": "1", "t": "y"}, {"id": "2"}]
    ]
    assert Union().diff({"a"}, {"a", "b"}) == [{"b"}]
    assert LastValue().diff(1, 1) == [] and LastValue().diff(1, 2) == [2]


def test_a_non_callable_annotation_is_not_a_reducer() -> None:
    with pytest.raises(TypeError, match="not a reducer"):
        resolve(42, int)


def test_reduce_applies_an_overwrite_past_any_reducer() -> None:
    value, delta = reduce(Append(), "k", ["a"], [["b"], Overwrite(["x"]), ["after"]])
    assert value == ["x"] and type(delta) is Replaced and delta.value == ["x"]
    assert reduce(Union(), "s", {"a"}, [Overwrite(["b"])])[0] == {"b"}
    assert reduce(LastValue(), "v", 1, [{"__overwrite__": 2}])[0] == 2
    with pytest.raises(InvalidUpdateError, match="'v' received 2 writes"):
        reduce(LastValue(), "v", 1, [Overwrite(2), 3])
    with pytest.raises(InvalidUpdateError, match="only one Overwrite"):
        reduce(Append(), "k", [], [Overwrite([1]), {"type": "__overwrite__", "value": [2]}])
    # a dict that merely has a "type" key is a plain write
    assert reduce(LastValue(), "v", 1, [{"type": "__overwrite__"}])[0] == {"type": "__overwrite__"}


@pytest.mark.parametrize(
    "writes",
    [
        [[{"id": "9"}, {"type": "remove", "id": "nope"}]],  # one write
        [[{"type": "remove", "id": "1"}], [{"type": "remove", "id": "1"}]],  # two tasks' writes
    ],
)
def test_an_add_messages_removal_that_fails_changes_nothing(writes: list[object]) -> None:
    # the step failed, but the removal and the message written before it were applied to the
    # channel's list in place: a run returned (and a no-checkpointer run kept) half a step
    current = Messages().replay(MISSING, [{"id": "1"}, {"id": "2"}])
    with pytest.raises(ValueError, match="Attempting to delete a message with an ID"):
        Messages().apply("messages", current, writes)
    assert current == [{"id": "1"}, {"id": "2"}]
