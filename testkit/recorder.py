"""``EventRecorder``: an event sink with assertions for tests."""

from __future__ import annotations

from collections.abc import Iterable

from tinyagents.events.models import Event, SteeringEvent
from tinyagents.events.sinks import MemorySink
from tinyagents.protocol.commands import SteeringActor, dedupe_scope

_TERMINAL = frozenset({"rejected", "applied", "superseded", "failed"})


class EventRecorder(MemorySink):
    """Records every event; attach with ``Runtime(sinks=[rec])`` or ``rt.bus.add_sink(rec)``."""

    def types(self, prefix: str = "") -> list[str]:
        return [e.type for e in self.events if e.type.startswith(prefix)]

    def kinds(self) -> list[str]:
        """The event types in order (alias kept for readability in tests)."""
        return self.types()

    def of_type(self, type_: str) -> list[Event]:
        return [e for e in self.events if e.type == type_]

    def steering(
        self, correlation_id: str | None = None, *, actor: SteeringActor | None = None
    ) -> list[SteeringEvent]:
        """The ``steering.*`` events, of one correlation id if given; with ``actor``, only
        those of commands in that sender's id scope (two senders may use one id: a human's
        ids are their tenant's own)."""
        scope = None if actor is None else dedupe_scope(actor)
        return [
            e
            for e in self.events
            if isinstance(e, SteeringEvent)
            and (correlation_id is None or e.correlation_id == correlation_id)
            and (scope is None or dedupe_scope(e.actor) == scope)
        ]

    def lifecycle(self, correlation_id: str, *, actor: SteeringActor | None = None) -> list[str]:
        """``["requested", "accepted", "delivered", "applied"]`` for one command."""
        return [
            e.type.removeprefix("steering.") for e in self.steering(correlation_id, actor=actor)
        ]

    def terminal_state(
        self, correlation_id: str, *, actor: SteeringActor | None = None
    ) -> str | None:
        states = [s for s in self.lifecycle(correlation_id, actor=actor) if s in _TERMINAL]
        return states[-1] if states else None

    def assert_lifecycle(self, correlation_id: str, expected: Iterable[str]) -> None:
        got = self.lifecycle(correlation_id)
        assert got == list(expected), f"lifecycle of {correlation_id}: {got} != {list(expected)}"

    def assert_every_command_terminal(self) -> None:
        """Every requested command has exactly one terminal event, and nothing after it.

        A command is known by its sender's id scope and its correlation id, as the router
        knows it: two senders' commands under one id are two commands, each checked."""
        by_id: dict[tuple[str, str], list[str]] = {}
        for e in self.steering():
            key = (dedupe_scope(e.actor), e.correlation_id)
            by_id.setdefault(key, []).append(e.type.removeprefix("steering."))
        for (scope, cid), states in by_id.items():
            cid = f"{cid} (scope {scope!r})" if scope else cid
            ends = [i for i, s in enumerate(states) if s in _TERMINAL]
            assert len(ends) == 1, f"{cid}: {len(ends)} terminal states in {states}"
            assert ends[0] == len(states) - 1, f"{cid}: events after the terminal one: {states}"
