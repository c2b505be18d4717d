"""Agent-loop overhead, side by side with LangGraph and pydantic-ai, and steering at scale.

1. A ReAct loop of 10 tool turns on a zero-latency model (each framework's own fake: a
   tinyagents ``Model``, a LangChain ``BaseChatModel`` behind ``create_react_agent``, a
   pydantic-ai ``FunctionModel``) and the same async tool. The model and tool cost nothing,
   so the time per turn is framework overhead. Printed as µs per turn (model call + tool
   call) and as the ratios LangGraph / tinyagents and pydantic-ai / tinyagents.
2. 1,000 concurrent tinyagents runs, each receiving 10 steering instructions while it runs:
   p50/p99 latency from submit to ``steering.applied`` (the model request that carries it),
   and memory per run (tracemalloc, in a separate pass so tracing does not skew the timings).

    .venv/bin/python benchmarks/agent_loop.py [--runs 200] [--concurrent 1000] [--profile]

Needs the ``bench`` extra (langgraph, langchain-core, pydantic-ai-slim); a missing peer is
reported and skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import pstats
import statistics
import time
import tracemalloc
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

from tinyagents import Agent, RunStatus, Runtime, tool
from tinyagents.events import Event
from tinyagents.harness import Model, ModelRequest, ModelResponse, ToolCall, Usage

TURNS = 10
TARGET_VS_LANGGRAPH = 5.0


async def step(n: int) -> str:
    """One step of the task (async, so no framework hops to a thread)."""
    return f"step {n} done"


# --------------------------------------------------------------------------- tinyagents


class ZeroLatencyModel(Model):
    """Calls ``step`` until it has seen ``turns`` tool results, then answers. Stateless, so
    one instance serves any number of concurrent runs."""

    name = "zero-latency"

    def __init__(self, turns: int = TURNS, *, until_steered: int | None = None) -> None:
        self.turns = turns
        self.until_steered = until_steered

    async def request(self, request: ModelRequest) -> ModelResponse:
        messages = request.messages
        if self.until_steered is not None:
            steered = sum(1 for m in messages if "steering" in m.metadata)
            more = steered < self.until_steered
        else:
            more = sum(1 for m in messages if m.role == "tool") < self.turns
        if more:
            done = len(messages)
            call = ToolCall(id=f"call-{done}", name="step", args={"n": done})
            return ModelResponse(tool_calls=[call], usage=Usage(input_tokens=1, output_tokens=1))
        return ModelResponse(text="done", usage=Usage(input_tokens=1, output_tokens=1))


def tinyagents_runner() -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    agent = Agent("bench", ZeroLatencyModel(), tools=[tool(step)])
    rt = Runtime()

    async def run_once() -> None:
        if not rt._open:
            await rt.open()
        result = await (await rt.start(agent, "go")).result()
        assert result.status is RunStatus.COMPLETED and result.usage["tool_calls"] == TURNS

    return run_once, rt.close


# --------------------------------------------------------------------------- LangGraph


def langgraph_runner() -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph 1.x
        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langgraph.prebuilt import create_react_agent

    class ScriptedChat(BaseChatModel):
        """Tool calls until ``TURNS`` tool results are in the conversation, then an answer."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            done = sum(1 for m in messages if isinstance(m, ToolMessage))
            if done < TURNS:
                call = {"name": "step", "args": {"n": done}, "id": f"call-{done}"}
                message = AIMessage(content="", tool_calls=[call])
            else:
                message = AIMessage(content="done")
            return ChatResult(generations=[ChatGeneration(message=message)])

        async def _agenerate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            return self._generate(messages, stop, **kw)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = create_react_agent(ScriptedChat(), tools=[step])
    config = {"recursion_limit": 100}

    async def run_once() -> None:
        out = await graph.ainvoke({"messages": [("user", "go")]}, config)
        tool_results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
        assert len(tool_results) == TURNS and out["messages"][-1].content == "done"

    async def close() -> None:
        return None

    return run_once, close


# --------------------------------------------------------------------------- pydantic-ai


