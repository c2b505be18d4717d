"""A worker process for the Redis control tests: a Runtime on its own SQLite file with a
RedisControl, driven over stdin/stdout by JSON lines (``{"id": 1, "op": "start", ...}`` in,
``{"id": 1, "ok": ...}`` or ``{"id": 1, "error": "...", "type": "..."}`` out).

    python tests/distributed/worker.py --url redis://... --prefix P --worker-id a --db a.db

Its agent is slow on purpose: ``turns`` calls of a ``tick`` tool that sleeps ``tick_s``, then
an answer naming every operator instruction it was given.

Its seat and listing live ``--ttl`` seconds past its last heartbeat (default ``TTL_S``): a
worker a loaded machine stalls that long is taken for gone (its runs are "not found"), so only
a test of that expiry gives a short one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tinyagents import Agent, Runtime, SteeringCommand, tool
from tinyagents.distributed import RedisControl
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


class Worker:
    def __init__(self, rt: Runtime, control: RedisControl) -> None:
        self.rt = rt
        self.control = control

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
    async with (
        Runtime(store=f"sqlite:///{args.db}") as rt,
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
        worker = Worker(rt, control)
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
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
