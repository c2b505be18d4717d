"""``compile(supervisor=spec)``: the spec watches every agent run inside the graph (its agent
nodes, in sub-graphs too, and their sub-agents); static validation warns on each agent node
whose ``aborted`` outcome the graph does not route."""

from __future__ import annotations

import logging
import operator
from typing import Annotated, Any, TypedDict

import pytest

from tinyagents import Agent, Runtime, SubAgent, SubAgentTool, SupervisorSpec, tool
from tinyagents.errors import ConfigurationError, GraphValidationError
from tinyagents.events import Event
from tinyagents.graph import END, START, AgentNode, Command, StateGraph
from tinyagents.supervisor.validate import validate_graph
from tinyagents.testkit import EventRecorder, ScriptedModel, reply, tool_call

ABORT_ON_LOOP = SupervisorSpec.from_yaml(
    """
rules:
  - when: tool_repeated
    tool: search
    count: 2
on_violation: abort
"""
)
STEER_AT_FIRST = SupervisorSpec(
    rules=[{"when": "iteration_reached", "gte": 1}], on_violation="steer"
)


class Doc(TypedDict, total=False):
    topic: str
    draft: str
    why: str
    path: Annotated[list[str], operator.add]


@tool
def search(query: str) -> str:
    """Search the web."""
    return "nothing new"


def looper(name: str = "writer", **kw: Any) -> Agent:
    model = ScriptedModel([tool_call("search", query="q")] * 5 + [reply("done")])
    return Agent(name, model, tools=[search], **kw)


def graph_of(agent: Agent, spec: SupervisorSpec | None = None) -> Any:
    graph = StateGraph(Doc).add_node("writer", AgentNode(agent, input="topic", output="draft"))
    return graph.add_edge(START, "writer").add_edge("writer", END).compile(supervisor=spec)


def actions(events: list[Event]) -> list[tuple[str | None, str | None, str]]:
    return [
        (e.run_id, getattr(e, "action", None), e.data["source"])
        for e in events
        if e.type == "supervisor.action"
    ]


def agent_runs(rt: Runtime) -> dict[str, str]:
    return {i.agent_id or "": i.run_id for i in rt.runs.list() if i.kind == "agent"}


async def test_the_graphs_spec_aborts_its_agent_node_and_the_graph_run_fails() -> None:
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:  # no runtime spec: only the graph's
        result = await graph_of(looper(), ABORT_ON_LOOP).run({"topic": "t"}, runtime=rt)
        runs = agent_runs(rt)

    assert actions(recorder.events) == [(runs["writer"], "abort", "tool_repeated")]
    assert result.status == "failed" and "ended aborted" in str(result.error)
    assert "tool 'search' called 2 times" in str(result.error)


async def test_a_graph_without_a_spec_is_not_watched() -> None:
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        result = await graph_of(looper()).run({"topic": "t"}, runtime=rt)

    assert actions(recorder.events) == []
    assert result.status == "completed" and result.state["draft"] == "done"


async def test_sub_agents_of_an_agent_node_and_sub_graphs_are_watched_too() -> None:
    child = Agent("researcher", ScriptedModel(["found"]))
    lead = Agent(
        "lead",
        ScriptedModel([tool_call("researcher", {"input": "look"}), reply("written")]),
        tools=[SubAgentTool(SubAgent(child))],
    )
    inner = StateGraph(Doc).add_node("lead", AgentNode(lead, input="topic", output="draft"))
    inner_graph = inner.add_edge(START, "lead").add_edge("lead", END).compile()
    outer = StateGraph(Doc).add_node("inner", inner_graph)
    graph = outer.add_edge(START, "inner").add_edge("inner", END).compile(supervisor=STEER_AT_FIRST)
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        result = await graph.run({"topic": "t"}, runtime=rt)
        runs = agent_runs(rt)

    assert result.status == "completed", result.error
    assert sorted(actions(recorder.events)) == sorted(
        [
            (runs["lead"], "steer", "iteration_reached"),
            (runs["researcher"], "steer", "iteration_reached"),
        ]
    )


