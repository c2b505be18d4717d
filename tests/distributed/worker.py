"""A worker process for the Redis control tests: a Runtime on its own SQLite file with a
RedisControl, driven over stdin/stdout by JSON lines (``{"id": 1, "op": "start", ...}`` in,
``{"id": 1, "ok": ...}`` or ``{"id": 1, "error": "...", "type": "..."}`` out).

    python tests/distributed/worker.py --url redis://... --prefix P --worker-id a --db a.db

Its agent is slow on purpose: ``turns`` calls of a ``tick`` tool that sleeps ``tick_s``, then
an answer naming every operator instruction it was given. Its graph (``start_graph``) takes
``rounds`` steps of ``tick_s`` each on a thread, each appending ``s<round>`` to the state's
``log``; ``--store`` and ``--checkpoints`` (a SQLite file or a PostgreSQL DSN) give workers a
store and checkpoints they share.

Its seat and listing live ``--ttl`` seconds past its last heartbeat (default ``TTL_S``): a
worker a loaded machine stalls that long is taken for gone (its runs are "not found"), so only
a test of that expiry gives a short one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import operator
import os
import signal
import sys
from typing import Annotated, Any, TypedDict

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tinyagents import Agent, Runtime, SteeringCommand, tool
from tinyagents.distributed import RedisControl
from tinyagents.graph import END, START, StateGraph
from tinyagents.store.checkpoint import Checkpointer, PostgresCheckpointer, SqliteCheckpointer
from tinyagents.testkit import ScriptedModel, reply, tool_call

#: The seat's and listing's TTL: 3 s (as before) let a worker stalled by a loaded machine
#: drop off the listing mid-test; a stall never lasts this long.
TTL_S = 30.0


def slow_agent(turns: int, tick_s: float) -> Agent:
    @tool
    async def tick(n: int) -> str:
        """Wait one tick."""
        await asyncio.sleep(tick_s)
        return f"tick {n}"

    script = [tool_call("tick", n=i) for i in range(turns)] + [reply("done")]
    return Agent("slow", ScriptedModel(script, name="slow-model"), tools=[tick])


class RoundsState(TypedDict, total=False):
    round: int
    log: Annotated[list[str], operator.add]


def rounds_graph(cp: Checkpointer, rounds: int, tick_s: float) -> Any:
    async def step(state: RoundsState) -> dict[str, Any]:
        r = state.get("round", 0)
        await asyncio.sleep(tick_s)
        return {"log": [f"s{r}"], "round": r + 1}

    graph = StateGraph(RoundsState).add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: s["round"] < rounds, {True: "step", False: END})
    return graph.compile(checkpointer=cp, recursion_limit=10_000)


class Worker:
    def __init__(self, rt: Runtime, control: RedisControl, cp: Checkpointer | None) -> None:
        self.rt = rt
        self.control = control
        self.cp = cp

    async def op_start_graph(self, thread: str, tenant: str, rounds: int, tick_s: float) -> str:
        assert self.cp is not None, "no --checkpoints"
        started = await self.cp.latest(thread) is not None
        handle = await self.rt.start_graph(
            rounds_graph(self.cp, rounds, tick_s),
            None if started else {"round": 0},
            thread_id=thread,
            tenant_id=tenant,
        )
        return handle.run_id

    async def op_graph_log(self, thread: str) -> list[str]:
        assert self.cp is not None, "no --checkpoints"
        state = await rounds_graph(self.cp, 0, 0).get_state(thread)
        return list(state.values.get("log", []))

    async def op_command_state(self, correlation_id: str, scope: str = "") -> str | None:
        stored = await self.rt.store.get_command(correlation_id, scope=scope)
        return None if stored is None else stored.state

    async def op_start(
        self,
        run_id: str,
        tenant: str,
        turns: int,
        tick_s: float,
        thread: str | None = None,
        parent: str | None = None,
    ) -> str:
        handle = await self.rt.start(
            slow_agent(turns, tick_s),
            "work",
            tenant_id=tenant,
            run_id=run_id,
            thread_id=thread,
            parent=parent,
        )
        return handle.run_id

    async def op_flush(self) -> None:
        await self.rt.flush()

    async def op_stored_status(self, run_id: str) -> str | None:
        """The run's status as its store (shared, with ``--store``) holds it."""
        assert self.rt.store is not None
        row = await self.rt.store.load_run(run_id)
        return None if row is None else str(row.get("status"))

    async def op_submit(self, command: dict[str, Any]) -> dict[str, Any]:
        receipt = await self.control.submit(SteeringCommand.model_validate(command))
        return receipt.model_dump(mode="json")

    async def op_list(self, tenant: str | None) -> list[dict[str, Any]]:
        return await self.control.list_runs(tenant)

    async def op_wait(self, run_id: str) -> str:
        handle = self.rt.runs.get(run_id)
        assert handle is not None, f"no run {run_id} here"
        return (await handle.result()).status.value

    async def op_status(self, run_id: str) -> str | None:
        handle = self.rt.runs.get(run_id)
        return None if handle is None else handle.status.value

    async def op_history(self, run_id: str) -> list[dict[str, Any]]:
        events = await self.rt.load_steering_history(run_id)
        return [{"type": e.type, "correlation_id": e.correlation_id} for e in events]

    async def op_counters(self) -> dict[str, Any]:
        c = self.control.counters
        return {name: getattr(c, name) for name in c.__slots__}

    async def op_connected(self) -> bool:
        return self.control.connected


