"""A hostile or careless user's seventh round: a run's parent, a store file's name, a
supervisor rule's tool, the steering policies, the run registry's lookups, given what they
do not take. (The operator API's probes of this round are in
``tests/server/test_hostile_api_7.py``.)

Each test is a probe that found something (named in its docstring) or holds a decision down.
"""

from __future__ import annotations

import operator
import os
import re
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents import Agent, PolicyPipeline, Runtime, SupervisorSpec
from tinyagents.errors import ArgumentError, ConfigurationError, InvalidUpdateError
from tinyagents.graph import START, StateGraph
from tinyagents.store import SqliteStore
from tinyagents.store.checkpoint import MemoryCheckpointer, SqliteCheckpointer
from tinyagents.supervisor import SupervisorSpecError
from tinyagents.testkit import ScriptedModel


class Count(TypedDict):
    n: int


def _graph() -> Any:
    return StateGraph(Count).add_node("inc", lambda s: {"n": s["n"] + 1}).add_edge(START, "inc")


# -- a run's parent ---------------------------------------------------------------------------


@pytest.mark.parametrize("parent", [5, b"r-1", ["r-1"], 1.5], ids=repr)
async def test_a_parent_that_is_no_run_handle_nor_run_id_is_refused(parent: Any) -> None:
    """Found: ``rt.start(agent, "task", parent=5)`` (and ``graph.start(..., parent=5)``) was
    ``AttributeError: 'int' object has no attribute 'run_id'``. Now a ``ConfigurationError``
    saying what ``parent=`` takes, and no run is started."""
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match="parent= takes a RunHandle or a run id"):
            await rt.start(Agent("child", ScriptedModel(["done"])), "task", parent=parent)
        with pytest.raises(ConfigurationError, match="parent= takes a RunHandle or a run id"):
            await _graph().compile().start({"n": 1}, runtime=rt, parent=parent)
        assert rt.runs.list() == []


async def test_a_parent_given_as_a_handle_or_its_id_is_still_taken() -> None:
    async with Runtime() as rt:
        top = await rt.start(Agent("top", ScriptedModel(["done"])), "task")
        by_handle = await rt.start(Agent("a", ScriptedModel(["done"])), "task", parent=top)
        by_id = await _graph().compile().start({"n": 1}, runtime=rt, parent=top.run_id)
        assert by_handle.info.parent_run_id == by_id.info.parent_run_id == top.run_id
        for handle in (top, by_handle, by_id):
            await handle.result()


# -- a store file's name ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["url", "store", "checkpointer", "checkpointer-url"])
async def test_a_store_path_ending_in_a_slash_is_refused_not_made_a_file(
    tmp_path: Path, how: str
) -> None:
    """Found: ``Runtime(store="sqlite:///runs/")`` (a folder, by its slash) made a SQLite file
    named ``runs``, and ``SqliteCheckpointer("graphs/")`` one named ``graphs``: a later
    ``runs/x.db`` then failed, its folder being a file. A path ending in a slash names a
    folder: refused, naming it, and nothing is made."""
    folder = tmp_path / "runs"
    path = f"{folder}{os.sep}"
    with pytest.raises(ConfigurationError, match="ends in a slash: it names a folder"):
        if how == "url":
            async with Runtime(store=f"sqlite:///{path}"):
                pass
        elif how == "store":
            SqliteStore(path)
        elif how == "checkpointer":
            SqliteCheckpointer(path)
        else:
            SqliteCheckpointer(f"sqlite:///{path}")
    assert not folder.exists()


async def test_a_store_path_naming_a_file_is_still_taken(tmp_path: Path) -> None:
    async with Runtime(store=f"sqlite:///{tmp_path / 'runs' / 'runs.db'}"):
        pass
    with sqlite3.connect(tmp_path / "runs" / "runs.db") as db:
        assert db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0


# -- a supervisor rule's tool -----------------------------------------------------------------