async def test_an_agents_own_spec_wins_over_the_graphs() -> None:
    quiet = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 99}])
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        result = await graph_of(looper(supervisor=quiet), ABORT_ON_LOOP).run(
            {"topic": "t"}, runtime=rt
        )

    assert actions(recorder.events) == []
    assert result.status == "completed"


async def test_the_graphs_spec_wins_over_the_runtimes() -> None:
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder], supervisor=STEER_AT_FIRST) as rt:
        await graph_of(looper(), ABORT_ON_LOOP).run({"topic": "t"}, runtime=rt)
        plain = await (await rt.start(looper("alone"), "go")).result()
        runs = agent_runs(rt)

    assert actions(recorder.events) == [
        (runs["writer"], "abort", "tool_repeated"),
        (runs["alone"], "steer", "iteration_reached"),
    ]
    assert plain.status.value == "completed"


@pytest.mark.parametrize("outer_spec", [None, STEER_AT_FIRST])
async def test_a_sub_graphs_own_spec_watches_its_agent_nodes(
    outer_spec: SupervisorSpec | None,
) -> None:
    # the nearest graph's spec: a sub-graph's compile(supervisor=...) was ignored, so its
    # agent nodes ran under the outer graph's spec (or none)
    outer = StateGraph(Doc).add_node("inner", graph_of(looper(), ABORT_ON_LOOP))
    graph = outer.add_edge(START, "inner").add_edge("inner", END)
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        result = await graph.compile(supervisor=outer_spec).run({"topic": "t"}, runtime=rt)
        runs = agent_runs(rt)

    assert actions(recorder.events) == [(runs["writer"], "abort", "tool_repeated")]
    assert result.status == "failed" and "ended aborted" in str(result.error)


async def test_an_outer_graphs_spec_watches_the_nodes_of_a_sub_graph_without_one() -> None:
    inner = graph_of(looper())
    outer = StateGraph(Doc).add_node("inner", inner)
    graph = outer.add_edge(START, "inner").add_edge("inner", END).compile(supervisor=ABORT_ON_LOOP)
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        await graph.run({"topic": "t"}, runtime=rt)
        runs = agent_runs(rt)

    assert actions(recorder.events) == [(runs["writer"], "abort", "tool_repeated")]


@pytest.mark.parametrize(
    ("outer_spec", "inner_spec", "warned"),
    [
        (None, ABORT_ON_LOOP, True),
        (STEER_AT_FIRST, ABORT_ON_LOOP, True),
        (ABORT_ON_LOOP, STEER_AT_FIRST, False),
        (ABORT_ON_LOOP, None, True),
    ],
)
def test_validate_graph_judges_each_agent_node_under_its_nearest_spec(
    outer_spec: SupervisorSpec | None, inner_spec: SupervisorSpec | None, warned: bool
) -> None:
    outer = StateGraph(Doc).add_node("inner", graph_of(looper(), inner_spec))
    graph = outer.add_edge(START, "inner").add_edge("inner", END).compile(supervisor=outer_spec)
    messages = [f.message for f in validate_graph(graph)]
    assert [m for m in messages if "'inner/writer'" in m] == ([messages[0]] if warned else [])
    assert len(messages) == int(warned)


def test_compile_refuses_what_is_not_a_spec() -> None:
    graph = StateGraph(Doc).add_node("writer", AgentNode(looper(), input="topic", output="draft"))
    with pytest.raises(ConfigurationError, match="takes a SupervisorSpec, got str"):
        graph.add_edge(START, "writer").add_edge("writer", END).compile(
            supervisor="abort"  # type: ignore[arg-type]
        )
    with pytest.raises(ConfigurationError, match="got the class SupervisorSpec"):
        graph.compile(supervisor=SupervisorSpec)  # type: ignore[arg-type]


