"""Fixtures for the harness scenario tests: a testing runtime, its recorder and a waiter.

Runs are held at known points with ``Gate`` (testkit) and the tests wait for what a run did
with ``EventWaiter`` — never with sleeps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tinyagents.runtime import Runtime
from tinyagents.testkit import EventRecorder, EventWaiter


@pytest.fixture
def recorder() -> EventRecorder:
    return EventRecorder()


@pytest.fixture
def waiter() -> EventWaiter:
    return EventWaiter()


@pytest.fixture
async def rt(recorder: EventRecorder, waiter: EventWaiter) -> AsyncIterator[Runtime]:
    """An in-memory runtime with the test actor allowed; every event goes to both sinks."""
    async with Runtime(testing=True, sinks=[recorder, waiter]) as runtime:
        yield runtime
