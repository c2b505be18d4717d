"""A graph run left ``interrupted`` by a runtime that closed cleanly: its process is gone, so
a command sent to it through the store gets an immediate answer that says how to go on,
not a ``ReceiptTimeout`` from an inbox nobody reads (real SQLite file, real PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypedDict

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents import (
    RunStatus,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.steering.remote import submit_through_store
from tinyagents.store import open_store
from tinyagents.store.checkpoint import Checkpointer, PostgresCheckpointer, SqliteCheckpointer

OPS = SteeringActor.human("ops", tenant_id="default", scopes=["agent:control"])


class State(TypedDict, total=False):
    answer: Any


def review(state: State) -> dict[str, Any]:
    return {"answer": interrupt("publish?")}


def graph(checkpointer: Checkpointer) -> Any:
    builder = StateGraph(State).add_node("review", review)
    return (
        builder.add_edge(START, "review").add_edge("review", END).compile(checkpointer=checkpointer)
    )


Backend = tuple[str, Callable[[], Checkpointer]]


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """The store's URL, and how a process opens the graphs' checkpointer on it."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}", lambda: SqliteCheckpointer(tmp_path / "g.db")
        return
    schema = pg_schema()
    yield (
        f"{postgres_dsn()}?schema={schema}",
        lambda: PostgresCheckpointer(postgres_dsn(), schema=schema),
    )
    await drop_pg_schemas()


def approve(run_id: str, cid: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=OPS,
        kind=SteeringKind.APPROVE,
        payload={"value": "yes"},
        correlation_id=cid,
    )


async def test_a_command_to_a_run_left_at_rest_by_a_closed_runtime_is_answered_at_once(
    backend: Backend,
) -> None:
    store_url, checkpointer = backend
    saver = checkpointer()
    async with Runtime(store=store_url) as first:
        result = await graph(saver).run({}, thread_id="t-1", runtime=first)
        assert result.status == "interrupted", result
        (run_id,) = [r.run_id for r in first.runs.list() if r.parent_run_id is None]
    store = open_store(store_url)
    await store.open()
    try:
        snap = await store.load_run(run_id)
        assert snap is not None and snap["status"] == "interrupted"
        receipt = await submit_through_store(store, approve(run_id, "c-1"), timeout_s=30)
        assert receipt.status == "rejected", receipt
        assert "at rest" in (receipt.reason or "") and "t-1" in (receipt.reason or "")
        # the thread goes on in the next runtime, under the same run id, and takes commands
        async with Runtime(store=store_url) as second:
            again = await second.start_graph(graph(saver), None, thread_id="t-1")
            assert again.run_id == run_id
            sent = await submit_through_store(store, approve(run_id, "c-2"), timeout_s=30)
            assert sent.status == "accepted", sent
            assert (await again.result()).status == RunStatus.COMPLETED
    finally:
        await store.close()
        await saver.aclose()
