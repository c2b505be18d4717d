"""A ``durability="exit"`` run whose process dies (``os._exit``, as a SIGKILL would end it)
while the run's saves are flushed, for ``test_langgraph_ports_durability_exit.py``.

    python graph_exit_flush_worker.py sqlite|postgres FILE|DSN SCHEMA AFTER

The checkpointer is the real one, which ends the process once ``AFTER`` items (checkpoints
or pending writes) are saved: nothing reaches it before the flush.
"""

from __future__ import annotations

import asyncio
import operator
import os
import sys
from typing import Annotated, Any, TypedDict

from tinyagents.graph import START, StateGraph
from tinyagents.store.checkpoint import (
    Checkpointer,
    PostgresCheckpointer,
    SqliteCheckpointer,
    WriteRecord,
)


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def fan_out(cp: Checkpointer, ran: list[str]) -> Any:
    """START -> a -> (b and b2 in one step: each one's result a pending write) -> c; each
    node appends its name to ``ran``."""

    def node(name: str) -> Any:
        def run(state: Log) -> Log:
            ran.append(name)
            return {"log": [name]}

        return run

    return (
        StateGraph(Log)
        .add_node("a", node("a"))
        .add_node("b", node("b"))
        .add_node("b2", node("b2"))
        .add_node("c", node("c"))
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("a", "b2")
        .add_edge(["b", "b2"], "c")
        .compile(checkpointer=cp)
    )


def dying(base: type[Checkpointer], after: int, end: Any) -> type[Checkpointer]:
    """``base`` with ``end()`` called once ``after`` items are saved."""

    class Dying(base):  # type: ignore[misc,valid-type]
        saved = 0

        async def put(self, record: Any) -> None:
            await super().put(record)
            self.count()

        async def put_writes(
            self, thread_id: str, ns: str, frontier_id: str, writes: list[WriteRecord]
        ) -> None:
            await super().put_writes(thread_id, ns, frontier_id, writes)
            self.count()

        def count(self) -> None:
            type(self).saved += 1
            if type(self).saved == after:
                end()

    return Dying


async def main(backend: str, where: str, schema: str, after: int) -> None:
    die = dying(SqliteCheckpointer if backend == "sqlite" else PostgresCheckpointer, after,
                lambda: os._exit(3))  # fmt: skip
    cp = die(where) if backend == "sqlite" else die(where, schema=schema)  # type: ignore[call-arg]
    await cp.setup()
    await fan_out(cp, []).run({"log": ["in"]}, thread_id="t", durability="exit")
    sys.exit(f"the flush saved fewer than {after} items")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