async def serve(args: argparse.Namespace) -> None:
    backoff = (args.backoff_low, args.backoff_high)
    cp: Checkpointer | None = None
    if args.checkpoints is not None:
        if args.checkpoints.startswith("postgresql://"):
            cp = PostgresCheckpointer(args.checkpoints)
        else:
            cp = SqliteCheckpointer(args.checkpoints)
    async with (
        contextlib.AsyncExitStack() as stack,
        Runtime(store=args.store or f"sqlite:///{args.db}") as rt,
        RedisControl(
            rt,
            args.url,
            worker_id=args.worker_id,
            prefix=args.prefix,
            backoff_s=backoff,
            heartbeat_s=0.2,
            ttl_s=args.ttl,
            block_s=0.2,
            receipt_timeout_s=args.receipt_timeout,
        ) as control,
    ):
        if cp is not None:
            await stack.enter_async_context(cp)
        worker = Worker(rt, control, cp)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        write_lock = asyncio.Lock()
        tasks: set[asyncio.Task[None]] = set()

        async def answer(request: dict[str, Any]) -> None:
            op = getattr(worker, f"op_{request.pop('op')}")
            request_id = request.pop("id")
            try:
                out = {"id": request_id, "ok": await op(**request)}
            except Exception as exc:
                out = {"id": request_id, "error": str(exc), "type": type(exc).__name__}
            async with write_lock:
                sys.stdout.write(json.dumps(out) + "\n")
                sys.stdout.flush()

        # SIGTERM stops the worker gracefully (as ``serve`` does): the loop ends and the
        # RedisControl, then the runtime, close.
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        stopping = asyncio.create_task(stop.wait())
        sys.stdout.write(json.dumps({"ready": args.worker_id}) + "\n")
        sys.stdout.flush()
        while True:
            reading = asyncio.create_task(reader.readline())
            await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not reading.done():
                reading.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reading
                break
            line = reading.result()
            if not line:
                break
            request = json.loads(line)
            if request.get("op") == "quit":
                break
            task = asyncio.create_task(answer(request))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        stopping.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, stopping, return_exceptions=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--backoff-low", type=float, default=0.1)
    parser.add_argument("--backoff-high", type=float, default=0.5)
    parser.add_argument("--receipt-timeout", type=float, default=10.0)
    parser.add_argument("--ttl", type=float, default=TTL_S)
    parser.add_argument("--store", default=None, help="a store URL (default: sqlite:///DB)")
    parser.add_argument("--checkpoints", default=None, help="a SQLite file or PostgreSQL DSN")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
