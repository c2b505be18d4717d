"""``EventRecorder``: an event sink with assertions for tests."""

from __future__ import annotations

from collections.abc import Iterable

from tinyagents.events.models import Event, SteeringEvent
from tinyagents.events.sinks import MemorySink


class EventRecorder(MemorySink):
    """Records every event; attach with ``Runtime(sinks=[rec])`` or ``rt.bus.add_sink(rec)``."""

    def types(self, prefix: str = "") -> list[str]:
        return [e.type for e in self.events if e.type.startswith(prefix)]

    def kinds(self) -> list[str]:
        """The event types in order (alias kept for readability in tests)."""
        return self.types()

    def of_type(self, type_: str) -> list[Event]:
        return [e for e in self.events if e.type == type_]

    def steering(self, correlation_id: str | None = None) -> list[SteeringEvent]:
        return [
            e
            for e in self.events
            if isinstance(e, SteeringEvent)
            and (correlation_id is None or e.correlation_id == correlation_id)
        ]

    def lifecycle(self, correlation_id: str) -> list[str]:
        """``["requested", "accepted", "delivered", "applied"]`` for one command."""
        return [e.type.removeprefix("steering.") for e in self.steering(correlation_id)]

    def terminal_state(self, correlation_id: str) -> str | None:
        terminal = {"rejected", "applied", "superseded", "failed"}
        states = [s for s in self.lifecycle(correlation_id) if s in terminal]
        return states[-1] if states else None

    def assert_lifecycle(self, correlation_id: str, expected: Iterable[str]) -> None:
        got = self.lifecycle(correlation_id)
        assert got == list(expected), f"lifecycle of {correlation_id}: {got} != {list(expected)}"

    def assert_every_command_terminal(self) -> None:
        """Every requested command has exactly one terminal event, and nothing after it."""
        terminal = {"rejected", "applied", "superseded", "failed"}
        by_id: dict[str, list[str]] = {}
        for e in self.steering():
            by_id.setdefault(e.correlation_id, []).append(e.type.removeprefix("steering."))
        for cid, states in by_id.items():
            ends = [i for i, s in enumerate(states) if s in terminal]
            assert len(ends) == 1, f"{cid}: {len(ends)} terminal states in {states}"
            assert ends[0] == len(states) - 1, f"{cid}: events after the terminal one: {states}"
