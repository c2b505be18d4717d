"""Operator steering latency: from sending a steer to its ``steering.applied`` event.

Three ways to send the same command (an ``add_instruction`` from a human with
``agent:control``) to one of N live runs (100 and 1,000), on a runtime with a SQLite store (as
``tinyagents serve`` runs it):

- **in-process**: ``await runtime.submit(cmd)``;
- **HTTP**: ``POST /api/agents/runs/{id}/steer`` with a Biscuit token, through uvicorn on a
  loopback port (token check, tenant and scope checks, the snapshot lookup, the policy pipeline,
  the store write before the receipt);
- **another process**: a second Python process with ``Control(store=...)`` on the same SQLite
  file (``tinyagents runs steer --store`` does the same): the command goes into the store's
  inbox, the owning runtime takes it on its next poll (every ~50 ms) and writes the receipt,
  which the other process polls for (every 20 ms). The benchmark hands it each command over a
  pipe and counts from just before that.

Latency is measured from just before the send to the moment the ``steering.applied`` event is
published on the runtime's bus. The runs idle inside a model call that returns as soon as a
command is accepted for them (a model answering at once), so the figure is the framework's path
— send, policies, queue, the next boundary, apply — not a model's thinking time. Commands are
sent one at a time (no queueing between them). The HTTP client shares the server's event loop
(one process): its own CPU time is part of the figure.

    .venv/bin/python benchmarks/operator.py [--runs 100 1000] [--commands 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tinyagents import Agent, RunLimits, Runtime
from tinyagents.events import SteeringEvent
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.server import Auth, Control, bind, create_app, serving
from tinyagents.store import SqliteStore
from tinyagents.testkit import FunctionModel, tool_call

RUN_COUNTS = (100, 1_000)
COMMANDS = 200
TENANT = "acme"
OPERATOR = SteeringActor.human("ops", tenant_id=TENANT, scopes=["agent:control"])
WAYS = ("in-process", "HTTP", "another process")


def noop() -> str:
    """A tool that does nothing."""
    return "ok"


class Waker:
    """Wakes a run's pending model call when a command is accepted for it; resolves the
    waiters of ``steering.applied`` events."""

    def __init__(self) -> None:
        self.wake: dict[str, asyncio.Event] = {}
        self.applied: dict[str, asyncio.Future[float]] = {}

    def __call__(self, event: Any) -> None:
        if not isinstance(event, SteeringEvent) or event.run_id is None:
            return
        if event.type == "steering.accepted":
            wake = self.wake.get(event.run_id)
            if wake is not None:
                wake.set()
        elif event.type == "steering.applied":
            waiter = self.applied.pop(event.correlation_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(time.perf_counter())

    def agent(self) -> Agent:
        async def model(request: Any) -> Any:
            run_id = request.run_id
            wake = self.wake.setdefault(run_id, asyncio.Event())
            await wake.wait()
            wake.clear()
            return tool_call("noop")

        return Agent(
            "idle",
            FunctionModel(model, name="answers-when-steered"),
            tools=[noop],
            limits=RunLimits(max_model_calls=1_000_000, max_tool_calls=1_000_000),
        )


async def _until(check: Any, every_s: float = 0.02) -> None:
    """Poll ``check`` (sync or async) until it is true."""
    while True:
        done = check()
        if asyncio.iscoroutine(done):
            done = await done
        if done:
            return
        await asyncio.sleep(every_s)


async def _scenario(runs: int, commands: int, store_path: Path) -> dict[str, Any]:
    waker = Waker()
    auth = Auth(Auth.generate_key())
    token = auth.mint(user="ops", tenant=TENANT, rights=["agent:observe", "agent:control"])
    headers = {"Authorization": f"Bearer {token}"}
    rng = random.Random(7)
    latencies: dict[str, list[float]] = {way: [] for way in WAYS}
    async with Runtime(store=f"sqlite:///{store_path}") as runtime:
        runtime.bus.add_sink(waker)
        handles = [
            await runtime.start(waker.agent(), "idle", tenant_id=TENANT) for _ in range(runs)
        ]
        run_ids = [h.run_id for h in handles]
        await _until(lambda: all(r in waker.wake for r in run_ids))  # all in a model call
        control = Control(runtime)
        # The runs' snapshots must be in the store before another process can find them.
        remote_store = SqliteStore(store_path)
        await remote_store.open()
        try:
            for run_id in run_ids:
                await _until(lambda r=run_id: _stored(remote_store, r))
        finally:
            await remote_store.close()
        remote = await OtherProcess.start(store_path)
        sock = bind("127.0.0.1", 0)
        try:
            async with serving(create_app(control, auth=auth), sock):
                host, port = sock.getsockname()[:2]
                async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
                    for i in range(commands * len(WAYS)):
                        way = WAYS[i % len(WAYS)]  # interleaved: each way sees the same load
                        run_id = rng.choice(run_ids)
                        latencies[way].append(
                            await _one(way, i, run_id, runtime, remote, client, headers, waker)
                        )
        finally:
            for h in handles:
                if h.task is not None:
                    h.task.cancel()
            await asyncio.gather(*(h.task for h in handles if h.task), return_exceptions=True)
            await remote.close()
            control.close()
    return {
        "runs": runs,
        "commands": commands,
        "ways": {w: _summary(v) for w, v in latencies.items()},
    }


async def _one(
    way: str,
    i: int,
    run_id: str,
    runtime: Runtime,
    remote: OtherProcess,
    client: httpx.AsyncClient,
    headers: dict[str, str],
    waker: Waker,
) -> float:
    cid = f"bench-{i}"
    applied: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    waker.applied[cid] = applied
    text = f"focus on item {i}"
    started = time.perf_counter()
    if way == "HTTP":
        r = await client.post(
            f"/api/agents/runs/{run_id}/steer",
            json={"message": text, "correlation_id": cid},
            headers=headers,
        )
        status = r.json().get("status")
    elif way == "another process":
        status = await remote.submit(run_id, cid, text)
    else:
        receipt = await runtime.submit(_command(run_id, cid, text))
        status = receipt.status.value
    if status != "accepted":
        raise RuntimeError(f"{way}: command {cid} was {status}")
    async with asyncio.timeout(30):
        done = await applied
    return (done - started) * 1000


def _command(run_id: str, cid: str, text: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=OPERATOR,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": text},
        correlation_id=cid,
    )


class OtherProcess:
    """A second Python process that submits the commands it reads from a pipe through the
    store (``Control(store=...)``) and writes back each receipt's status."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, store_path: Path) -> OtherProcess:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--submit-through",
            str(store_path),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        other = cls(proc)
        if await other._line() != "ready":
            raise RuntimeError("the submitting process did not start")
        return other

    async def _line(self) -> str:
        assert self.proc.stdout is not None
        async with asyncio.timeout(60):
            return (await self.proc.stdout.readline()).decode().strip()

    async def submit(self, run_id: str, cid: str, text: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps([run_id, cid, text]) + "\n").encode())
        await self.proc.stdin.drain()
        return await self._line()

    async def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        async with asyncio.timeout(30):
            await self.proc.wait()


