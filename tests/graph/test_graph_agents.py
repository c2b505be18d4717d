"""Agent nodes (a child agent run per task) and graph supervisor nodes."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any, TypedDict

import pytest

from tinyagents import Agent, ModelRetry, RunContext, Runtime, tool
from tinyagents.errors import (
    ConfigurationError,
    GraphError,
    GraphValidationError,
    RunLimitExceeded,
)
from tinyagents.graph import END, START, AgentNode, NodeContext, StateGraph, interrupt
from tinyagents.graph._context import ThreadAttempt
from tinyagents.harness import ModelRequest
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.runs import RunLimits, RunStatus
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import FunctionModel, Gate, ScriptedModel, tool_call


class Doc(TypedDict, total=False):
    topic: str
    draft: str
    verdict: str


def writer_graph(agent: Agent) -> Any:
    graph = StateGraph(Doc).add_node("writer", AgentNode(agent, input="topic", output="draft"))
    return graph.add_edge(START, "writer").add_edge("writer", END).compile()


async def test_agent_node_runs_as_a_child_run_with_task_and_node_ids(rt: Runtime) -> None:
    model = ScriptedModel(["a draft about cats"])
    agent = Agent("writer", model=model)
    result = await writer_graph(agent).run({"topic": "cats"}, runtime=rt)
    assert result.status == "completed" and result.state["draft"] == "a draft about cats"
    assert model.requests[0].messages[-1].content == "cats"

    [graph_run] = [i for i in rt.runs.list() if i.kind == "graph" and i.task_id is None]
    tree = rt.tree(graph_run.run_id)
    assert tree is not None
    [task_entry] = tree.children
    [agent_run] = task_entry.children
    assert agent_run.info.kind == "agent" and agent_run.info.agent_id == "writer"
    assert agent_run.info.task_id == task_entry.info.task_id
    assert agent_run.info.node_id == "writer"
    assert agent_run.info.root_run_id == graph_run.run_id


async def test_agent_node_needs_a_runtime() -> None:
    result = await writer_graph(Agent("writer", model=ScriptedModel(["x"]))).run({"topic": "t"})
    assert result.status == "failed" and isinstance(result.error, GraphError)
    assert "needs a runtime" in str(result.error)


async def test_instructions_for_an_agent_node_reach_its_child_run(rt: Runtime) -> None:
    gate = Gate()

    @tool
    async def outline() -> str:
        """Sketch an outline."""
        return "1. cats"

    async def respond(request: ModelRequest) -> Any:
        if len(model.requests) == 1:
            await gate.wait()
            return tool_call("outline")  # the loop goes on: the instruction reaches call 2
        return "second draft"

    model = FunctionModel(respond)
    agent = Agent("writer", model=model, tools=[outline])
    handle = await rt.start_graph(writer_graph(agent), {"topic": "cats"})
    await gate.entered.wait()
    steer = SteeringCommand(
        target=SteeringTarget.graph_node(handle.run_id, "writer"),
        actor=SteeringActor.test(),
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "mention dogs too"},
    )
    receipt = await rt.submit(steer)
    assert receipt.status == "accepted"
    child = rt.runs.get(receipt.run_id or "")
    assert child is not None and child.info.node_id == "writer" and child.info.kind == "agent"
    gate.open()
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["draft"] == "second draft"
    second = model.requests[1]
    assert any("mention dogs too" in str(m.content) for m in second.messages)


async def test_supervisor_node_approves_a_supervised_task(rt: Runtime) -> None:
    receipts: list[Any] = []

    def worker(state: Doc) -> dict[str, Any]:
        answer = interrupt("may I publish?")
        return {"verdict": f"published={answer['approved']} ({answer.get('reason')})"}

    async def boss(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        receipts.append(await ctx.steer(SteeringKind.APPROVE, {"reason": "boss ok"}, node="worker"))
        return {}

    async def rogue(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        receipts.append(await ctx.steer(SteeringKind.REJECT, node="worker"))
        return {}

    graph = StateGraph(Doc).add_node("worker", worker)
    graph.add_node("boss", boss, supervises=["worker"]).add_node("rogue", rogue)
    for name in ("worker", "boss", "rogue"):
        graph.add_edge(START, name).add_edge(name, END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    result = await compiled.run({}, thread_id="t", runtime=rt)
    assert result.status == "completed"
    assert result.state["verdict"] == "published=True (boss ok)"
    by_status = sorted((r.status.value, r.reason or "") for r in receipts)
    assert by_status[0][0] == "accepted"
    assert by_status[1][0] == "rejected" and "does not supervise" in by_status[1][1]


async def test_supervisor_grants_sibling_steering_between_agent_nodes(rt: Runtime) -> None:
    gate_a, gate_b = Gate("a"), Gate("b")

    def gated(gate: Gate) -> FunctionModel:
        async def respond(request: ModelRequest) -> str:
            await gate.wait()
            return f"done {gate.name}"

        return FunctionModel(respond)

    outcome: dict[str, Any] = {}

    async def lead(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        await gate_a.entered.wait()
        await gate_b.entered.wait()
        a, b = ctx.agent_run_id("a"), ctx.agent_run_id("b")
        assert a is not None and b is not None
        as_a = SteeringActor.parent_agent(a, "a")
        cmd = SteeringCommand(
            target=SteeringTarget.agent_run(b),
            actor=as_a,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "hi sibling"},
        )
        outcome["before"] = await ctx.runtime.submit(cmd)
        ctx.grant(a, b)
        outcome["after"] = await ctx.runtime.submit(
            cmd.model_copy(update={"correlation_id": "c-2"})
        )
        with pytest.raises(GraphError, match="not part of graph run"):
            ctx.grant(a, "r-elsewhere")
        gate_a.open()
        gate_b.open()
        return {}

    graph = StateGraph(Doc)
    graph.add_node("a", AgentNode(Agent("a", model=gated(gate_a)), input="topic", output="draft"))
    graph.add_node("b", AgentNode(Agent("b", model=gated(gate_b)), input="topic", output="verdict"))
    graph.add_node("lead", lead, supervises=["a", "b"])
    for name in ("a", "b", "lead"):
        graph.add_edge(START, name).add_edge(name, END)
    result = await graph.compile().run({"topic": "x"}, runtime=rt)
    assert result.status == "completed", result.error
    assert outcome["before"].status == "rejected"
    assert outcome["after"].status == "accepted"


async def test_a_sync_supervisor_in_its_thread_grants_on_the_runs_loop(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a sync node with timeout= runs in a worker thread: its ctx.grant touched the runtime's
    # run tree and router (the loop's, not thread-safe) from that thread
    gate_a, gate_b = Gate("a"), Gate("b")
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()
    granted_on: list[int] = []
    grant = rt.grant_sibling_steering

    def spy(from_run_id: str, to_run_id: str) -> None:
        granted_on.append(threading.get_ident())
        grant(from_run_id, to_run_id)

    monkeypatch.setattr(rt, "grant_sibling_steering", spy)

    def gated(gate: Gate) -> FunctionModel:
        async def respond(request: ModelRequest) -> str:
            await gate.wait()
            return f"done {gate.name}"

        return FunctionModel(respond)

    outcome: dict[str, Any] = {}

    def on_loop(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(30)

    def lead(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        try:
            on_loop(gate_a.entered.wait())
            on_loop(gate_b.entered.wait())
            a, b = ctx.agent_run_id("a"), ctx.agent_run_id("b")
            assert a is not None and b is not None
            outcome["thread"] = threading.get_ident()
            ctx.grant(a, b)  # returns once done: a's command to b is then accepted
            cmd = SteeringCommand(
                target=SteeringTarget.agent_run(b),
                actor=SteeringActor.parent_agent(a, "a"),
                kind=SteeringKind.ADD_INSTRUCTION,
                payload={"text": "hi sibling"},
            )
            assert ctx.runtime is not None
            outcome["after"] = on_loop(ctx.runtime.submit(cmd))
            with pytest.raises(GraphError, match="not part of graph run"):
                ctx.grant(a, "r-elsewhere")  # its error is raised here, in the thread
        finally:
            gate_a.open()
            gate_b.open()
        return {}

    graph = StateGraph(Doc)
    graph.add_node("a", AgentNode(Agent("a", model=gated(gate_a)), input="topic", output="draft"))
    graph.add_node("b", AgentNode(Agent("b", model=gated(gate_b)), input="topic", output="verdict"))
    graph.add_node("lead", lead, supervises=["a", "b"], timeout=30)
    for name in ("a", "b", "lead"):
        graph.add_edge(START, name).add_edge(name, END)
    result = await graph.compile().run({"topic": "x"}, runtime=rt)
    assert result.status == "completed", result.error
    assert outcome["thread"] != loop_thread  # the node did run in a worker thread
    assert granted_on == [loop_thread]
    assert outcome["after"].status == "accepted"


async def test_an_agent_node_cancelled_with_its_graph_says_why_not_runtime_closed(
    rt: Runtime,
) -> None:
    """The child run of a cancelled agent node ends cancelled with the node's reason; it said
    'runtime closed' while the runtime was open."""
    gate = Gate()

    async def respond(request: ModelRequest) -> Any:
        await gate.wait()  # never opened: only the cancel ends this call
        return "never"

    agent = Agent("writer", model=FunctionModel(respond))
    handle = await rt.start_graph(writer_graph(agent), {"topic": "cats"})
    await gate.entered.wait()
    [child_info] = [i for i in rt.runs.list() if i.kind == "agent" and i.node_id == "writer"]
    child = rt.runs.get(child_info.run_id)
    assert child is not None
    await handle.cancel(immediate=True)
    result = await child.result()
    assert result.status is RunStatus.CANCELLED
    assert "runtime closed" not in str(result.error)
    assert "writer" in str(result.error)


def test_an_agent_node_of_the_wrong_kind_is_refused_when_made() -> None:
    # AgentNode(None), input=5, output=5 or on_aborted=5 were taken: the graph compiled and
    # its run failed later, from inside the node
    agent = Agent("w", model=ScriptedModel(["done"]))
    with pytest.raises(ConfigurationError, match=r"AgentNode takes an Agent, got NoneType"):
        AgentNode(None)  # type: ignore[arg-type]
    for field in ("input", "output", "on_aborted"):
        with pytest.raises(ConfigurationError, match=rf"AgentNode\({field}=...\) is a"):
            AgentNode(agent, **{field: 5})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("node", "key"),
    [
        ({"output": "summary"}, "summary"),
        ({"input": "prompt", "output": "draft"}, "prompt"),
        ({"output": "draft", "on_aborted": END, "aborted_key": "why"}, "why"),
    ],
)
def test_an_agent_node_naming_a_key_the_state_lacks_is_refused_at_compile(
    node: dict[str, Any], key: str
) -> None:
    """The graph used to compile, the agent ran and spent its model calls, and only writing
    its answer (or reading its prompt) failed the run."""
    node = {"input": "topic", **node}
    agent = Agent("writer", model=ScriptedModel(["done"]))
    graph = StateGraph(Doc).add_node("writer", AgentNode(agent, **node))
    if "on_aborted" not in node:
        graph.add_edge("writer", END)
    graph.add_edge(START, "writer")
    with pytest.raises(GraphValidationError, match=rf"agent node 'writer' .* {key!r}") as caught:
        graph.compile()
    assert caught.value.nodes == ["writer"]


def test_an_agent_node_with_functions_for_input_and_output_is_not_checked_by_key() -> None:
    agent = Agent("writer", model=ScriptedModel(["done"]))
    node = AgentNode(agent, input=lambda s: s["topic"], output=lambda out, s: {"draft": out})
    StateGraph(Doc).add_node("writer", node).add_edge(START, "writer").compile()


async def test_an_agent_node_over_its_limit_fails_the_graph_with_the_childs_own_limit_error(
    rt: Runtime,
) -> None:
    """The graph's error is the child's ``RunLimitExceeded``: which limit, how much was used
    and allowed, and the child's run id. It used to be rebuilt from the child's message, read
    as the amount used ("used run limit '...' exceeded ..., allowed None")."""

    @tool
    async def search() -> str:
        """Search."""
        return "found"

    model = ScriptedModel([tool_call("search", {}), tool_call("search", {}), "a draft"])
    agent = Agent("writer", model=model, tools=[search], limits=RunLimits(max_model_calls=1))
    result = await writer_graph(agent).run({"topic": "cats"}, runtime=rt)
    assert result.status == "failed"
    error = result.error
    assert isinstance(error, RunLimitExceeded)
    assert (error.limit, error.used, error.allowed) == ("max_model_calls", 1, 1)
    [child] = [i for i in rt.runs.list() if i.kind == "agent"]
    assert error.run_id == child.run_id
    assert "allowed None" not in str(error) and "used run limit" not in str(error)


def _looping_writer(behavior: str, **kw: Any) -> Agent:
    """An agent that calls a tool on every turn, saying what it has so far: its second model
    call is over ``max_model_calls=1``."""

    @tool
    async def search() -> str:
        """Search."""
        return "found"

    script = [tool_call("search", {}), tool_call("search", {})]
    for response in script:
        response.text = "a partial draft"
    limits = RunLimits(max_model_calls=1, behavior=behavior)  # type: ignore[arg-type]
    return Agent("writer", model=ScriptedModel(script), tools=[search], limits=limits, **kw)


async def test_a_stop_with_partial_agent_node_writes_its_validated_partial_output(
    rt: Runtime,
) -> None:
    """An agent node ignored ``RunLimits(behavior="stop_with_partial")`` and failed the graph
    with the limit error; it now hands its partial output to the state, as ``SubAgent.invoke``
    hands it back: through the agent's output validators (``ctx.partial_output`` True)."""
    seen: list[bool] = []

    async def mark(ctx: RunContext, output: str) -> str:
        seen.append(ctx.partial_output)
        return f"{output} (unfinished)"

    agent = _looping_writer("stop_with_partial")
    agent.output_validator(mark)
    result = await writer_graph(agent).run({"topic": "cats"}, runtime=rt)
    assert result.status == "completed", result.error
    assert result.state["draft"] == "a partial draft (unfinished)"
    assert seen == [True]
    [child] = [i for i in rt.runs.list() if i.kind == "agent"]
    assert child.status is RunStatus.LIMIT_EXCEEDED  # the child's own end is unchanged


