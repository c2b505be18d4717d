"""``capture_run_messages()``: pydantic-ai's context manager that hands out the messages of
the first agent run started within it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from tinyagents._record import Record, record
from tinyagents.harness.model import Message


@record(slots=True, kw_only=True, eq=False, repr=False)
class _Capture(Record):
    """One open ``capture_run_messages`` block: its list, and whether a run took it."""

    messages: list[Message]
    taken: bool = False


#: The innermost block open in this context (a run's task, and the tools it runs, see the
#: block its start saw, already taken).
_capture: ContextVar[_Capture | None] = ContextVar("tinyagents.capture_run_messages", default=None)


@contextmanager
def capture_run_messages() -> Iterator[list[Message]]:
    """Within the ``with`` block, the list it gives is the transcript of the first agent run
    started there (``agent.run``, ``run_sync``, ``run_stream``, ``rt.start``), as
    pydantic-ai's: the very list the run writes to, the history it continues first, so it
    holds the run's messages as far as it went, however it ended (its ``RunResult`` has
    them too). A later run in the same block is not captured; a block opened inside (around
    a delegate's run, in a tool) captures its own run."""
    messages: list[Message] = []
    token = _capture.set(_Capture(messages=messages))
    try:
        yield messages
    finally:
        _capture.reset(token)


def captured(messages: list[Message]) -> list[Message]:
    """The list a run starting here with ``messages`` writes to: the open block's, holding
    ``messages``, when no run took it yet; else ``messages`` itself."""
    block = _capture.get()
    if block is None or block.taken:
        return messages
    block.taken = True
    block.messages[:] = messages
    return block.messages
