"""An ``output_type`` whose JSON schema cannot be sent as ``response_format`` is refused when
the agent is made, with a ``ConfigurationError`` naming the agent: it was accepted, and each
request of each run offering it failed (a pydantic serialization error inside the model call,
or a schema with NaN in it, no JSON a provider reads); with a scripted model it never showed.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict

from tinyagents import Agent, NativeOutput, PromptedOutput
from tinyagents.errors import ConfigurationError
from tinyagents.testkit import ScriptedModel


class _Opaque(enum.Enum):
    ONE = object()


class OpaqueChoice(BaseModel):
    choice: _Opaque


class RawBytesChoice(BaseModel):
    choice: Literal[b"\xff"]


class NanDefault(BaseModel):
    x: float = float("nan")


class CallableField(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    fn: Callable[[int], int]


@pytest.mark.parametrize("output_type", [OpaqueChoice, RawBytesChoice, NanDefault, CallableField])
def test_an_output_type_with_no_json_schema_is_refused_when_the_agent_is_made(
    output_type: type[BaseModel],
) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"agent 'a': output_type {output_type.__name__} .*JSON schema"
    ):
        Agent("a", model=ScriptedModel(["{}"]), output_type=output_type)


def test_a_recursive_output_type_is_still_taken() -> None:
    class Node(BaseModel):
        child: Node | None = None

    Node.model_rebuild()
    assert Agent("a", model=ScriptedModel(["{}"]), output_type=Node).output_type is Node


@pytest.mark.parametrize(
    ("output_type", "where"),
    [
        ([], "output_type"),
        ((), "output_type"),
        (NativeOutput([]), "NativeOutput"),
        (PromptedOutput([]), "PromptedOutput"),
    ],
    ids=repr,
)
def test_an_empty_list_of_output_types_is_refused_as_naming_none(
    output_type: object, where: str
) -> None:
    """Found: ``output_type=[]`` (or an empty ``NativeOutput`` / ``PromptedOutput``) was
    refused as a union holding "nothing: None or a value has no JSON schema of its own",
    which names neither the mistake nor the fix; it now says no output type was given, as
    pydantic-ai refuses it ("At least one output type must be provided")."""
    with pytest.raises(
        ConfigurationError, match=rf"agent 'a': {where} names no output type"
    ) as exc:
        Agent(name="a", model=ScriptedModel([]), output_type=output_type)
    assert "give at least one" in str(exc.value)
    assert "None or a value" not in str(exc.value)
