"""Server-Sent Events of the event log: what ``GET /api/agents/events`` streams.

Each event is one SSE message::

    id: 1234                     the event's id in the store's event log
    event: steering.applied      its type
    data: {"type": ..., ...}     the event as JSON, on one line

A client that reconnects sends the last id it saw (``Last-Event-ID``, which browsers'
``EventSource`` send by themselves, or ``?last_event_id=``) and gets every later event, in
log order, before the new ones: nothing is missed while it was away (as long as the store
keeps its event log). An id past the newest event of the caller's tenant is none this log
gave (the server restarted without a store, the store was replaced): the stream starts from
the beginning, rather than wait in silence for the log to get there. The stream polls the log
(``poll_s``) and sends a comment (``: keep-alive``) once ``keepalive_s`` of the clock passed
without sending the client anything (events read but not shown to it do not count), so
proxies keep the connection open. It opens with ``retry: 1000`` (a client's reconnect delay,
in ms); every message, comments too, ends in a blank line.

Before the events, one message without an id says which log the ids count in and where
the stream resumes (``after``: the id sent, or 0 when that id is none this log gave)::

    event: stream
    data: {"type": "stream", "log": "5f0c...", "after": 1234}

A stream the server ends says why in a last message without an id, whose ``type`` is its
event's name, as every message's is: ``expired`` (the token expired) or ``unavailable``
(the store cannot be read now)::

    event: expired
    data: {"type": "expired", "detail": "the token expired; mint a new one"}

A server without a store counts from 1 again when it restarts, under another ``log``: a
client that keeps the highest id it saw drops what it has of the old log and starts over.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from tinyagents import _clock
from tinyagents.errors import StoreError
from tinyagents.events.models import json_safe, surrogates_escaped

if TYPE_CHECKING:
    from tinyagents.server.control import Control, EntryScope

#: Rows read from the log per query.
BATCH = 500


class Disconnectable(Protocol):
    async def is_disconnected(self) -> bool: ...


def format_event(event_id: int, event: dict[str, Any]) -> str:
    """One SSE message (``data`` on one line: JSON escapes newlines in strings). A float that
    is NaN or infinite, which JSON has no number for, is the string the store writes ("NaN",
    "Infinity", "-Infinity"; ``json_safe``), not a bare ``NaN`` that ``JSON.parse`` refuses.
    A lone surrogate is its ``\\uXXXX`` escape, as in ``Event.to_json`` (``surrogates_escaped``):
    the response's UTF-8 had no bytes for it, and the stream broke there."""
    try:
        data = json.dumps(event, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:  # (only then is the event walked: most have no such float)
        data = json.dumps(json_safe(event), separators=(",", ":"), ensure_ascii=False)
    data = surrogates_escaped(data)
    return f"id: {event_id}\nevent: {event.get('type', 'message')}\ndata: {data}\n\n"


async def event_stream(
    control: Control,
    request: Disconnectable,
    *,
    tenant_id: str | None,
    after_id: int = 0,
    run_id: str | None = None,
    root_run_id: str | None = None,
    entry: EntryScope | None = None,
    visible: Callable[[str | None], Awaitable[bool]] | None = None,
    follow: bool = True,
    poll_s: float = 0.05,
    keepalive_s: float = 15.0,
    valid: Callable[[], bool] | None = None,
    recheck_s: float = 1.0,
) -> AsyncGenerator[str, None]:
    """The SSE messages of the events after ``after_id`` (of ``tenant_id``; None: every
    tenant), filtered by run or root and by ``visible`` (a run-scoped token's view). With
    ``entry`` (``run_id`` is a graph task's entry), the entry's events and its task's
    commands' steering events, which its graph run logs; each is shown as the entry's. With
    ``follow``, new events as they are logged until the client goes away. ``valid`` (asked
    again once ``recheck_s`` has passed by the clock, however long the polls' reads took)
    says whether the caller's token still holds: once it does not (it expired), an
    ``expired`` message ends the stream, and the client's reconnect is a 401. A
    store that fails to read ends it with an ``unavailable`` message (the reconnect resumes)."""
    last = after_id
    yield "retry: 1000\n\n"  # opens the stream at once and sets the client's reconnect delay
    # by the clock, not by the polls' sleeps: a poll's read of the log takes its own time
    # (a slow store, a loaded machine), and 20 polls of 50 ms were many seconds then
    recheck_at = _clock.monotonic() + recheck_s
    # when the client was last sent something (by the clock too, and only what was sent:
    # events read but not shown to it keep no proxy's idle timer from running out)
    sent_at = _clock.monotonic()
    try:
        if last and not await control.read_events(tenant_id=tenant_id, after_id=last - 1, limit=1):
            # No event of the tenant has this id or a later one: it is no id this log gave the
            # client (the server restarted without a store and counts from 1 again; the store
            # was replaced). Resuming after it would show nothing until the log got there.
            last = 0
        # which log the ids count in, and where this stream resumes in it: a client that kept
        # ids of another log (the server restarted without a store) learns it from either
        said = {"type": "stream", "log": control.log_id, "after": last}
        opening = json.dumps(said, separators=(",", ":"))
        yield f"event: stream\ndata: {opening}\n\n"
        while True:
            if valid is not None and (now := _clock.monotonic()) >= recheck_at:
                # on a fixed beat (a late poll does not push the next ask later)
                recheck_at = max(recheck_at + recheck_s, now)
                if not valid():
                    said = {"type": "expired", "detail": "the token expired; mint a new one"}
                    detail = json.dumps(said, separators=(",", ":"))
                    yield f"event: expired\ndata: {detail}\n\n"
                    return
            rows = await control.read_events(
                tenant_id=tenant_id,
                after_id=last,
                run_id=run_id,
                root_run_id=root_run_id,
                limit=BATCH,
                entry=entry,
            )
            for event_id, event in rows:
                last = event_id
                if entry is not None and not entry.keeps(event):
                    continue  # the graph run's own, or another task's
                shown_as = event.get("run_id") if entry is None else entry.run_id
                if visible is None or await visible(shown_as):
                    yield format_event(event_id, event)
                    sent_at = _clock.monotonic()
                    # A write to a socket the client closed fails inside the transport, which
                    # learns it is gone only at its next turn of the loop: a backlog written in
                    # one go would go on writing (asyncio logs "socket.send() raised exception."
                    # for each write). One turn per message lets the server see the close.
                    await asyncio.sleep(0)
            if control.streams_ended or await request.is_disconnected():
                return  # the client is gone: read no more of the log for nobody
            if len(rows) == BATCH:
                continue  # more backlog: read on before waiting
            if not follow:
                return
            if _clock.monotonic() - sent_at >= keepalive_s:
                yield ": keep-alive\n\n"
                sent_at = _clock.monotonic()
            await asyncio.sleep(poll_s)
    except StoreError as exc:
        # the answer has begun: say why it ends; the client's reconnect (after ``retry``, with
        # the last id it saw) goes on from there once the store answers
        said = {"type": "unavailable", "detail": f"the store cannot be read now: {exc}"}
        detail = json.dumps(said, separators=(",", ":"))
        yield f"event: unavailable\ndata: {detail}\n\n"