async def test_a_stop_with_partial_agent_node_with_no_partial_output_fails_with_the_limit(
    rt: Runtime,
) -> None:
    """A partial output the validators refuse is none: the graph fails with the child's
    ``RunLimitExceeded``, saying why, as ``SubAgent.invoke`` raises it."""

    async def refuse(ctx: RunContext, output: str) -> str:
        raise ModelRetry("not a draft yet")

    agent = _looping_writer("stop_with_partial")
    agent.output_validator(refuse)
    result = await writer_graph(agent).run({"topic": "cats"}, runtime=rt)
    assert result.status == "failed"
    assert isinstance(result.error, RunLimitExceeded)
    assert result.error.limit == "max_model_calls"
    assert "an output validator refused its partial output: not a draft yet" in str(result.error)
    assert "draft" not in result.state


async def test_a_routed_stop_with_partial_agent_node_goes_on_as_a_completed_one(
    rt: Runtime,
) -> None:
    """With ``on_aborted``, a partial output goes where a completed run's goes (``then``)."""
    node = AgentNode(
        _looping_writer("stop_with_partial"),
        input="topic",
        output="draft",
        then="critic",
        on_aborted="critic",
        aborted_key="verdict",
    )
    graph = StateGraph(Doc).add_node("writer", node)
    graph.add_node("critic", lambda s: {"verdict": f"read: {s['draft']}"})
    compiled = graph.add_edge(START, "writer").add_edge("critic", END).compile()
    result = await compiled.run({"topic": "cats"}, runtime=rt)
    assert result.status == "completed", result.error
    assert result.state["verdict"] == "read: a partial draft"