@pytest.mark.parametrize(
    "tool", ["web search", "se\u202earch", "search()", "t" * 65, "名前"], ids=repr
)
def test_a_tool_repeated_rule_naming_no_possible_tool_is_refused(tool: str) -> None:
    """Found: a ``tool_repeated`` rule took any text as its tool (``web search``, one with a
    right-to-left override, 65 letters), though the supervisor counts only the tools a run
    was granted, and a tool's name is 1-64 letters, digits, ``_`` or ``-``: the rule could
    never fire, and nothing said so (``tinyagents validate`` warns only for a graph's
    agents). Now the spec is refused naming the rule's line, in YAML as in Python."""
    text = f'rules:\n  - when: tool_repeated\n    tool: "{tool}"\n'
    with pytest.raises(SupervisorSpecError, match=r"line 3: rules\.0\.tool: .* no tool can have"):
        SupervisorSpec.from_yaml(text)
    with pytest.raises(SupervisorSpecError, match="no tool can have"):
        SupervisorSpec(rules=[{"when": "tool_repeated", "tool": tool}])


def test_a_tool_repeated_rule_naming_a_tool_name_is_still_taken() -> None:
    spec = SupervisorSpec.from_yaml("rules:\n  - when: tool_repeated\n    tool: web-search_2\n")
    assert spec.rules[0].tool == "web-search_2"  # type: ignore[union-attr]


# -- the steering policies --------------------------------------------------------------------


async def _pass_on(cmd: Any, ctx: Any, call_next: Any) -> Any:
    return await call_next(cmd)


@pytest.mark.parametrize(
    ("policies", "says"),
    [
        ([5], "policy 0 is no policy: int"),
        ("ab", "a list of policies, got str"),
        ([None], "policy 0 is no policy: NoneType"),
        ([_pass_on], "policy 0 (_pass_on) has no policy_id"),
    ],
    ids=["int", "text", "none", "function-without-id"],
)
def test_a_policy_pipeline_of_what_no_policy_is_is_refused_when_made(
    policies: Any, says: str
) -> None:
    """Found: ``PolicyPipeline([5])``, ``PolicyPipeline("ab")`` and a list holding a plain
    ``async (cmd, ctx, call_next)`` function (the shape docs/concepts.md gives, without the
    ``policy_id`` the pipeline names its decisions by) were taken, and the first command
    sent failed with ``AttributeError: ... has no attribute 'policy_id'``. Now the pipeline
    refuses it when made, and when one is added later, saying which and what it needs."""
    with pytest.raises(ConfigurationError, match=re.escape(says)):
        PolicyPipeline(policies)
    pipeline = PolicyPipeline([])
    if isinstance(policies, list):
        with pytest.raises(ConfigurationError, match=r"is no policy|has no policy_id"):
            pipeline.insert(policies[0])
        with pytest.raises(ConfigurationError, match=r"is no policy|has no policy_id"):
            pipeline.policies.append(policies[0])
        with pytest.raises(ConfigurationError, match=r"is no policy|has no policy_id"):
            pipeline.policies = policies
    assert pipeline.ids == []


async def test_a_function_policy_with_a_policy_id_still_decides() -> None:
    seen: list[str] = []

    async def audit(cmd: Any, ctx: Any, call_next: Any) -> Any:
        seen.append(cmd.kind.value)
        return await call_next(cmd)

    audit.policy_id = "audit"  # type: ignore[attr-defined]
    async with Runtime(policies=PolicyPipeline([audit])) as rt:
        handle = await rt.start(Agent("a", ScriptedModel(["done"])), "task")
        await handle.steer("look")
        await handle.result()
    assert seen == ["add_instruction"]


# -- a tool's name ----------------------------------------------------------------------------


def _look(q: str) -> str:
    """Look ``q`` up."""
    return q


@pytest.mark.parametrize("name", ["search\n", "a" * 64 + "\n"], ids=repr)
def test_a_tool_name_ending_in_a_newline_is_refused(name: str) -> None:
    """Found: the tool name rule (``^[A-Za-z0-9_-]{1,64}$``) was matched with ``re.match``,
    whose ``$`` also matches before a last newline: ``@tool(name="search\\n")`` was taken,
    and offered to the model under a name providers refuse (and no call of ``search``
    could reach). A supervisor rule took it too. Now refused, as any other name a tool
    cannot have."""
    from tinyagents import tool

    with pytest.raises(ConfigurationError, match="is not accepted by model providers"):
        tool(name=name)(_look)
    with pytest.raises(SupervisorSpecError, match="no tool can have"):
        SupervisorSpec(rules=[{"when": "tool_repeated", "tool": name}])


