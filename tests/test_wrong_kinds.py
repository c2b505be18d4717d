"""Arguments of the wrong kind given where a run, a runtime or a fake model is made are a
``ConfigurationError`` that names the argument, raised before anything starts (they were an
``AttributeError`` or a ``TypeError`` from deep inside, or silently taken)."""

from __future__ import annotations

import pytest

from tinyagents import Agent, Runtime
from tinyagents.errors import ConfigurationError
from tinyagents.testkit import ScriptedModel, reply


async def test_agent_run_refuses_a_runtime_that_is_not_one() -> None:
    agent = Agent("a", ScriptedModel([reply("done")]))
    with pytest.raises(ConfigurationError, match=r"runtime= takes a Runtime.*got int"):
        await agent.run("x", runtime=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"runtime= takes a Runtime.*got str"):
        [e async for e in agent.run_stream("x", runtime="sqlite:///x.db")]  # type: ignore[arg-type]


@pytest.mark.parametrize("testing", ["yes", 1, None])
def test_runtime_testing_must_be_true_or_false(testing: object) -> None:
    with pytest.raises(ConfigurationError, match="testing= must be True or False"):
        Runtime(testing=testing)  # type: ignore[arg-type]


def test_a_scripted_model_needs_a_list_of_responses() -> None:
    with pytest.raises(ConfigurationError, match="ScriptedModel takes a list of responses"):
        ScriptedModel(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ScriptedModel takes a list of responses"):
        ScriptedModel("done")  # a string is not a script of one reply


@pytest.mark.parametrize("description", [5, b"bytes", ["x"]])
def test_an_agent_description_is_text(description: object) -> None:
    with pytest.raises(ConfigurationError, match="description must be text"):
        Agent("a", ScriptedModel([]), description=description)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("trusted", "words"),
    [
        # a name given alone was read letter by letter: "auditor" trusted the middleware
        # named "a", "u", "d"... and not the one named "auditor"
        ("auditor", r"trusted_middleware= takes a list of names, got str 'auditor'; "),
        ([5], r"trusted_middleware= holds names \(non-blank text\), got int 5"),
        (["auditor", " "], r"trusted_middleware= holds names \(non-blank text\), got str ' '"),
    ],
)
def test_runtime_trusted_middleware_is_a_list_of_names(trusted: object, words: str) -> None:
    with pytest.raises(ConfigurationError, match=words):
        Runtime(trusted_middleware=trusted)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sinks", "words"),
    [
        (None, r"sinks= takes a list of sinks, got NoneType"),  # a TypeError: not iterable
        # taken, then every event failed in it
        ([5], r"sinks= holds callables \(event\) -> None, got int"),
    ],
)
def test_runtime_sinks_are_callables(sinks: object, words: str) -> None:
    with pytest.raises(ConfigurationError, match=words):
        Runtime(sinks=sinks)  # type: ignore[arg-type]
