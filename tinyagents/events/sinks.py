"""Event sinks: an in-memory list and structlog (JSON or console)."""

from __future__ import annotations

from typing import Any

from tinyagents.errors import ConfigurationError
from tinyagents.events.models import Event, surrogates_escaped
from tinyagents.events.redact import mask
from tinyagents.protocol.ids import shown_repr

#: The level names ``StructlogSink`` logs at (the standard library's).
LEVELS = ("debug", "info", "warning", "error", "critical")


class MemorySink:
    """Keeps every event in order; the testkit's ``EventRecorder`` builds on it."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def clear(self) -> None:
        self.events.clear()


def _utf8_line(logger: Any, method: str, line: str) -> str:
    """The console's line as UTF-8 can write it: a lone surrogate (half a UTF-16 pair, from a
    model's or a tool's text), which the console writes as it is unless quoted, is its
    ``\\uXXXX`` escape (``surrogates_escaped``, the events' rule): writing it raised."""
    return line if line.isascii() else surrogates_escaped(line)


class StructlogSink:
    """Logs each event through structlog, one line per event (``json=True`` for JSON lines).

    Secret-named keys are masked anywhere in the event, as in ``payload_summary``: fields such
    as ``detail``, ``data`` or ``affected`` are not summaries, and a log line outlives a run.
    ``model.delta`` pieces are left out (as in the OpenTelemetry trace) unless ``deltas``.
    A lone surrogate (half a UTF-16 pair, from a model's or a tool's text), which a UTF-8
    stream cannot take, is its ``\\uXXXX`` escape in either mode, as in ``Event.to_json``."""

    def __init__(
        self,
        *,
        json: bool = True,
        logger_name: str = "tinyagents",
        level: str = "info",
        deltas: bool = False,
    ) -> None:
        # Checked here: an unknown name would fail at every event, and the bus only counts a
        # sink's errors, so the log would stay empty with no word why. In any case: the
        # standard library spells them in capitals ("INFO", logging.getLevelName).
        name = level.lower() if isinstance(level, str) else level
        if name not in LEVELS:
            raise ConfigurationError(
                f"StructlogSink(level={shown_repr(level)}): unknown log level; use one of "
                f"{', '.join(LEVELS)} (in any case)"
            )
        import structlog

        processors: list[Any] = [structlog.processors.add_log_level]
        if json:  # (the standard library's JSON, ASCII: a lone surrogate is its escape)
            processors.append(structlog.processors.JSONRenderer())
        else:
            processors += [structlog.dev.ConsoleRenderer(colors=False), _utf8_line]
        self._log = structlog.wrap_logger(
            structlog.PrintLogger(), processors=processors, logger_name=logger_name
        )
        self._level = name
        self._deltas = deltas

    def __call__(self, event: Event) -> None:
        if event.type == "model.delta" and not self._deltas:
            return  # one line per token is noise; the model.response line holds the answer
        # Not exclude_defaults: it would drop the discriminating `type` of actors and targets.
        data = mask(event.to_dict(mode="json", exclude_none=True))
        data.pop("type", None)
        getattr(self._log, self._level)(event.type, **data)