def pydantic_ai_runner() -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    from pydantic_ai import Agent as PAgent
    from pydantic_ai.messages import ModelMessage, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.messages import ModelResponse as PResponse
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> PResponse:
        done = sum(1 for m in messages for p in m.parts if isinstance(p, ToolReturnPart))
        if done < TURNS:
            return PResponse(parts=[ToolCallPart("step", {"n": done}, tool_call_id=f"call-{done}")])
        return PResponse(parts=[TextPart("done")])

    agent = PAgent(FunctionModel(respond), tools=[step])

    async def run_once() -> None:
        result = await agent.run("go")
        assert result.output == "done"

    async def close() -> None:
        return None

    return run_once, close


RUNNERS: dict[
    str, Callable[[], tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]]
] = {
    "tinyagents": tinyagents_runner,
    "langgraph": langgraph_runner,
    "pydantic-ai": pydantic_ai_runner,
}


async def time_runs(run_once: Callable[[], Awaitable[None]], runs: int, warmup: int) -> list[float]:
    """Seconds per run, one run at a time (GC off while timing, as timeit does)."""
    for _ in range(warmup):
        await run_once()
    times: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(runs):
            start = time.perf_counter()
            await run_once()
            times.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return times


async def compare_loops(runs: int, warmup: int) -> dict[str, Any]:
    """µs of framework overhead per tool turn for each framework (median over runs)."""
    per_turn: dict[str, float] = {}
    skipped: dict[str, str] = {}
    for name, make in RUNNERS.items():
        try:
            run_once, close = make()
        except ImportError as exc:
            skipped[name] = f"not installed ({exc.name}); pip install -e '.[bench]'"
            continue
        try:
            times = await time_runs(run_once, runs, warmup)
        finally:
            await close()
        per_turn[name] = statistics.median(times) / TURNS * 1e6
    base = per_turn.get("tinyagents")
    ratios = {
        f"{name}/tinyagents": round(us / base, 2)
        for name, us in per_turn.items()
        if base and name != "tinyagents"
    }
    return {
        "turns": TURNS,
        "runs": runs,
        "us_per_turn": {k: round(v, 1) for k, v in per_turn.items()},
        "ratios": ratios,
        "skipped": skipped,
    }


# --------------------------------------------------------------------------- steering at scale