def test_a_tool_name_of_64_characters_is_still_taken() -> None:
    from tinyagents import tool

    assert tool(name="a" * 64)(_look).name == "a" * 64


# -- a graph's reducers -----------------------------------------------------------------------


class Log(TypedDict):
    log: Annotated[list, operator.add]


def _logged(state: Log) -> dict[str, Any]:
    return {"log": ["ran"]}


@pytest.mark.parametrize("saver", [None, "memory"])
@pytest.mark.parametrize("value", [5, "ab", None], ids=repr)
async def test_an_input_its_reducer_refuses_is_an_invalid_update_naming_the_key(
    saver: str | None, value: Any
) -> None:
    """Found: ``graph.run({"log": 5})`` on an ``Annotated[list, operator.add]`` key raised
    the reducer's bare ``TypeError: can only concatenate list (not "int") to list``, where
    ``update_state`` with the same value is an ``InvalidUpdateError`` naming the key and its
    reducer. Now the input is refused as the update is; nothing is saved."""
    graph = StateGraph(Log).add_node("n", _logged).add_edge(START, "n")
    compiled = graph.compile(checkpointer=MemoryCheckpointer() if saver else None)
    thread = {"thread_id": "t"} if saver else {}
    with pytest.raises(InvalidUpdateError, match=r"the reducer of 'log' \(add\) refused the input"):
        await compiled.run({"log": value}, **thread)
    if saver:
        assert (await compiled.history("t")) == []
        result = await compiled.run({"log": ["in"]}, thread_id="t")
        assert result.state == {"log": ["in", "ran"]}


async def _async_add(current: list[Any], update: list[Any]) -> list[Any]:
    return current + update


def _generator_add(current: list[Any], update: list[Any]) -> Any:
    yield current + update


class AsyncReduced(TypedDict):
    log: Annotated[list, _async_add]


class GeneratorReduced(TypedDict):
    log: Annotated[list, _generator_add]


@pytest.mark.parametrize(
    ("state", "fn"),
    [(AsyncReduced, "_async_add"), (GeneratorReduced, "_generator_add")],
    ids=["async", "generator"],
)
def test_a_reducer_that_returns_no_value_when_called_is_refused(state: type, fn: str) -> None:
    """Found: an ``async def`` reducer (or a generator function) was taken, and the run
    ended ``completed`` with a coroutine (a generator) as the key's value, and a
    "coroutine was never awaited" warning: a reducer is called, never awaited. Now the state
    is refused when the graph is built, naming the key and the function."""
    with pytest.raises(
        ConfigurationError, match=f"the reducer of 'log' in {state.__name__} is {fn}"
    ):
        StateGraph(state)


# -- streams ----------------------------------------------------------------------------------


async def _drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


@pytest.mark.parametrize("mode", [5, None], ids=repr)
async def test_an_agent_run_stream_of_no_mode_is_refused_saying_which_it_takes(mode: Any) -> None:
    """Found: ``handle.stream(5)`` (or ``None``) of an agent run was ``TypeError: 'int'
    object is not iterable``; ``"bogus"`` was already told the modes it takes. Now both,
    as a graph's stream refuses them."""
    async with Runtime() as rt:
        handle = await rt.start(Agent("a", ScriptedModel(["done"])), "task")
        with pytest.raises(ConfigurationError, match="an agent run streams 'events'"):
            handle.stream(mode)
        await handle.result()


@pytest.mark.parametrize("subgraphs", ["no", 0, 1, None], ids=repr)
async def test_subgraphs_that_is_no_bool_is_refused(subgraphs: Any) -> None:
    """Found: ``graph.stream(..., subgraphs="no")`` was read as true (non-empty text): every
    item came as a ``(namespace, payload)`` pair, which a caller reading payloads then
    misread; ``get_state(thread, subgraphs="no")`` read the sub-graphs' states. Now
    ``subgraphs`` is ``True`` or ``False``, else a ``ConfigurationError``, as ``observe_only``
    and ``testing=`` are."""
    compiled = _graph().compile(checkpointer=MemoryCheckpointer())
    with pytest.raises(ConfigurationError, match="subgraphs= is True or False"):
        await _drain(compiled.stream({"n": 1}, thread_id="t", subgraphs=subgraphs))
    await compiled.run({"n": 1}, thread_id="t")
    with pytest.raises(ConfigurationError, match="subgraphs= is True or False"):
        await compiled.get_state("t", subgraphs=subgraphs)
    plain = await _drain(compiled.stream({"n": 1}, thread_id="t2", subgraphs=False))
    assert plain == [{"n": 1}, {"n": 2}]


