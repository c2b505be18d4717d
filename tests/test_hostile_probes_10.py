"""A hostile or careless user's tenth round: a supervisor spec's texts that show nothing or
hold a NUL, a ``sqlite:///`` URL with a percent escape, a tool's NaN.

Each test is a probe that found something (named in its docstring) or holds a decision down.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any, TypedDict

import pytest

from tinyagents import Agent, SubAgent, SubAgentTool, tool
from tinyagents.errors import (
    ArgumentError,
    ConfigurationError,
    KeywordArgumentError,
    UnknownTargetError,
)
from tinyagents.graph import START, StateGraph
from tinyagents.protocol import SteeringKind, SteeringTarget
from tinyagents.runs import RunHandle, RunInfo
from tinyagents.runtime import Runtime
from tinyagents.store import SqliteStore
from tinyagents.store import sqlite as sqlite_module
from tinyagents.store.checkpoint import MemoryCheckpointer, SqliteCheckpointer
from tinyagents.supervisor import SupervisorSpec, SupervisorSpecError
from tinyagents.testkit import ScriptedModel, reply, tool_call

# -- a supervisor spec's texts ----------------------------------------------------------------

#: Texts that show nothing though ``str.strip`` keeps them: a zero-width space, a bidi mark,
#: a control character alone (the rule of every command text, ``protocol.text.shows_nothing``).
INVISIBLE = ["\u200b", "\u202e\u200d", "\x00", "\x1b", "\x07\t"]


@pytest.mark.parametrize("text", INVISIBLE, ids=ascii)
@pytest.mark.parametrize("field", ["steer_message", "model"])
def test_a_spec_text_that_shows_nothing_is_refused_as_a_command_text_is(
    field: str, text: str
) -> None:
    """Found: the spec's "must not be blank" was ``str.strip``'s, so ``steer_message: "\\u200b"``
    was taken (a rule's steer then told the model nothing), as was a judge ``model`` of a
    zero-width space, while a command refuses such a text (``shows_nothing``). The spec now
    asks the commands' own rule."""
    with pytest.raises(SupervisorSpecError, match=rf"{field}.*must not be blank"):
        SupervisorSpec(**{field: text})
    escaped = text.encode("unicode_escape").decode()
    with pytest.raises(SupervisorSpecError, match=rf"line 1: {field}.*must not be blank"):
        SupervisorSpec.from_yaml(f'{field}: "{escaped}"\n')


def test_a_steer_message_holding_a_nul_is_refused_as_criteria_are() -> None:
    """Found: ``steer_message: "stop\\0 now"`` was taken where ``criteria`` holding a NUL is
    refused (round nine): both are text the spec has a model read, and a NUL in a file of
    settings is a slip (a YAML ``\\0`` escape), never meant. (A command's text sent at run
    time keeps a NUL, as it was sent: ``test_nul_in_command_text_is_kept_over_postgres``.)"""
    with pytest.raises(SupervisorSpecError, match=r"steer_message.*NUL"):
        SupervisorSpec(steer_message="stop\x00 now")
    with pytest.raises(SupervisorSpecError, match=r"line 1: steer_message.*NUL"):
        SupervisorSpec.from_yaml('steer_message: "stop\\0 now"\n')
    assert SupervisorSpec(steer_message="stop now").steer_message == "stop now"


# -- a sqlite:/// URL with a percent escape ---------------------------------------------------


async def test_a_percent_escape_in_a_sqlite_url_is_part_of_the_file_name(tmp_path: Path) -> None:
    """Held: ``sqlite:///%00.db`` is the file ``%00.db``, not a NUL: the path of a
    ``sqlite:///`` URL is read as SQLAlchemy reads its database part, as it is, with no
    percent-decoding (decoding would make ``sqlite:///100%25.db`` a file other than the one
    SQLAlchemy and every earlier tinyagents opened). The store, the checkpointer and a second
    runtime all name that one file; a NUL itself in the URL is refused, naming the URL."""
    url = f"sqlite:///{tmp_path}/%00.db"
    async with Runtime(store=url) as rt:
        await Agent("a", ScriptedModel([reply("ok")])).run("go", runtime=rt)
    async with SqliteCheckpointer(url) as cp:
        assert await cp.latest("no-thread") is None
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == ["%00.db"]
    async with Runtime(store=url) as again:
        assert again.store is not None
        assert [run["agent_id"] for run in await again.store.load_runs()] == ["a"]
    for raw in (f"sqlite:///{tmp_path}/\x00.db", f"sqlite:///{tmp_path}/a\ud800.db"):
        with pytest.raises(ConfigurationError, match="file name"):
            Runtime(store=raw)
        with pytest.raises(ConfigurationError, match="file name"):
            SqliteCheckpointer(raw)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == ["%00.db"]


# -- a tool's NaN -----------------------------------------------------------------------------


async def test_a_tool_result_keeps_what_json_can_hold_and_sends_nan_as_null() -> None:
    """Held: a tool's NaN or infinity reaches the model as ``null``, as pydantic-ai sends it
    (``tool_return_ta.dump_json``: pydantic's ``ser_json_inf_nan="null"``). Not an error: the
    tool ran (its side effects are done), and refusing its result would have the model call it
    again. Not ``"NaN"``: a string where a number was is a value the model may take as one,
    where ``null`` says there is none. Everything JSON holds is kept exactly: a whole number
    past any float, a float's last digit, a negative zero."""
    big = 10**400

    @tool(name="measure")
    def measure() -> Any:
        """Measure."""
        return {"nan": math.nan, "inf": [-math.inf], "big": big, "tiny": 5e-324, "zero": -0.0}

    model = ScriptedModel([tool_call("measure"), reply("measured")])
    assert (await Agent("a", model, tools=[measure]).run("go")).output == "measured"
    (sent,) = [m for m in model.requests[1].messages if m.role == "tool"]
    got = json.loads(sent.content)
    assert got == {"nan": None, "inf": [None], "big": big, "tiny": 5e-324, "zero": -0.0}
    assert math.copysign(1, got["zero"]) == -1


# -- an agent's and a sub-agent's name, a sub-agent's input -----------------------------------

#: Names that show nothing: spaces, a zero-width space, an ideographic space.
NAMELESS = ["   ", "\u200b", "\u3000"]


@pytest.mark.parametrize("name", NAMELESS, ids=ascii)
def test_an_agent_name_that_shows_nothing_is_refused(name: str) -> None:
    """Found: ``Agent("   ", ...)`` and ``Agent("\\u200b", ...)`` were taken (only ``""`` was
    refused): runs listed, logged and steered under a name that shows nothing. Now refused as
    a command's text is (``shows_nothing``)."""
    with pytest.raises(ConfigurationError, match="shows no visible character"):
        Agent(name, ScriptedModel(["x"]))


@pytest.mark.parametrize("name", [*NAMELESS, "a\x00", "a\nb", "a\u202eb", 5], ids=ascii)
def test_a_sub_agent_name_follows_the_agent_name_rule(name: Any) -> None:
    """Found: ``SubAgent(agent, name=...)`` was checked by ``str.strip`` alone: a NUL, a
    newline or a bidi control (refused in an agent's name) and a zero-width space were
    taken, and quoted to the parent model in every error of its tool. One rule now serves
    both."""
    with pytest.raises(ConfigurationError, match=r"SubAgent 'a'.*name") as caught:
        SubAgent(Agent("a", ScriptedModel(["x"])), name=name)
    assert "an agent's name" in str(caught.value).lower()
    assert SubAgent(Agent("a", ScriptedModel(["x"])), name="b").name == "b"


@pytest.mark.parametrize("task", ["", "  ", "\u200b", "\x00"], ids=ascii)
async def test_a_sub_agent_tool_called_with_input_that_shows_nothing_is_told_so(task: str) -> None:
    """Found: a sub-agent tool refused ``""`` as its ``input`` but ran the child on
    ``"\\u200b"`` (or a NUL): a child run, its model calls spent, on a task of nothing. Now the
    parent model is told, for each, as for ``""``; no child starts."""
    child = ScriptedModel(["child done"])
    parent = ScriptedModel([tool_call("child", input=task), reply("ok")])
    async with Runtime() as rt:
        handle = await rt.start(
            Agent("p", parent, tools=[SubAgentTool(Agent("child", child))]), "go"
        )
        assert (await handle.result()).output == "ok"
        assert rt.runs.tree.children(handle.run_id) == []
    (told,) = [m for m in parent.requests[1].messages if m.role == "tool"]
    assert told.content == "tool 'child' needs a non-empty string 'input'"
    assert child.requests == []


# -- a tool's description ---------------------------------------------------------------------


def test_a_tool_description_holding_a_lone_surrogate_is_refused() -> None:
    """Found: a tool (or a sub-agent) described with a lone surrogate (a ``"\\ud800"`` from
    JSON or a broken decode) was taken, and sent in every request's tool list, which no
    encoder can write: a request's messages have their surrogates replaced
    (``litellm_model._sendable``), the tool list did not. Refused when the tool is made, as a
    command's text with one is."""

    def measure() -> str:
        return "measured"

    with pytest.raises(ConfigurationError, match=r"tool 'measure': description.*surrogate"):
        tool(name="measure", description="Measure \ud800 it.")(measure)
    child = SubAgent(Agent("child", ScriptedModel(["x"])), description="finds \ud800")
    with pytest.raises(ConfigurationError, match=r"tool 'child': description.*surrogate"):
        SubAgentTool(child)
    kept = tool(name="measure", description="Measure é ✓ it.")(measure)
    assert kept.description == "Measure é ✓ it."


# -- a run handle's control methods -----------------------------------------------------------


async def _handle(rt: Runtime, run_id: str = "r-1") -> RunHandle:
    return await rt.register(RunHandle(RunInfo(run_id=run_id), submitter=rt))


@pytest.mark.parametrize(
    ("method", "kw"),
    [
        ("steer", {"target": SteeringTarget.agent_run("r-2")}),
        ("steer", {"kind": SteeringKind.PAUSE}),
        ("steer", {"payload": {"text": "other"}}),
        ("pause", {"target": SteeringTarget.agent_run("r-2")}),
        ("cancel", {"kind": SteeringKind.PAUSE}),
        ("request_status", {"payload": {}}),
        ("update_budget", {"max_model_calls": 3, "kind": SteeringKind.PAUSE}),
        ("submit", {"target": SteeringTarget.agent_run("r-2")}),
    ],
)
async def test_a_handle_method_given_a_part_of_the_command_it_sets_says_so(
    method: str, kw: dict[str, Any]
) -> None:
    """Found: ``handle.steer("x", target=...)`` (to steer another run through this one's
    handle), ``kind=`` or ``payload=`` was Python's bare ``TypeError`` ("got multiple values
    for keyword argument 'target'"). Now a ``KeywordArgumentError`` (still a ``TypeError``)
    saying what the method sets and how to send another command; nothing is sent."""
    async with Runtime(testing=True) as rt:
        handle = await _handle(rt)
        await _handle(rt, "r-2")
        args: tuple[Any, ...] = {"steer": ("x",), "submit": (SteeringKind.PAUSE,)}.get(method, ())
        with pytest.raises(KeywordArgumentError, match=rf"{method}\(\) sets .*Runtime.submit"):
            await getattr(handle, method)(*args, **kw)
        assert rt.steering_history("r-1") == rt.steering_history("r-2") == []


@pytest.mark.parametrize(("method", "flag"), [("cancel", "immediate"), ("submit", "check")])
@pytest.mark.parametrize("value", ["no", 0, None, "false"])
async def test_a_handle_flag_that_is_no_bool_is_refused(method: str, flag: str, value: Any) -> None:
    """Found: ``handle.cancel(immediate="no")`` cancelled at once (the text read as true), and
    ``submit(..., check="no")`` checked: a flag is ``True`` or ``False``, as ``testing=`` and
    a tool's ``sequential=`` are. Nothing is sent."""
    async with Runtime(testing=True) as rt:
        handle = await _handle(rt)
        args = (SteeringKind.PAUSE,) if method == "submit" else ()
        with pytest.raises(ArgumentError, match=rf"{flag}= must be True or False, got"):
            await getattr(handle, method)(*args, **{flag: value})
        assert rt.steering_history("r-1") == []


# -- a graph run given a checkpoint but no thread ---------------------------------------------


class _Count(TypedDict):
    x: int


def _inc(state: _Count) -> _Count:
    return {"x": state["x"] + 1}


@pytest.mark.parametrize("with_runtime", [False, True])
async def test_a_checkpoint_given_without_its_thread_is_refused_saying_so(
    with_runtime: bool,
) -> None:
    """Found: ``graph.run(None, checkpoint_id=ck)`` with no ``thread_id`` answered "thread
    'th-3f2a...' has no checkpoint": a thread the caller never named, made up for the run. A
    checkpoint is of one thread; the error now says to give its ``thread_id`` (still an
    ``UnknownTargetError``, as it was), and no thread is begun."""
    cp = MemoryCheckpointer()
    graph = StateGraph(_Count).add_node("inc", _inc).add_edge(START, "inc").compile(checkpointer=cp)
    async with Runtime() as rt:
        done = await graph.run({"x": 1}, thread_id="t-1", runtime=rt)
        assert done.checkpoint_id is not None
        kw: dict[str, Any] = {"runtime": rt} if with_runtime else {}
        with pytest.raises(UnknownTargetError, match=r"no thread_id was given.*give the thread_id"):
            await graph.run(None, checkpoint_id=done.checkpoint_id, **kw)
        with pytest.raises(UnknownTargetError, match="no thread_id was given"):
            await graph.start(None, checkpoint_id=done.checkpoint_id, runtime=rt)
        assert {thread for thread, _ in cp._chains} == {"t-1"}  # nothing saved elsewhere


# -- a runtime opened by two callers at once --------------------------------------------------


async def test_two_opens_at_once_open_the_runtime_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: two tasks sharing a runtime that both ``await rt.open()`` (or enter it) at once
    each opened its store (``_open`` was set only when an open ended): a second SQLite
    connection, the first left unclosed (aiosqlite's "deleted before being closed"), and a
    second inbox task that outlived the close ("could not answer the inbox: the SQLite store
    is not open"). The second open now waits for the first."""
    opened: list[str] = []
    real_open = SqliteStore.open

    async def counted(store: SqliteStore) -> None:
        opened.append(store.path)
        await real_open(store)

    monkeypatch.setattr(SqliteStore, "open", counted)
    rt = Runtime(store=f"sqlite:///{tmp_path / 'runs.db'}")
    await asyncio.gather(rt.open(), rt.__aenter__(), rt.open())
    try:
        assert len(opened) == 1, opened
        result = await Agent("a", ScriptedModel(["done"])).run("go", runtime=rt)
        assert result.output == "done"
    finally:
        await rt.close()
    async with Runtime(store=f"sqlite:///{tmp_path / 'runs.db'}") as again:
        assert [run["agent_id"] for run in await again.store.load_runs()] == ["a"]


async def test_two_opens_of_a_sqlite_store_at_once_connect_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: ``SqliteStore.open`` twice at once connected twice, the first connection left
    unclosed (aiosqlite's "deleted before being closed"): the checkpointer's ``setup`` held
    a lock for this, the store did not. Now it does."""
    connected: list[Any] = []
    real_connect = sqlite_module.connect

    async def counted(path: str, **kwargs: Any) -> Any:
        connected.append(await real_connect(path, **kwargs))
        return connected[-1]

    monkeypatch.setattr(sqlite_module, "connect", counted)
    store = SqliteStore(tmp_path / "runs.db")
    await asyncio.gather(store.open(), store.open(), store.open())
    await store.open()
    assert connected == [store._db], connected
    await store.close()
    assert store._db is None