async def _submit_through(store_path: str) -> None:
    """The other process: one command per stdin line, its receipt's status per stdout line."""
    store = SqliteStore(store_path)
    await store.open()
    control = Control(store=store, receipt_timeout_s=30)
    loop = asyncio.get_running_loop()
    print("ready", flush=True)
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            run_id, cid, text = json.loads(line)
            receipt = await control.submit(_command(run_id, cid, text))
            print(receipt.status.value, flush=True)
    finally:
        await store.close()


async def _stored(store: SqliteStore, run_id: str) -> bool:
    return await store.load_run(run_id) is not None


def _summary(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
        "max_ms": ordered[-1],
    }


def run(*, run_counts: tuple[int, ...] = RUN_COUNTS, commands: int = COMMANDS) -> dict[str, Any]:
    async def main() -> list[dict[str, Any]]:
        results = []
        for runs in run_counts:
            with tempfile.TemporaryDirectory() as tmp:
                results.append(await _scenario(runs, commands, Path(tmp) / "runs.db"))
        return results

    return {"scenarios": asyncio.run(main())}


def report(results: dict[str, Any]) -> str:
    lines = [
        "steer -> steering.applied latency (ms), runs idle in a model call that answers at once",
        f"{'live runs':>10}  {'way':<18} {'p50':>8} {'p99':>8} {'max':>8}  vs in-process p50",
    ]
    for s in results["scenarios"]:
        base = s["ways"]["in-process"]["p50_ms"]
        for way in WAYS:
            w = s["ways"][way]
            ratio = w["p50_ms"] / base if base else float("nan")
            lines.append(
                f"{s['runs']:>10}  {way:<18} {w['p50_ms']:>8.2f} {w['p99_ms']:>8.2f} "
                f"{w['max_ms']:>8.2f}  x{ratio:.1f}"
            )
    lines.append(
        f"({results['scenarios'][0]['commands']} commands per way and scenario, one at a time; "
        "another process: through the store, with the owner's ~50 ms inbox poll)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=list(RUN_COUNTS))
    parser.add_argument("--commands", type=int, default=COMMANDS)
    parser.add_argument("--submit-through", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.submit_through is not None:  # the other process of the third way
        asyncio.run(_submit_through(args.submit_through))
        return
    print(report(run(run_counts=tuple(args.runs), commands=args.commands)))


if __name__ == "__main__":
    main()