# -- the runtime's lookups --------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
async def test_a_lookup_by_an_id_no_run_can_have_finds_none_on_every_store(
    tmp_path: Path, backend: str
) -> None:
    """Found: ``rt.load_steering_history("r\\x00")`` was ``[]`` in memory and on SQLite and a
    ``StoreError`` on PostgreSQL ("invalid byte sequence for encoding UTF8"), which reads as
    the store being out of reach; ``load_steering_history(5)`` the same, and ``rt.tree(5)``,
    ``rt.steering_history(5)`` and ``rt.runs.list(tenant_id=5)`` answered "none" for a value
    of the wrong type. Now a run id (or tenant) that is no text is an ``ArgumentError``, and
    text no run can have (a NUL, a lone surrogate, past the length bound) finds nothing, on
    every store."""
    store = {"memory": None, "sqlite": f"sqlite:///{tmp_path / 'runs.db'}"}.get(backend)
    if backend == "postgres":
        store = f"{postgres_dsn()}?schema={pg_schema()}"
    try:
        await _look_up_odd_ids(store)
    finally:
        await drop_pg_schemas()


async def _look_up_odd_ids(store: str | None) -> None:
    async with Runtime(store=store) as rt:
        for odd in ("r-\x00", "r-\ud800", "r" * 300):
            assert await rt.load_steering_history(odd) == []
            assert rt.steering_history(odd) == []
            assert rt.tree(odd) is None
            rt.forget(odd)
        for wrong in (5, None, b"r-1"):
            with pytest.raises(ArgumentError, match="is a run id"):
                await rt.load_steering_history(wrong)  # type: ignore[arg-type]
            with pytest.raises(ArgumentError, match="is a run id"):
                rt.steering_history(wrong)  # type: ignore[arg-type]
            with pytest.raises(ArgumentError, match="is a run id"):
                rt.tree(wrong)  # type: ignore[arg-type]
            with pytest.raises(ArgumentError, match="is a run id"):
                rt.forget(wrong)  # type: ignore[arg-type]
        with pytest.raises(ArgumentError, match="tenant_id is a tenant id"):
            rt.runs.list(tenant_id=5)  # type: ignore[arg-type]
        handle = await rt.start(Agent("a", ScriptedModel(["done"])), "task", tenant_id="acme")
        await handle.steer("look")
        await handle.result()
        assert [i.run_id for i in rt.runs.list(tenant_id="acme")] == [handle.run_id]
        assert rt.tree(handle.run_id) is not None
        assert rt.steering_history(handle.run_id)
        assert await rt.load_steering_history(handle.run_id)


# -- the server's key file --------------------------------------------------------------------


@pytest.mark.parametrize("where", ["key-file", "store"])
def test_a_key_file_in_a_folder_that_does_not_exist_is_named_as_such(
    tmp_path: Path, where: str
) -> None:
    """Found: ``tinyagents token mint --key-file nodir/k.key`` (or ``--store
    sqlite:///nodir/runs.db``, whose key file sits beside it) said "cannot create the server
    key file nodir/k.key: [Errno 2] No such file or directory: 'nodir/.k.key.1234.tmp'",
    naming a temporary file the user never asked for. Now it names the folder that does not
    exist and says nothing was written."""
    import subprocess
    import sys

    place = (
        ("--key-file", "nodir/k.key")
        if where == "key-file"
        else ("--store", "sqlite:///nodir/runs.db")
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tinyagents.cli",
            "token",
            "mint",
            "--tenant",
            "a",
            "--user",
            "u",
            *place,
        ],
        cwd=tmp_path,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "its folder nodir does not exist" in done.stderr, done.stderr
    assert ".tmp" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "nodir").exists()