async def test_an_agent_node_under_a_narrowed_agent_run_gets_no_withheld_model() -> None:
    """An agent run narrowed by ``constrain_model`` starts a graph run from a tool: the
    graph's agent nodes are below that run, and may not use what was taken from it (a child
    gets no more than its parent was left with), through the graph run and its task."""
    seen: list[str | None] = []

    async def child_fn(request: ModelRequest) -> str:
        seen.append(request.model)
        return "drafted"

    writer = Agent("writer", model=FunctionModel(child_fn), models=["big", "small"])
    graph = StateGraph(Doc).add_node("writer", AgentNode(writer, input="topic", output="draft"))
    compiled = graph.add_edge(START, "writer").add_edge("writer", END).compile()
    async with Runtime(testing=True) as rt:

        @tool
        async def write(ctx: Any) -> str:
            """Run the writing graph under this run."""
            handle = await rt.start_graph(compiled, {"topic": "cats"}, parent=ctx.handle)
            return str((await handle.result()).state["draft"])

        first = Gate("first")
        calls = 0

        async def lead_fn(request: ModelRequest) -> Any:
            nonlocal calls
            calls += 1
            if calls == 1:
                await first.wait()
                return tool_call("write")
            return "done"

        lead = Agent("lead", model=FunctionModel(lead_fn), models=["big", "small"], tools=[write])
        handle = await rt.start(lead, "go")
        await first.entered.wait()
        narrowed = await rt.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run(handle.run_id),
                actor=SteeringActor.test(),
                kind=SteeringKind.CONSTRAIN_MODEL,
                payload={"models": ["small"]},
            )
        )
        assert narrowed.status == "accepted"
        first.open()
        result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert seen == ["small"]


