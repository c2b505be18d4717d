"""``interrupt(value, response_schema=...)``, LangGraph 1.2's typed question: side by side.

The schema goes out with the question (``Interrupt.response_schema``, JSON Schema) so a client
can render a form; a pydantic model, ``TypedDict``, dataclass or any type pydantic reads also
checks the answer, and ``interrupt()`` returns the validated value. A wrong answer fails the
node with pydantic's ``ValidationError`` (``is_invalid_resume`` tells it apart) and is not
kept: the question is still pending, and another ``Command(resume=...)`` answers it. A JSON
Schema ``dict`` is surfaced as given, and answers are not checked against it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import operator
from typing import Annotated, Any, TypedDict

import pytest
import typing_extensions
from langgraph_kit import OURS, THEIRS, cfg, lg_errors, pair
from pydantic import BaseModel, ValidationError

from tinyagents import Runtime
from tinyagents.graph import Command, StateGraph, interrupt, is_invalid_resume
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.runs import RunStatus
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer
from tinyagents.testkit import EventRecorder, EventWaiter


class Age(BaseModel):
    age: int


class Choice(typing_extensions.TypedDict):  # pydantic reads typing's only on 3.12+
    pick: str


@dataclasses.dataclass
class Point:
    x: int
    y: int


class State(TypedDict, total=False):
    answer: Any
    kind: str


class Ages(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def asking(schema: Any, calls: list[str] | None = None) -> Any:
    def build(g: Any) -> Any:
        def ask(state: Any) -> dict[str, Any]:
            if calls is not None:
                calls.append("ask")
            answer = g.interrupt("how old?", response_schema=schema)
            return {"answer": answer, "kind": type(answer).__name__}

        graph = g.StateGraph(State)
        graph.add_node("ask", ask)
        graph.add_edge(g.START, "ask")
        graph.add_edge("ask", g.END)
        return graph

    return build


@pytest.mark.parametrize(
    ("schema", "answer"),
    [
        (Age, {"age": "41"}),
        (Choice, {"pick": "b"}),
        (Point, {"x": 1, "y": "2"}),
        (int, "7"),
        ({"type": "integer"}, "not checked"),
    ],
    ids=["pydantic", "typeddict", "dataclass", "int", "json-schema"],
)
async def test_the_schema_goes_out_with_the_question_and_shapes_the_answer(
    checkpointer: Checkpointer, schema: Any, answer: Any
) -> None:
    ours, theirs = pair(asking(schema), checkpointer)
    paused = await ours.run({}, thread_id="1")
    their_pause = await theirs.ainvoke({}, cfg())
    [mine] = paused.interrupts
    [their] = their_pause["__interrupt__"]
    assert mine.response_schema == their.response_schema
    assert mine.value == their.value == "how old?"
    # kept with the question: the thread's state shows it, as LangGraph's does
    [pending] = (await ours.get_state("1")).interrupts
    assert pending.response_schema == their.response_schema
    done = await ours.run(Command(resume=answer), thread_id="1")
    their_done = await theirs.ainvoke(THEIRS.Command(resume=answer), cfg())
    assert done.status == "completed"
    assert done.state == their_done
    assert done.state["kind"] == type(their_done["answer"]).__name__


async def test_a_wrong_answer_fails_the_node_and_the_question_can_be_answered_again(
    checkpointer: Checkpointer,
) -> None:
    calls: list[str] = []
    ours = asking(Age, calls)(OURS).compile(checkpointer=checkpointer)
    _, theirs = pair(asking(Age), checkpointer)
    await ours.run({}, thread_id="1")
    await theirs.ainvoke({}, cfg())

    failed = await ours.run(Command(resume={"age": "old"}), thread_id="1")
    with pytest.raises(ValidationError) as theirs_raised:
        await theirs.ainvoke(THEIRS.Command(resume={"age": "old"}), cfg())
    assert failed.status == "failed"
    assert isinstance(failed.error, ValidationError)
    assert is_invalid_resume(failed.error)
    assert lg_errors.is_invalid_resume(theirs_raised.value)
    assert str(failed.error) == str(theirs_raised.value)

    # the question is still the thread's, unanswered, with the failure on its task
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert mine.next == their.next == ("ask",)
    assert [i.value for i in mine.interrupts] == [i.value for i in their.interrupts]
    assert mine.tasks[0].error is not None and "validation error for Age" in mine.tasks[0].error

    done = await ours.run(Command(resume={"age": 41}), thread_id="1")
    their_done = await theirs.ainvoke(THEIRS.Command(resume={"age": 41}), cfg())
    assert done.status == "completed"
    assert done.state == their_done == {"answer": Age(age=41), "kind": "Age"}
    assert calls == ["ask", "ask", "ask"]  # asked, failed on the wrong answer, answered


async def test_a_wrong_answer_is_not_kept_by_the_store(checkpointer: Checkpointer) -> None:
    """Read back from the store by a fresh graph object (another process, say): the wrong
    answer was withdrawn there too, so the thread waits for an answer, and ``run(None)``
    stops on the question again instead of failing on the answer no one may fix."""
    ours = asking(Age)(OURS).compile(checkpointer=checkpointer)
    await ours.run({}, thread_id="1")
    await ours.run(Command(resume={"age": "old"}), thread_id="1")
    again = asking(Age)(OURS).compile(checkpointer=checkpointer)
    waiting = await again.run(None, thread_id="1")
    assert waiting.status == "interrupted"
    assert [i.value for i in waiting.interrupts] == ["how old?"]
    done = await again.run(Command(resume={"age": 3}), thread_id="1")
    assert done.state == {"answer": Age(age=3), "kind": "Age"}


async def test_only_the_wrong_answer_of_two_is_withdrawn(checkpointer: Checkpointer) -> None:
    def two(state: State) -> dict[str, Any]:
        first = interrupt("name?", response_schema=str)
        second = interrupt("age?", response_schema=Age)
        return {"answer": [first, second]}

    graph = (
        StateGraph(State)
        .add_node("two", two)
        .set_entry_point("two")
        .set_finish_point("two")
        .compile(checkpointer=checkpointer)
    )
    await graph.run({}, thread_id="1")
    asked = await graph.run(Command(resume="ann"), thread_id="1")
    assert [i.value for i in asked.interrupts] == ["age?"]
    failed = await graph.run(Command(resume={"age": None}), thread_id="1")
    assert failed.status == "failed" and is_invalid_resume(failed.error)
    state = await graph.get_state("1")
    assert [i.value for i in state.interrupts] == ["age?"]
    done = await graph.run(Command(resume={"age": 30}), thread_id="1")
    assert done.state == {"answer": ["ann", Age(age=30)]}


async def test_a_wrong_answer_does_not_cut_short_a_task_answered_in_the_same_resume(
    checkpointer: Checkpointer,
) -> None:
    """Two parallel questions answered in one resume, one answer wrong: as LangGraph's, the
    rightly answered task runs to its end (its side effects done once, its writes kept) and
    the wrong answer fails the run after it; only its question is still pending."""
    effects: list[tuple[str, int]] = []

    def build(g: Any) -> Any:
        def asker(name: str) -> Any:
            async def node(state: Ages) -> dict[str, Any]:
                age = g.interrupt(name, response_schema=Age)
                await asyncio.sleep(0.01)  # a wrong answer elsewhere must not cancel this
                effects.append((name, age.age))
                return {"log": [f"{name}={age.age}"]}

            return node

        graph = g.StateGraph(Ages)
        graph.add_node("a", asker("a")).add_node("b", asker("b"))
        graph.add_edge(g.START, "a").add_edge(g.START, "b")
        return graph.add_edge("a", g.END).add_edge("b", g.END)

    ours, theirs = pair(build, checkpointer)
    mine = {i.value: i.id for i in (await ours.run({}, thread_id="1")).interrupts}
    their = {i.value: i.id for i in (await theirs.ainvoke({}, cfg()))["__interrupt__"]}
    failed = await ours.run(
        Command(resume={mine["a"]: {"age": "x"}, mine["b"]: {"age": 2}}), thread_id="1"
    )
    with pytest.raises(ValidationError):
        await theirs.ainvoke(
            THEIRS.Command(resume={their["a"]: {"age": "x"}, their["b"]: {"age": 2}}), cfg()
        )
    assert failed.status == "failed" and is_invalid_resume(failed.error)
    assert effects == [("b", 2), ("b", 2)]  # once in each library
    mine_state, their_state = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert mine_state.values == their_state.values == {"log": ["b=2"]}
    assert mine_state.next == their_state.next == ("a",)
    done = await ours.run(Command(resume={mine["a"]: {"age": 1}}), thread_id="1")
    their_done = await theirs.ainvoke(THEIRS.Command(resume={their["a"]: {"age": 1}}), cfg())
    assert done.state == their_done == {"log": ["a=1", "b=2"]}  # the step's task order
    assert effects == [("b", 2), ("b", 2), ("a", 1), ("a", 1)]  # b did not run again


async def test_a_node_may_catch_the_wrong_answer_itself(checkpointer: Checkpointer) -> None:
    def ask(state: State) -> dict[str, Any]:
        try:
            return {"answer": interrupt("age?", response_schema=Age)}
        except ValidationError:
            return {"answer": "unreadable"}

    graph = (
        StateGraph(State)
        .add_node("ask", ask)
        .set_entry_point("ask")
        .set_finish_point("ask")
        .compile(checkpointer=checkpointer)
    )
    await graph.run({}, thread_id="1")
    done = await graph.run(Command(resume="forty"), thread_id="1")
    assert done.status == "completed" and done.state == {"answer": "unreadable"}


def test_other_errors_are_no_invalid_resume() -> None:
    assert not is_invalid_resume(ValueError("x"))
    try:
        Age.model_validate({"age": "x"})
    except ValidationError as exc:
        assert not is_invalid_resume(exc)


async def test_a_schema_pydantic_cannot_read_is_a_clear_error(checkpointer: Checkpointer) -> None:
    def ask(state: State) -> dict[str, Any]:
        return {"answer": interrupt("?", response_schema="an int please")}

    graph = (
        StateGraph(State)
        .add_node("ask", ask)
        .set_entry_point("ask")
        .set_finish_point("ask")
        .compile(checkpointer=checkpointer)
    )
    failed = await graph.run({}, thread_id="1")
    assert failed.status == "failed"
    assert isinstance(failed.error, TypeError)
    assert "response_schema" in str(failed.error)


class Decision(BaseModel):
    approved: bool
    value: int = 0


async def test_a_steered_answer_the_schema_refuses_fails_and_the_question_waits(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """Through the runtime: the ``graph.interrupt`` event (and so the operator API's pending
    interrupts) carries the schema, and an approval whose payload the schema refuses fails
    (``steering.failed``, saying what is wrong) before anything is recorded: the run still
    waits on the question, and a right answer completes it."""

    def ask(state: State) -> dict[str, Any]:
        return {"answer": interrupt("refund?", response_schema=Decision)}

    graph = (
        StateGraph(State)
        .add_node("ask", ask)
        .set_entry_point("ask")
        .set_finish_point("ask")
        .compile(checkpointer=MemoryCheckpointer())
    )
    handle = await rt.start_graph(graph, {}, thread_id="t")
    event = await waiter.event("graph.interrupt", handle.run_id)
    assert event.data["response_schema"] == Decision.model_json_schema()
    target = SteeringTarget.graph_task(handle.run_id, event.task_id)

    def approve(payload: dict[str, Any]) -> SteeringCommand:
        return SteeringCommand(
            target=target, actor=SteeringActor.test(), kind=SteeringKind.APPROVE, payload=payload
        )

    wrong = approve({"value": "lots"})
    assert (await rt.submit(wrong)).status == "accepted"
    failed = await waiter.event("steering.failed", handle.run_id)
    assert failed.correlation_id == wrong.correlation_id
    assert "does not match the response_schema" in failed.reason
    assert "value: Input should be a valid integer" in failed.reason
    assert handle.status is RunStatus.INTERRUPTED
    assert [i.value for i in (await graph.get_state("t")).interrupts] == ["refund?"]

    right = approve({"value": 5})
    await rt.submit(right)
    done = await handle.result()
    assert done.status is RunStatus.COMPLETED
    assert done.output == {"answer": Decision(approved=True, value=5)}
    assert recorder.steering(right.correlation_id)[-1].type == "steering.applied"