def test_compile_warns_on_each_agent_node_whose_aborted_outcome_is_not_routed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner = StateGraph(Doc).add_node(
        "lead", AgentNode(looper("lead"), input="topic", output="draft")
    )
    inner_graph = inner.add_edge(START, "lead").add_edge("lead", END).compile(name="inner")

    def plain(state: Doc) -> dict[str, str]:
        return {"draft": "x"}

    outer = (
        StateGraph(Doc)
        .add_node("writer", AgentNode(looper(), input="topic", output="draft"))
        .add_node("inner", inner_graph)
        .add_node("plain", plain)
        .add_edge(START, "writer")
        .add_edge("writer", "inner")
        .add_edge("inner", "plain")
        .add_edge("plain", END)
    )
    with caplog.at_level(logging.WARNING, logger="tinyagents.supervisor"):
        graph = outer.compile(name="triage", supervisor=ABORT_ON_LOOP)

    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2
    assert "agent node 'writer' of graph 'triage'" in warned[0]
    assert "agent node 'inner/lead'" in warned[1]
    assert all("'aborted' outcome is not routed" in w and "on_aborted=" in w for w in warned)
    findings = validate_graph(graph)
    assert [f.message for f in findings if f.severity == "warning"] == [
        r.removeprefix("compile(supervisor=...): ") for r in warned
    ]
    # A spec that can never abort (steer only) has nothing to warn about.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tinyagents.supervisor"):
        steering = outer.compile(supervisor=STEER_AT_FIRST)
    assert caplog.records == [] and validate_graph(steering) == []


def test_validate_graph_without_a_spec_says_how_to_attach_one() -> None:
    graph = graph_of(looper())
    [finding] = validate_graph(graph)
    assert finding.severity == "warning" and "compile(supervisor=spec)" in finding.message
    assert len(validate_graph(graph, ABORT_ON_LOOP)) == 1


def routed_graph(
    agent: Agent, spec: SupervisorSpec | None, destinations: tuple[str, ...] = (), **routing: Any
) -> Any:
    def review(state: Doc) -> dict[str, Any]:
        return {"path": ["review"]}

    def publish(state: Doc) -> dict[str, Any]:
        return {"path": ["publish"]}

    node = AgentNode(agent, input="topic", output="draft", **routing)
    return (
        StateGraph(Doc)
        .add_node("writer", node, destinations=destinations)
        .add_node("review", review)
        .add_node("publish", publish)
        .add_edge(START, "writer")
        .add_edge("review", END)
        .add_edge("publish", END)
        .compile(supervisor=spec)
    )


async def test_an_aborted_agent_node_goes_to_its_on_aborted_node_with_the_reason() -> None:
    graph = routed_graph(
        looper(), ABORT_ON_LOOP, then="publish", on_aborted="review", aborted_key="why"
    )
    async with Runtime() as rt:
        result = await graph.run({"topic": "t"}, runtime=rt)
        [writer] = [i for i in rt.runs.list() if i.kind == "agent"]

    assert result.status == "completed"
    assert writer.status == "aborted"
    assert result.state["path"] == ["review"]  # not publish: the edge of a completed run
    assert "tool 'search' called 2 times" in result.state["why"]
    assert "draft" not in result.state


async def test_a_completed_routing_agent_node_goes_to_then_with_its_output() -> None:
    agent = Agent("writer", ScriptedModel([reply("a draft")]))
    graph = routed_graph(agent, ABORT_ON_LOOP, then="publish", on_aborted="review")
    async with Runtime() as rt:
        result = await graph.run({"topic": "t"}, runtime=rt)

    assert result.status == "completed"
    assert result.state["path"] == ["publish"] and result.state["draft"] == "a draft"


async def test_on_aborted_may_be_a_function_of_the_result_returning_a_command() -> None:
    def decide(result: Any, state: Doc) -> Command:
        return Command(update={"why": f"{result.status.value}: {state['topic']}"}, goto="review")

    graph = routed_graph(looper(), ABORT_ON_LOOP, ("review",), then="publish", on_aborted=decide)
    async with Runtime() as rt:
        result = await graph.run({"topic": "t"}, runtime=rt)

    assert result.status == "completed"
    assert result.state["path"] == ["review"] and result.state["why"] == "aborted: t"


