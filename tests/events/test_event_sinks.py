"""Sinks (structlog JSON lines, console, memory) and payload redaction."""

from __future__ import annotations

import io
import json
import sys

import pytest

from tinyagents.errors import ConfigurationError
from tinyagents.events import (
    MASK,
    EventBus,
    MemorySink,
    RunEvent,
    SteeringEvent,
    StructlogSink,
    summarize,
)
from tinyagents.protocol import SteeringActor, SteeringKind, SteeringTarget
from tinyagents.testkit import EPOCH


def steering_event() -> SteeringEvent:
    return SteeringEvent(
        type="steering.accepted",
        run_id="r-1",
        root_run_id="r-0",
        target=SteeringTarget.agent_run("r-1"),
        actor=SteeringActor.test(),
        kind=SteeringKind.PAUSE,
        correlation_id="c-1",
        policy_id="default",
        payload_summary={"reason": "lunch"},
        at=EPOCH,
    )


def test_structlog_sink_writes_one_json_line_per_event(capsys: pytest.CaptureFixture[str]) -> None:
    bus = EventBus()
    bus.add_sink(StructlogSink(json=True))
    bus.publish(steering_event())
    bus.publish(RunEvent(type="run.completed", run_id="r-1", at=EPOCH))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    accepted, completed = (json.loads(line) for line in lines)
    assert accepted["event"] == "steering.accepted"
    assert accepted["level"] == "info"
    assert accepted["correlation_id"] == "c-1"
    assert accepted["policy_id"] == "default"
    assert accepted["kind"] == "pause"
    assert accepted["actor"] == {"type": "test", "name": "test"}  # who, even with defaults
    assert accepted["target"] == {"type": "agent_run", "run_id": "r-1"}
    assert accepted["payload_summary"] == {"reason": "lunch"}
    assert accepted["offset"] == 0
    assert accepted["at"] == "2025-01-01T00:00:00Z"
    assert "type" not in accepted  # the type is the log line's event name
    assert (completed["event"], completed["offset"]) == ("run.completed", 1)


def test_structlog_sink_console_mode_and_level(capsys: pytest.CaptureFixture[str]) -> None:
    sink = StructlogSink(json=False, level="warning")
    sink(steering_event())
    out = capsys.readouterr().out
    assert "steering.accepted" in out and "c-1" in out and "warning" in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


@pytest.mark.parametrize("as_json", [False, True])
def test_structlog_sink_writes_an_event_with_lone_surrogates_to_a_utf8_stream(
    as_json: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text from a model or a tool may hold half a UTF-16 pair, which UTF-8 cannot encode:
    the console line held it as it was, and writing it raised (the bus counted the sink's
    error, and the line was lost). It is its ``\\uXXXX`` escape, as in ``Event.to_json``."""
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stdout", stream)  # where the sink's logger writes
    sink = StructlogSink(json=as_json)
    event = RunEvent(
        type="run.status",
        run_id="r-1",
        status="half\ud800",  # no space: the console writes it unquoted, as it is
        detail={"key \udfff": ["\udc00"]},
        at=EPOCH,
    )
    sink(event)
    stream.flush()
    line = stream.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]
    assert "run.status" in line
    if as_json:
        logged = json.loads(line)
        assert logged["status"] == "half\ud800"
        assert logged["detail"] == {"key \udfff": ["\udc00"]}
    else:
        assert "status=half\\ud800" in line
        assert "key \\udfff" in line and "\\udc00" in line


@pytest.mark.parametrize("level", ["loud", "", "msg", "bind", "Bind", "INFOS", " info", None, 20])
def test_structlog_sink_refuses_an_unknown_level_when_made(level: object) -> None:
    # Not at the first event: there the bus would count the error and drop every log line.
    with pytest.raises(ConfigurationError, match="level"):
        StructlogSink(level=level)  # type: ignore[arg-type]


@pytest.mark.parametrize(("level", "logged"), [("INFO", "info"), ("Warning", "warning")])
def test_structlog_sink_takes_a_level_in_any_case(
    capsys: pytest.CaptureFixture[str], level: str, logged: str
) -> None:
    # The standard library's names are upper case (logging.INFO, "WARNING" in a config
    # file): they were refused as unknown levels.
    StructlogSink(level=level)(steering_event())
    assert json.loads(capsys.readouterr().out)["level"] == logged


def test_memory_sink_keeps_events_in_order_and_clears() -> None:
    sink = MemorySink()
    events = [RunEvent(type="run.started"), RunEvent(type="run.completed")]
    for event in events:
        sink(event)
    assert sink.events == events
    sink.clear()
    assert sink.events == []


def test_summarize_masks_secret_keys_at_any_depth() -> None:
    payload = {
        "api_key": "k",
        "X-Api-Key": "k",
        "db_password": "p",
        "Authorization": "Bearer t",
        "refresh_token": "t",
        "nested": [{"secret": "s", "ok": 1}],
        "text": "visible",
    }
    assert summarize(payload) == {
        "api_key": MASK,
        "X-Api-Key": MASK,
        "db_password": MASK,
        "Authorization": MASK,
        "refresh_token": MASK,
        "nested": [{"secret": MASK, "ok": 1}],
        "text": "visible",
    }


def test_summarize_shortens_long_text_and_stays_json_safe() -> None:
    long = "x" * 500
    summary = summarize({"text": long, "when": EPOCH, "tags": {"a"}, "n": 1.5, "flag": None})
    assert summary["text"] == "x" * 200 + "… (500 chars)"
    assert summary["when"].startswith("datetime.datetime(2025")
    assert summary["tags"] == ["a"]
    assert (summary["n"], summary["flag"]) == (1.5, None)
    json.dumps(summary)
    assert summarize("y" * 10, max_chars=4) == "yyyy… (10 chars)"


def test_summarize_keeps_keys_that_only_contain_a_secret_word_as_part_of_another() -> None:
    payload = {
        "max_tokens": 500,  # an update_budget field, not a token
        "input_tokens": 3,
        "tokenizer": "bpe",
        "secretary": "bob",
        "accessToken": "a",  # camelCase secrets are still masked
        "userpassword": "p",
        "githubtoken": "g",
        "API_KEY": "k",
    }
    assert summarize(payload) == {
        "max_tokens": 500,
        "input_tokens": 3,
        "tokenizer": "bpe",
        "secretary": "bob",
        "accessToken": MASK,
        "userpassword": MASK,
        "githubtoken": MASK,
        "API_KEY": MASK,
    }
