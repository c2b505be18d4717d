"""A conversation given to a run (``history=``, or ``input`` as messages) whose message has a
``metadata`` that is no dict, or a ``name`` that is no text, is refused before anything starts,
as a wrong role or content is: ``metadata=5`` failed the run start with ``AttributeError: 'int'
object has no attribute 'get'``, and ``name=5`` was sent on to the provider."""

from __future__ import annotations

from typing import Any

import pytest

from tinyagents import Agent, Runtime
from tinyagents.errors import ConfigurationError
from tinyagents.harness import Message
from tinyagents.testkit import ScriptedModel


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("metadata", 5, r"history\[0\] has metadata of type int; .* a dict"),
        ("metadata", ["x"], r"history\[0\] has metadata of type list"),
        ("name", 5, r"history\[0\] has name of type int; .* text"),
    ],
)
async def test_a_message_field_of_the_wrong_type_is_refused_before_the_run_starts(
    field: str, value: Any, says: str
) -> None:
    message = Message(role="user", content="earlier", **{field: value})
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match=says):
            await rt.start(Agent("a", model=ScriptedModel(["ok"])), "hi", history=[message])
        assert rt.runs.list() == []