async def test_an_agent_node_under_a_narrowed_agent_run_gets_no_withheld_tool() -> None:
    """An agent run narrowed by ``constrain_tools`` (``delete_db`` taken away) starts a graph
    run from a tool: its agent node's agent has ``delete_db``, but runs without it (it is not
    offered, and a call to it is an error result), through the graph run and its task."""
    ran: list[str] = []
    offered: list[list[str]] = []

    @tool
    async def delete_db() -> str:
        """Delete the database."""
        ran.append("delete_db")
        return "deleted"

    writer_calls = 0

    async def child_fn(request: ModelRequest) -> Any:
        nonlocal writer_calls
        writer_calls += 1
        offered.append(sorted(t.name for t in request.tools))
        return tool_call("delete_db") if writer_calls == 1 else "drafted"

    writer = Agent("writer", model=FunctionModel(child_fn), tools=[delete_db])
    compiled = writer_graph(writer)
    async with Runtime(testing=True) as rt:

        @tool
        async def write(ctx: Any) -> str:
            """Run the writing graph under this run."""
            handle = await rt.start_graph(compiled, {"topic": "cats"}, parent=ctx.handle)
            return str((await handle.result()).state["draft"])

        first = Gate("first")
        calls = 0

        async def lead_fn(request: ModelRequest) -> Any:
            nonlocal calls
            calls += 1
            if calls == 1:
                await first.wait()
                return tool_call("write")
            return "done"

        lead = Agent("lead", model=FunctionModel(lead_fn), tools=[write, delete_db])
        handle = await rt.start(lead, "go")
        await first.entered.wait()
        narrowed = await rt.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run(handle.run_id),
                actor=SteeringActor.test(),
                kind=SteeringKind.CONSTRAIN_TOOLS,
                payload={"tools": ["write"]},
            )
        )
        assert narrowed.status == "accepted"
        first.open()
        result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert ran == []
    assert offered == [[], []]


