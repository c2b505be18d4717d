"""A SQLite checkpoint row whose key columns hold what no checkpointer wrote (SQLite keeps
text in an INTEGER column) is a ``StoreError`` naming the checkpoint, as a damaged body is:
a ``step`` of 'abc' was a bare ``TypeError`` out of ``get_state`` and ``run`` ("can only
concatenate str"), and ``history`` handed it on as the step. So is a pending write whose kind
is none a checkpointer writes (it was skipped)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from graphkit import LogState

from tinyagents.errors import ArgumentError, StoreError
from tinyagents.graph import END, START, Command, Send, StateGraph, TimeoutPolicy, interrupt
from tinyagents.store.checkpoint import (
    Checkpointer,
    CheckpointRecord,
    SqliteCheckpointer,
    WriteRecord,
)
from tinyagents.store.checkpoint.base import WRITE_KINDS


def _checkpoint(seq: int) -> CheckpointRecord:
    return CheckpointRecord(
        thread_id="t",
        checkpoint_id=f"c{seq}",
        parent_id=f"c{seq - 1}" if seq else None,
        seq=seq,
        step=seq,
        snapshot=seq == 0,
        values={"n": seq},
        frontier=[{"node": "a"}],
        frontier_id=f"f{seq}",
        lineage="L",
        source="loop",
    )


@pytest.mark.parametrize(
    ("column", "value"),
    [("step", "abc"), ("step", 1.5), ("seq", "x"), ("seq", 2.5), ("created_at", "soon")],
)
async def test_a_damaged_key_column_is_a_store_error_naming_the_checkpoint(
    tmp_path: Path, column: str, value: object
) -> None:
    path = tmp_path / "cp.db"
    async with SqliteCheckpointer(path) as cp:
        await cp.put(_checkpoint(0))
        await cp.put(_checkpoint(1))
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE checkpoints SET {column} = ? WHERE checkpoint_id = 'c1'", (value,))
    db.close()
    async with SqliteCheckpointer(path) as cp:
        for read in (
            lambda: cp.latest("t"),
            lambda: cp.get("t", "c1"),
            lambda: cp.chain("t"),
            lambda: cp.list("t"),
        ):
            with pytest.raises(StoreError, match=rf"checkpoint 'c1' of thread 't'.*{column}"):
                await read()
        assert (await cp.get("t", "c0") or _checkpoint(9)).values == {"n": 0}  # others read


@pytest.mark.parametrize(("pid", "expires_at"), [(1, "never"), ("notapid", 1e20), (2.5, 1.0)])
async def test_a_damaged_lease_row_is_a_store_error_naming_the_thread(
    tmp_path: Path, pid: object, expires_at: object
) -> None:
    # a lease whose expiry is text was a bare TypeError ('<' between str and float) out of the
    # next run of the thread; nothing is written past it
    path = tmp_path / "cp.db"
    async with SqliteCheckpointer(path) as cp:
        await cp.put(_checkpoint(0))
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO thread_leases (thread_id, owner, host, pid, expires_at)"
            " VALUES ('t', 'someone', 'elsewhere', ?, ?)",
            (pid, expires_at),
        )
    db.close()
    async with SqliteCheckpointer(path) as cp:
        with pytest.raises(StoreError, match=r"lease of thread 't' no longer reads"):
            await cp._acquire_lease("t", "me")
        assert [c.checkpoint_id for c in await cp.list("t")] == ["c0"]


def _two_questions(cp: SqliteCheckpointer) -> Any:
    """One task asking two questions in turn: its answer to the first is a pending ``resume``
    write while it asks the second."""

    def ask(state: Any) -> dict[str, Any]:
        return {"log": [f"{interrupt('first?')}+{interrupt('second?')}"]}

    graph = StateGraph(LogState).add_node("ask", ask)
    return graph.add_edge(START, "ask").add_edge("ask", END).compile(checkpointer=cp)


@pytest.mark.parametrize("kind", ["bogus", "Resume", b"resume"], ids=["bogus", "case", "blob"])
async def test_a_damaged_pending_write_kind_is_a_store_error_naming_the_thread(
    tmp_path: Path, kind: object
) -> None:
    # a write whose kind no checkpointer writes was skipped: the answer to the first question
    # was lost without a word, and the thread's next resume asked the first question again
    path = tmp_path / "cp.db"
    async with SqliteCheckpointer(path) as cp:
        graph = _two_questions(cp)
        first = await graph.run({}, thread_id="t")
        second = await graph.run(Command(resume={first.interrupts[0].id: "a"}), thread_id="t")
        assert [i.value for i in second.interrupts] == ["second?"]
    with sqlite3.connect(path) as db:
        changed = db.execute("UPDATE checkpoint_writes SET kind = ? WHERE kind = 'resume'", (kind,))
        assert changed.rowcount == 1
    db.close()
    said = r"pending write of task '[^']+' of thread 't', frontier '[^']+', no longer reads: its"
    async with SqliteCheckpointer(path) as cp:
        graph = _two_questions(cp)
        with pytest.raises(StoreError, match=f"{said} kind column holds {re.escape(repr(kind))}"):
            await graph.get_state("t")
        result = await graph.run(Command(resume={second.interrupts[0].id: "b"}), thread_id="t")
        assert result.status == "failed" and isinstance(result.error, StoreError)
        assert "thread 't'" in str(result.error) and "kind column" in str(result.error)
        assert result.interrupts == []


async def test_every_backend_refuses_to_save_a_pending_write_of_a_kind_no_checkpointer_writes(
    checkpointer: Checkpointer,
) -> None:
    """Refused when written, not only when read (a write of a made-up kind was saved, and
    every later read of its frontier failed): nothing of the call is saved."""
    fine = [WriteRecord(task_id="a", kind=kind) for kind in sorted(WRITE_KINDS)]
    await checkpointer.put_writes("t", "", "f0", fine)
    assert [w.kind for w in await checkpointer.get_writes("t", "", "f0")] == sorted(WRITE_KINDS)
    later = [WriteRecord(task_id="b", kind="result"), WriteRecord(task_id="b", kind="later")]
    with pytest.raises(ArgumentError, match=r"task 'b'.*kind 'later'.*result"):
        await checkpointer.put_writes("t", "", "f0", later)
    assert [w.task_id for w in await checkpointer.get_writes("t", "", "f0")] == ["a"] * 6


def _sent_with_timeout(cp: SqliteCheckpointer) -> Any:
    """START sends ``ask`` a task with its own timeout; ``ask`` asks a question, so the
    thread rests with that ``Send`` (and its timeout) in its head checkpoint's frontier. With
    ``pair``: ``ask`` and ``go`` run in one step, ``go`` sending ``after`` a task with a
    timeout from its result, a pending write while ``ask`` waits for its answer."""

    def ask(state: Any) -> dict[str, Any]:
        return {"log": [str(interrupt("why?"))]}

    def go(state: Any) -> Command:
        return Command(update={"log": ["go"]}, goto=[Send("after", {}, timeout=5.0)])

    graph = (
        StateGraph(LogState)
        .add_node("ask", ask)
        .add_node("go", go)
        .add_node("after", lambda arg: {"log": ["after"]})
    )
    graph.add_conditional_edges(
        START, lambda s: [Send("ask", {}, timeout=TimeoutPolicy(idle_timeout=5.0)), "go"]
    )
    return graph.add_edge("ask", END).add_edge("after", END).compile(checkpointer=cp)


@pytest.mark.parametrize(
    "damaged",
    ['"soon"', '{"run_timeout": "soon"}', '{"bogus": 1}', '{"run_timeout": -1}', "[1]"],
    ids=["text", "text-field", "unknown-field", "negative", "list"],
)
@pytest.mark.parametrize("where", ["frontier", "pending write"])
async def test_a_damaged_send_timeout_is_a_store_error_naming_where_it_is_saved(
    tmp_path: Path, damaged: str, where: str
) -> None:
    # a Send's saved timeout that no longer makes a TimeoutPolicy was a bare TypeError (an
    # unknown field, a string) or ArgumentError out of get_state and run, naming nothing
    path = tmp_path / "cp.db"
    async with SqliteCheckpointer(path) as cp:
        first = await _sent_with_timeout(cp).run({}, thread_id="t")
        assert [i.value for i in first.interrupts] == ["why?"]
    table, key, column = (
        ("checkpoints", "checkpoint_id", "body")
        if where == "frontier"
        else ("checkpoint_writes", "rowid", "value")
    )
    with sqlite3.connect(path) as db:
        changed = 0
        for row, text in db.execute(f"SELECT {key}, {column} FROM {table}").fetchall():
            if '"timeout":{' in text:
                new = re.sub(r'"timeout":\{[^}]*\}', f'"timeout":{damaged}', text)
                db.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (new, row))
                changed += 1
        assert changed >= 1
    db.close()
    if where == "frontier":
        said = r"checkpoint '[^']+' of thread 't' no longer reads: the timeout of its Send to 'ask'"
    else:
        said = (
            r"pending write of task '[^']+' of thread 't', frontier '[^']+', no longer reads: "
            r"the timeout of its Send to 'after'"
        )
    async with SqliteCheckpointer(path) as cp:
        graph = _sent_with_timeout(cp)
        with pytest.raises(StoreError, match=said):
            await graph.get_state("t")
        result = await graph.run(Command(resume="because"), thread_id="t")
        assert result.status == "failed" and isinstance(result.error, StoreError)
        assert re.search(said, str(result.error))


async def test_a_damaged_timeout_inside_a_sent_command_is_a_store_error_naming_it(
    tmp_path: Path,
) -> None:
    # a Command sent as a Send's argument is saved with its own Sends: a damaged timeout of
    # one of those is the same StoreError naming the checkpoint (two fixes crossed here: the
    # nested Send was read without saying where it was saved, a TypeError of the reader)
    def build(cp: SqliteCheckpointer) -> Any:
        def ask(arg: Any) -> dict[str, Any]:
            return {"log": [str(interrupt("why?"))]}

        graph = StateGraph(LogState).add_node("ask", ask).add_node("after", lambda a: {})
        sent = Command(goto=[Send("after", {}, timeout=5.0)])
        graph.add_conditional_edges(START, lambda s: [Send("ask", sent)])
        return graph.add_edge("ask", END).add_edge("after", END).compile(checkpointer=cp)

    path = tmp_path / "cp.db"
    async with SqliteCheckpointer(path) as cp:
        first = await build(cp).run({}, thread_id="t")
        assert [i.value for i in first.interrupts] == ["why?"]
        state = await build(cp).get_state("t")
        assert [t.name for t in state.tasks] == ["ask"]
    with sqlite3.connect(path) as db:
        changed = 0
        for row, text in db.execute("SELECT checkpoint_id, body FROM checkpoints").fetchall():
            if '"timeout":{' in text:
                new = re.sub(r'"timeout":\{[^}]*\}', '"timeout":"soon"', text)
                db.execute("UPDATE checkpoints SET body = ? WHERE checkpoint_id = ?", (new, row))
                changed += 1
        assert changed >= 1
    db.close()
    said = r"checkpoint '[^']+' of thread 't' no longer reads: the timeout of its Send to 'after'"
    async with SqliteCheckpointer(path) as cp:
        with pytest.raises(StoreError, match=said):
            await build(cp).get_state("t")


@pytest.mark.parametrize(
    "damaged",
    [
        ("goto", None),  # a field gone
        ("goto", 5),  # of no type a goto has
        ("goto", [5]),  # an item that is no name and no Send
        ("goto", [{"node": "ask"}]),  # a Send without its argument
    ],
    ids=["no-goto", "goto-number", "goto-item", "goto-send-without-arg"],
)
async def test_a_damaged_sent_command_is_a_store_error_naming_its_checkpoint(
    tmp_path: Path, damaged: tuple[str, Any]
) -> None:
    # a Command sent as a Send's argument, damaged in its saved checkpoint, came out of
    # get_state as a bare KeyError or TypeError
    def build(cp: SqliteCheckpointer) -> Any:
        def ask(arg: Any) -> dict[str, Any]:
            return {"log": [str(interrupt("why?"))]}

        graph = StateGraph(LogState).add_node("ask", ask)
        graph.add_conditional_edges(START, lambda s: [Send("ask", Command(goto="ask"))])
        return graph.add_edge("ask", END).compile(checkpointer=cp)

    path = tmp_path / "cp.db"
    async with SqliteCheckpointer(path) as cp:
        await build(cp).run({}, thread_id="t")
    field, value = damaged
    with sqlite3.connect(path) as db:
        changed = 0
        for row, text in db.execute("SELECT checkpoint_id, body FROM checkpoints").fetchall():
            body = json.loads(text)
            for planned in body.get("frontier") or []:
                if isinstance(planned, dict) and planned.get("arg_type", "").endswith(":Command"):
                    if value is None:
                        planned["arg"].pop(field)
                    else:
                        planned["arg"][field] = value
                    changed += 1
            db.execute(
                "UPDATE checkpoints SET body = ? WHERE checkpoint_id = ?", (json.dumps(body), row)
            )
        assert changed >= 1
    db.close()
    said = r"checkpoint '[^']+' of thread 't' no longer reads: the Command sent to 'ask'"
    async with SqliteCheckpointer(path) as cp:
        with pytest.raises(StoreError, match=said):
            await build(cp).get_state("t")
