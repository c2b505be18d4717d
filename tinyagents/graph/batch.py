"""``graph.abatch(inputs)``: each input its own run, at most ``concurrency`` at once
(LangGraph's ``abatch``/``batch``), their results in the order of the inputs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from tinyagents.errors import ArgumentError
from tinyagents.protocol.ids import shown_repr

if TYPE_CHECKING:
    from tinyagents.graph.types import GraphResult


def check_batch(
    inputs: Sequence[Any], thread_ids: Sequence[str | None] | None, concurrency: int | None
) -> list[str | None]:
    """The thread of each input (None: a thread of its own), or an ``ArgumentError``: a
    count of threads that is not the count of inputs, one thread named twice (two runs of
    one thread at once: ``ThreadBusy``), a ``concurrency`` below 1."""
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise ArgumentError(f"abatch takes a list of inputs, got {type(inputs).__name__}")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise ArgumentError(
            f"concurrency is a whole number of runs, 1 or more; got {shown_repr(concurrency)}"
        )
    if thread_ids is None:
        return [None] * len(inputs)
    threads = list(thread_ids)
    if len(threads) != len(inputs):
        raise ArgumentError(
            f"abatch got {len(inputs)} inputs and {len(threads)} thread_ids: give one per input"
        )
    named = [t for t in threads if t is not None]
    if len(set(named)) < len(named):
        twice = sorted({t for t in named if named.count(t) > 1})
        raise ArgumentError(
            f"abatch runs its inputs at once, so each needs a thread of its own; {twice} "
            "named more than once (run them one after another with run())"
        )
    return threads


async def run_batch(
    run: Callable[[Any, str | None], Awaitable[GraphResult]],
    inputs: Sequence[Any],
    threads: list[str | None],
    concurrency: int | None,
    return_exceptions: bool,
) -> list[GraphResult | BaseException]:
    """Run each input (``run(input, thread_id)``, the graph's ``run``); a run that fails (a node's error, or refused input) leaves its error
    in its place with ``return_exceptions``, else the first of them in input order is raised
    once every run has ended."""
    gate = asyncio.Semaphore(concurrency) if concurrency is not None else None
    out: list[GraphResult | BaseException | None] = [None] * len(inputs)

    async def one(index: int) -> None:
        try:
            if gate is None:
                result = await run(inputs[index], threads[index])
            else:
                async with gate:
                    result = await run(inputs[index], threads[index])
        except Exception as exc:  # refused input: that input's error, as a node's
            out[index] = exc
            return
        out[index] = result.error if result.error is not None else result

    async with asyncio.TaskGroup() as group:
        for index in range(len(inputs)):
            group.create_task(one(index))
    done: list[GraphResult | BaseException] = [r for r in out if r is not None]
    if not return_exceptions:
        for item in done:
            if isinstance(item, BaseException):
                raise item
    return done


__all__ = ["check_batch", "run_batch"]
