"""Fixtures for hand-driven steering tests (helpers live in ``steerkit``).

``rt`` is an open in-memory ``Runtime(testing=True)`` whose events all go to ``recorder``;
``make_run`` registers a run with it and ``finish`` ends one, the way an agent loop would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from steerkit import MakeRun, finish_run, start_run

from tinyagents.runs import RunHandle, RunStatus
from tinyagents.runtime import Runtime
from tinyagents.testkit import EventRecorder


@pytest.fixture
def recorder() -> EventRecorder:
    return EventRecorder()


@pytest.fixture
async def rt(recorder: EventRecorder) -> AsyncIterator[Runtime]:
    async with Runtime(testing=True, sinks=[recorder]) as runtime:
        yield runtime


@pytest.fixture
def make_run(rt: Runtime) -> MakeRun:
    async def make(run_id: str, *, runtime: Runtime | None = None, **kw: Any) -> RunHandle:
        return await start_run(runtime or rt, run_id, **kw)

    return make


@pytest.fixture
def finish(rt: Runtime) -> Callable[..., Awaitable[None]]:
    async def _finish(
        handle: RunHandle,
        status: RunStatus = RunStatus.COMPLETED,
        *,
        runtime: Runtime | None = None,
    ) -> None:
        await finish_run(runtime or rt, handle, status)

    return _finish