async def test_a_running_agent_node_loses_the_tool_its_ancestor_was_narrowed_away_from() -> None:
    """The graph run was started (from a tool) before its parent was narrowed, and its agent
    node is running: ``constrain_tools`` on the parent reaches the node's agent run at its
    next boundary (through the graph run and its task), while the parent still waits inside
    the tool that runs the graph."""
    ran: list[str] = []
    offered: list[list[str]] = []
    node_gate = Gate("node")

    @tool
    async def delete_db() -> str:
        """Delete the database."""
        ran.append("delete_db")
        return "deleted"

    async def child_fn(request: ModelRequest) -> Any:
        offered.append(sorted(t.name for t in request.tools))
        if len(offered) == 1:
            await node_gate.wait()
            return tool_call("delete_db")
        return "drafted"

    compiled = writer_graph(Agent("writer", model=FunctionModel(child_fn), tools=[delete_db]))
    async with Runtime(testing=True) as rt:

        @tool
        async def write(ctx: Any) -> str:
            """Run the writing graph under this run."""
            handle = await rt.start_graph(compiled, {"topic": "cats"}, parent=ctx.handle)
            return str((await handle.result()).state["draft"])

        lead = Agent(
            "lead", model=ScriptedModel([tool_call("write"), "done"]), tools=[write, delete_db]
        )
        handle = await rt.start(lead, "go")
        await asyncio.wait_for(node_gate.entered.wait(), 60)
        [node_run] = [i for i in rt.runs.list() if i.agent_id == "writer" and i.kind == "agent"]
        narrowed = await rt.submit(
            SteeringCommand(
                target=SteeringTarget.agent_run(handle.run_id),
                actor=SteeringActor.test(),
                kind=SteeringKind.CONSTRAIN_TOOLS,
                payload={"tools": ["write"]},
            )
        )
        assert narrowed.status == "accepted"
        node_gate.open()
        result = await asyncio.wait_for(handle.result(), 60)
        history = rt.steering_history(node_run.run_id)
    assert result.status is RunStatus.COMPLETED
    assert ran == []
    assert offered == [["delete_db"], []]
    [applied] = [e for e in history if e.type == "steering.applied"]
    assert applied.kind is SteeringKind.CONSTRAIN_TOOLS
    assert applied.actor == SteeringActor.parent_agent(handle.run_id, "lead")
    assert "ancestor run" in applied.payload_summary["reason"]