class AppliedTimes:
    """A sink noting when each ``steering.applied`` event is published (perf_counter), and
    waking whoever waits for that command."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.waiting: dict[str, asyncio.Future[float]] = {}
        self.not_applied = 0

    def __call__(self, event: Event) -> None:
        if event.type == "steering.applied":
            cid = event.correlation_id  # type: ignore[attr-defined]
            now = self.at[cid] = time.perf_counter()
            fut = self.waiting.pop(cid, None)
            if fut is not None:
                fut.set_result(now)
        elif event.type in ("steering.failed", "steering.rejected", "steering.superseded"):
            self.not_applied += 1

    async def applied(self, cid: str) -> float:
        if cid in self.at:
            return self.at[cid]
        fut = self.waiting[cid] = asyncio.get_running_loop().create_future()
        return await fut


async def steer_many(concurrent: int, commands: int) -> dict[str, Any]:
    """``concurrent`` runs, each with an operator that sends it ``commands`` instructions one
    after another (the next once the previous reached the model). Every run keeps working —
    zero-latency model calls and tool calls — until it has seen all of them, so the event loop
    is saturated: the latency includes waiting for a turn among ``concurrent`` busy runs."""
    applied = AppliedTimes()
    agent = Agent("steered", ZeroLatencyModel(until_steered=commands), tools=[tool(step)])
    latencies: list[float] = []
    submit_costs: list[float] = []

    async def operator(handle: Any) -> None:
        for i in range(commands):
            t0 = time.perf_counter()
            receipt = await handle.steer(f"instruction {i}")
            submit_costs.append(time.perf_counter() - t0)
            latencies.append(await applied.applied(receipt.correlation_id) - t0)

    async with Runtime(sinks=[applied]) as rt:
        start = time.perf_counter()
        handles = [await rt.start(agent, f"task {i}") for i in range(concurrent)]
        operators = [asyncio.ensure_future(operator(h)) for h in handles]
        await asyncio.gather(*operators)
        results = [await h.result() for h in handles]
        elapsed = time.perf_counter() - start
        model_calls = sum(r.usage["model_calls"] for r in results)
    assert all(r.status is RunStatus.COMPLETED for r in results)
    ms = sorted(x * 1e3 for x in latencies)
    q = statistics.quantiles(ms, n=100)
    return {
        "runs": concurrent,
        "commands": len(latencies),
        "applied": len(applied.at),
        "not_applied": applied.not_applied,
        "p50_ms": round(q[49], 3),
        "p99_ms": round(q[98], 3),
        "max_ms": round(ms[-1], 3),
        "submit_us": round(statistics.median(submit_costs) * 1e6, 1),
        "model_calls_per_run": round(model_calls / concurrent, 1),
        "wall_s": round(elapsed, 3),
        "commands_per_s": round(len(latencies) / elapsed),
    }


async def memory_per_run(concurrent: int, commands: int) -> dict[str, Any]:
    """KiB per run: at the peak, with every run live and steered, and what the runtime still
    holds once they ended (conversation, run info, steering history)."""
    agent = Agent("steered", ZeroLatencyModel(until_steered=commands), tools=[tool(step)])
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        async with Runtime() as rt:
            handles = [await rt.start(agent, f"task {i}") for i in range(concurrent)]
            for i in range(commands):
                for handle in handles:
                    await handle.steer(f"instruction {i}")
                await asyncio.sleep(0)
            for handle in handles:
                await handle.result()
            gc.collect()
            retained, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {
        "peak_kib_per_run": round((peak - base) / concurrent / 1024, 1),
        "retained_kib_per_run": round((retained - base) / concurrent / 1024, 1),
    }


# --------------------------------------------------------------------------- entry points


async def _run_all(runs: int, warmup: int, concurrent: int, commands: int) -> dict[str, Any]:
    loops = await compare_loops(runs, warmup)
    steering = await steer_many(concurrent, commands)
    steering.update(await memory_per_run(concurrent, commands))
    return {"agent_loop": loops, "steering_at_scale": steering}


def run(
    *, runs: int = 200, warmup: int = 20, concurrent: int = 1000, commands: int = 10
) -> dict[str, Any]:
    """Run both benchmarks; returns the numbers (``benchmarks/run_all.py`` calls this)."""
    return asyncio.run(_run_all(runs, warmup, concurrent, commands))


def report(results: dict[str, Any]) -> str:
    loops, steering = results["agent_loop"], results["steering_at_scale"]
    us = loops["us_per_turn"]
    lines = [
        f"agent loop: {loops['turns']} tool turns on a zero-latency model, median of "
        f"{loops['runs']} runs — framework overhead per turn (model call + tool call)",
    ]
    for name, value in us.items():
        lines.append(f"  {name:<12} {value:>9.1f} µs/turn")
    for name, why in loops["skipped"].items():
        lines.append(f"  {name:<12} skipped: {why}")
    for name, ratio in loops["ratios"].items():
        target = (
            f"target >= {TARGET_VS_LANGGRAPH:g}x" if name.startswith("langgraph") else "target > 1x"
        )
        lines.append(f"  {name:<24} {ratio:>6.2f}x  ({target})")
    lines += [
        f"steering: {steering['runs']} concurrent busy runs x "
        f"{steering['commands'] // steering['runs']} instructions each "
        f"({steering['applied']} applied, {steering['not_applied']} not; "
        f"{steering['model_calls_per_run']} model calls per run)",
        f"  submit -> applied   p50 {steering['p50_ms']:.3f} ms   p99 {steering['p99_ms']:.3f} ms"
        f"   max {steering['max_ms']:.3f} ms",
        f"  submit call         {steering['submit_us']:.1f} µs (policies, queue, events)",
        f"  throughput          {steering['commands_per_s']} commands/s "
        f"({steering['wall_s']:.2f} s wall)",
        f"  memory per run      peak {steering['peak_kib_per_run']} KiB, retained after the "
        f"run {steering['retained_kib_per_run']} KiB",
    ]
    return "\n".join(lines)


def profile(runs: int = 300) -> str:
    """cProfile of the tinyagents loop alone: where the per-turn time goes."""
    run_once, close = tinyagents_runner()

    async def many() -> None:
        for _ in range(runs):
            await run_once()
        await close()

    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(many())
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--concurrent", type=int, default=1000)
    parser.add_argument("--commands", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="cProfile the tinyagents loop")
    args = parser.parse_args(argv)
    if args.profile:
        print(profile())
        return
    results = run(
        runs=args.runs, warmup=args.warmup, concurrent=args.concurrent, commands=args.commands
    )
    print(report(results))


if __name__ == "__main__":
    main()
