"""Tool definitions a provider could never be offered are refused when the tool is defined,
with a ``ConfigurationError`` that names the tool: not a pydantic or codec error from deep
inside schema generation, and not a schema that fails (or is silently wrong) on every request.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from tinyagents.errors import ConfigurationError
from tinyagents.harness import Tool, tool


class _Opaque(enum.Enum):
    ONE = object()


class _RawBytes(enum.Enum):
    ONE = b"\xff"


def test_a_parameter_whose_choices_are_no_json_values_is_a_configuration_error() -> None:
    def pick(choice: _Opaque) -> str:
        return "x"

    def literal(choice: Literal[object()]) -> str:  # type: ignore[valid-type]
        return "x"

    def raw(choice: _RawBytes) -> str:
        return "x"

    for fn in (pick, literal, raw):
        with pytest.raises(ConfigurationError, match=rf"tool '{fn.__name__}'.*cannot be arg"):
            tool(fn)


def test_an_unusable_field_constraint_is_a_configuration_error() -> None:
    def bounded(n: Annotated[int, Field(gt="a")]) -> str:
        return "x"

    def matched(s: Annotated[str, Field(pattern="[")]) -> str:
        return "x"

    for fn in (bounded, matched):
        with pytest.raises(ConfigurationError, match=rf"tool '{fn.__name__}'.*cannot be arg"):
            tool(fn)


@pytest.mark.parametrize("default", [float("nan"), float("inf"), -float("inf")])
def test_a_default_json_cannot_hold_is_refused(default: float) -> None:
    # the schema offered to the model holds the default: NaN is no JSON, and the request that
    # offered the tool was refused by the provider (or sent as invalid JSON) on every call
    def scale(x: float = default) -> str:
        return "x"

    with pytest.raises(ConfigurationError, match=r"tool 'scale'.*not JSON.*NaN"):
        tool(scale)


def test_a_hand_written_schema_must_be_json() -> None:
    class Raw(Tool):
        async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
            return None

    bad: list[dict[str, Any]] = [
        {"type": "object", "properties": {"x": {"default": float("nan")}}},
        {"type": "object", "properties": {"x": {"enum": [object()]}}},
        {"type": "object", "properties": {(1, 2): {"type": "string"}}},
    ]
    for parameters in bad:
        with pytest.raises(ConfigurationError, match=r"tool 'raw'.*not JSON"):
            Raw(name="raw", parameters=parameters)


@pytest.mark.parametrize("name", ["", "a b", "nul\x00", "x" * 65])
def test_a_name_providers_refuse_is_refused_before_the_signature_is_read(name: str) -> None:
    # "nul\x00" was a bare ValueError from pydantic (a class name with a NUL); "" quietly
    # named the tool after its function
    def fn(x: int) -> str:
        return "x"

    with pytest.raises(ConfigurationError, match="1-64 letters"):
        tool(name=name)(fn)


def test_sequential_is_taken_as_pydantic_ai_gives_it_and_must_be_a_bool() -> None:
    # pydantic-ai's @tool(sequential=True) / Tool(sequential=...) was a TypeError here; every
    # tool already runs alone, in the model's order, so the flag is kept and changes nothing
    def ping() -> str:
        return "pong"

    class Probe(Tool):
        async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
            return "x"

    assert tool(sequential=True)(ping).sequential is True
    assert tool(ping).sequential is False
    assert Probe(name="probe", sequential=True).sequential is True
    assert Probe(name="probe").sequential is False
    for bad in (1, "yes", None):
        with pytest.raises(ConfigurationError, match=r"tool 'ping': sequential must be True or"):
            tool(sequential=bad)(ping)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match=r"tool 'probe': sequential must be True or"):
            Probe(name="probe", sequential=bad)  # type: ignore[arg-type]