async def test_a_sync_supervisor_in_its_thread_steers_on_the_runs_loop(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # its ctx.steer, run to its end in the thread (asyncio.run), submitted the command on the
    # thread's own loop: the router and the bus are the run's loop's, not thread-safe
    loop_thread = threading.get_ident()
    submitted_on: list[int] = []
    submit = rt.submit

    async def spy(cmd: SteeringCommand) -> Any:
        submitted_on.append(threading.get_ident())
        return await submit(cmd)

    monkeypatch.setattr(rt, "submit", spy)
    outcome: dict[str, Any] = {}

    def lead(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        outcome["thread"] = threading.get_ident()
        for node in ("a", "b"):  # b is not supervised: rejected, as on the loop
            outcome[node] = asyncio.run(ctx.steer(SteeringKind.REDIRECT, {"goto": "b"}, node=node))
        return {}

    graph = StateGraph(Doc)
    graph.add_node("a", lambda state: {"draft": "a"})
    graph.add_node("b", lambda state: {"verdict": "b"})
    graph.add_node("lead", lead, supervises=["a"], timeout=30)
    graph.add_edge(START, "lead").add_edge("lead", "a").add_edge("a", "b").add_edge("b", END)
    result = await graph.compile().run({"topic": "x"}, runtime=rt)
    assert result.status == "completed", result.error
    assert outcome["thread"] != loop_thread  # the node did run in a worker thread
    assert submitted_on == [loop_thread, loop_thread]
    assert outcome["a"].status == "accepted", outcome["a"].reason
    assert outcome["b"].status == "rejected"
    assert "does not supervise 'b'" in (outcome["b"].reason or "")


async def test_a_sync_supervisors_thread_cannot_steer_once_its_runs_loop_is_gone(
    rt: Runtime,
) -> None:
    # a thread whose run's loop no longer runs (closed under it without the run being
    # cancelled, so the attempt never ended): grant raised a bare "RuntimeError: Event loop
    # is closed" (and left its coroutine never awaited)
    kept: list[NodeContext] = []

    def lead(state: Doc, ctx: NodeContext) -> dict[str, Any]:
        kept.append(ctx)
        return {}

    graph = StateGraph(Doc).add_node("lead", lead, supervises=["lead"], timeout=30)
    result = await graph.add_edge(START, "lead").add_edge("lead", END).compile().run({}, runtime=rt)
    assert result.status == "completed", result.error
    gone = asyncio.new_event_loop()
    gone.close()
    for loop in (gone, asyncio.new_event_loop()):  # closed; never run
        # that thread's context as it is while its attempt runs on
        ctx = dataclasses.replace(kept[0], _loop=loop, _attempt=ThreadAttempt())

        def grant(ctx: NodeContext = ctx) -> None:
            ctx.grant("r-a", "r-b")

        def steer(ctx: NodeContext = ctx) -> None:
            asyncio.run(ctx.steer(SteeringKind.REDIRECT, {"goto": "lead"}, node="lead"))

        for call in (grant, steer):
            with pytest.raises(GraphError, match="event loop of its run no longer runs"):
                await asyncio.to_thread(call)
        loop.close()