def test_a_routing_agent_node_is_not_warned_about_and_its_targets_are_validated(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="tinyagents.supervisor"):
        graph = routed_graph(looper(), ABORT_ON_LOOP, then="publish", on_aborted="review")
    assert caplog.records == [] and validate_graph(graph) == []
    assert "n_writer -. goto .-> n_review" in graph.to_mermaid()
    # an unknown target is refused at compile, like any other edge
    with pytest.raises(GraphValidationError, match=r"unknown nodes.*'nowhere'"):
        routed_graph(looper(), ABORT_ON_LOOP, then="publish", on_aborted="nowhere")


def test_a_routing_agent_node_with_its_own_edges_is_refused() -> None:
    graph = (
        StateGraph(Doc)
        .add_node("writer", AgentNode(looper(), input="topic", on_aborted=END))
        .add_edge(START, "writer")
        .add_edge("writer", END)
    )
    with pytest.raises(ConfigurationError, match=r"\['writer'\] route their outcomes"):
        graph.compile()


def test_then_and_aborted_key_need_on_aborted() -> None:
    with pytest.raises(ConfigurationError, match="go with on_aborted"):
        AgentNode(looper(), then="publish")
    with pytest.raises(ConfigurationError, match="goes with on_aborted=<node name>"):
        AgentNode(looper(), on_aborted=lambda r, s: Command(goto=END), aborted_key="why")


def test_a_spec_whose_rules_all_steer_warns_about_no_node(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # every rule says "then: steer" and there is no judge, so on_violation (default pause)
    # is never used: nothing can pause or abort a node's run, yet compile warned about each
    # agent node as if the default pause could become an abort
    steer_only = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1, "then": "steer"}])
    assert not steer_only.can_abort()
    with caplog.at_level(logging.WARNING, logger="tinyagents.supervisor"):
        graph = graph_of(looper(), steer_only)
    assert caplog.records == [] and validate_graph(graph) == []
    # a rule without "then", or a judge, does use on_violation
    assert SupervisorSpec(rules=[{"when": "iteration_reached"}]).can_abort()
    judged = SupervisorSpec(
        rules=[{"when": "iteration_reached", "then": "steer"}], model=ScriptedModel([])
    )
    assert judged.can_abort()


def test_compile_warns_of_a_tool_repeated_rule_for_a_tool_no_watched_agent_has(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Agent(supervisor=spec) refuses such a rule; a graph's spec took it without a word, and
    # a misspelt tool name left every agent node of the graph without that rule
    def steer_on(tool: str) -> SupervisorSpec:  # a spec that cannot abort: no other warning
        return SupervisorSpec(rules=[{"when": "tool_repeated", "tool": tool, "then": "steer"}])

    misspelt = steer_on("serach")
    with caplog.at_level(logging.WARNING, logger="tinyagents.supervisor"):
        graph = graph_of(looper(), misspelt)
    [warned] = [r.getMessage() for r in caplog.records]
    assert warned == (
        "compile(supervisor=...): rules.0 (tool_repeated) counts tool 'serach', which no "
        "agent run the spec watches in graph 'graph' has (search), so it could never fire; "
        "name one of their tools, or leave 'tool' out to count each of them"
    )
    assert [f.message for f in validate_graph(graph)] == [
        warned.removeprefix("compile(supervisor=...): ")
    ]

    # a sub-agent's tools count (its runs are watched under the graph's spec), as do those
    # of an agent node in a sub-graph without a spec of its own
    researcher = Agent("researcher", ScriptedModel([reply("x")]), tools=[search])
    lead = Agent("lead", ScriptedModel([reply("x")]), tools=[SubAgentTool(SubAgent(researcher))])
    inner = graph_of(lead)
    outer = StateGraph(Doc).add_node("inner", inner).add_edge(START, "inner")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tinyagents.supervisor"):
        fine = outer.add_edge("inner", END).compile(supervisor=steer_on("search"))
    assert caplog.records == [] and validate_graph(fine) == []
