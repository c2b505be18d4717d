"""A hostile user's sixth round: what a model (the ``Model`` extension point, a middleware
around it, the testkit's fakes) hands the agent loop in the shape of a ``ModelResponse``
but not of its types.

Each test is a probe that found something (named in its docstring) or holds a decision down.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tinyagents import Agent, RunStatus, Runtime, tool
from tinyagents.errors import ConfigurationError, StoreError
from tinyagents.events import ModelEvent
from tinyagents.harness import Model, ModelRequest, ModelResponse, ToolCall, Usage
from tinyagents.testkit import (
    EventRecorder,
    FunctionModel,
    ModelFunctionError,
    ScriptedModel,
    reply,
    tool_call,
)


@tool
def search(q: str) -> str:
    """Look ``q`` up."""
    return f"found {q}"


class Answers(Model):
    """A custom model (no testkit fake) answering each request with the next response as it
    was given, then ``done``: what a user's own provider adapter hands the loop."""

    name = "custom"

    def __init__(self, *responses: ModelResponse) -> None:
        self.responses = list(responses)
        self.requests: list[ModelRequest] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return self.responses.pop(0) if self.responses else ModelResponse(text="done")


def _call(**fields: Any) -> ToolCall:
    return ToolCall(**{"id": "call-1", "name": "search", "args": {"q": "x"}, **fields})


#: Answers of a model whose fields hold what no answer can, each with the field it names.
WRONG_ANSWERS: dict[str, tuple[ModelResponse, str]] = {
    "text int": (ModelResponse(text=3), "text"),  # type: ignore[arg-type]
    "text bytes": (ModelResponse(text=b"x"), "text"),  # type: ignore[arg-type]
    "tool_calls None": (ModelResponse(tool_calls=None), "tool_calls"),  # type: ignore[arg-type]
    "tool call a dict": (
        ModelResponse(tool_calls=[{"id": "c", "name": "search", "args": {}}]),  # type: ignore[list-item]
        "tool_calls[0]",
    ),
    "tool name None": (ModelResponse(tool_calls=[_call(name=None)]), "tool_calls[0].name"),
    "tool name int": (ModelResponse(tool_calls=[_call(name=3)]), "tool_calls[0].name"),
    "tool id int": (ModelResponse(tool_calls=[_call(id=5)]), "tool_calls[0].id"),
    "usage None": (ModelResponse(text="hi", usage=None), "usage"),  # type: ignore[arg-type]
    "tokens text": (ModelResponse(text="hi", usage=Usage(input_tokens="5")), "input_tokens"),  # type: ignore[arg-type]
    "tokens bool": (ModelResponse(text="hi", usage=Usage(output_tokens=True)), "output_tokens"),
    "tokens fraction": (ModelResponse(text="hi", usage=Usage(input_tokens=2.5)), "input_tokens"),  # type: ignore[arg-type]
    "finish_reason int": (ModelResponse(text="hi", finish_reason=3), "finish_reason"),  # type: ignore[arg-type]
    "model int": (ModelResponse(text="hi", model=3), "model"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("name", WRONG_ANSWERS)
async def test_an_answer_of_the_wrong_types_fails_the_run_naming_the_field(name: str) -> None:
    """Found: the loop checked that a model's answer was a ``ModelResponse``, not what its
    fields held. A custom model's ``text=3`` ended the run ``completed`` with the output
    ``3`` (a ``RunResult.output`` is text) and pydantic's serializer warnings on every event
    that summarized it; ``tool_calls=None`` was ``TypeError: 'NoneType' object is not
    iterable``, a call's ``name=None`` ``expected string or bytes-like object``,
    ``usage=None`` an ``AttributeError``, ``input_tokens="5"`` a ``TypeError`` at the token
    budget, ``output_tokens=True`` one token counted. Now the answer is refused before the
    loop reads it: the run fails with a ``ModelResponseError`` naming the model, the field
    and what it holds, its ``model.error`` event says so, and no tool ran."""
    wrong, field = WRONG_ANSWERS[name]
    model = Answers(wrong)
    ran: list[str] = []

    @tool
    def search(q: str) -> str:
        """Look ``q`` up."""
        ran.append(q)
        return q

    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        handle = await rt.start(Agent("a", model, tools=[search]), "look")
        result = await handle.result()
    assert result.status is RunStatus.FAILED, result
    assert result.error is not None
    assert result.error.startswith("ModelResponseError: "), result.error
    assert "'custom'" in result.error, result.error
    assert field in result.error, result.error
    assert result.output == "", result
    assert ran == []
    errors = [e for e in recorder.of_type("model.error") if isinstance(e, ModelEvent)]
    assert len(errors) == 1 and field in (errors[0].error or ""), errors


async def test_an_answer_whose_text_is_none_is_read_as_no_text() -> None:
    """A decision held down: a provider's ``content: null`` beside tool calls (OpenAI sends
    it) passed on as ``text=None`` is an answer without text, not a refused one: the call
    runs and the conversation holds the assistant message with ``""``, as the type says."""
    model = Answers(ModelResponse(text=None, tool_calls=[_call()]))  # type: ignore[arg-type]
    async with Runtime() as rt:
        result = await (await rt.start(Agent("a", model, tools=[search]), "look")).result()
    assert result.status is RunStatus.COMPLETED, result
    assert result.output == "done"
    said = [m for m in model.requests[1].messages if m.role == "assistant"]
    assert [m.content for m in said] == [""], said


# -- the testkit's fakes --------------------------------------------------------------------


@pytest.mark.parametrize("text", [3, None, b"x", ["a"]], ids=repr)
def test_a_reply_of_no_text_is_refused_when_it_is_made(text: Any) -> None:
    """Found: ``reply(3)`` was made, and the run it was scripted into failed with
    ``AttributeError: 'int' object has no attribute 'split'`` (the testkit's token count),
    ``reply(b"x")`` ended the run ``completed`` with bytes as its output. Now ``reply``
    refuses it at once, saying what it takes."""
    with pytest.raises(ConfigurationError, match=r"reply\(\) takes the answer's text"):
        reply(text)


@pytest.mark.parametrize("name", [3, None, b"search"], ids=repr)
def test_a_tool_call_of_no_tool_name_is_refused_when_it_is_made(name: Any) -> None:
    """Found: ``tool_call(3)`` was made, and its run failed with ``TypeError: expected
    string or bytes-like object, got 'int'``, naming neither the script nor the call."""
    with pytest.raises(ConfigurationError, match="tool_call's name is the tool's name"):
        tool_call(name)


def test_a_tool_call_argument_given_twice_is_refused_not_overwritten() -> None:
    """Found: ``tool_call("search", {"q": "a"}, q="b")`` called the tool with ``q="b"``:
    the argument in the dict was dropped without a word. Now it is refused, naming it."""
    with pytest.raises(ConfigurationError, match="'q' is given twice"):
        tool_call("search", {"q": "a"}, q="b")
    assert tool_call("search", {"q": "a"}, limit=2).tool_calls[0].args == {"q": "a", "limit": 2}


def test_a_scripted_answer_of_the_wrong_types_is_refused_when_it_is_scripted() -> None:
    """Found: a ``ModelResponse`` of the wrong types in a script was taken, and failed its
    run when it came up (an ``AttributeError`` in the token count). Now the script is
    refused when it is made, naming the response and the field, as arguments JSON cannot
    write are."""
    with pytest.raises(ConfigurationError, match=r"response 2 .*tool_calls\[0\]\.name"):
        ScriptedModel([reply("a"), ModelResponse(tool_calls=[_call(name=None)])])


async def test_a_function_models_answer_of_the_wrong_types_is_its_error() -> None:
    """Found: a ``FunctionModel`` whose function returned ``ModelResponse(text=3)`` failed its
    run with ``AttributeError: 'int' object has no attribute 'split'``. Now it is the
    ``ModelFunctionError`` its other wrong answers are, naming the function and the field."""

    def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text=3)  # type: ignore[arg-type]

    result = await Agent("a", FunctionModel(answer)).run("look")
    assert result.status is RunStatus.FAILED, result
    assert result.error is not None
    assert result.error.startswith(f"{ModelFunctionError.__name__}: "), result.error
    assert "<locals>.answer'" in result.error and "its text" in result.error, result.error


# -- a store file that is a symlink loop ---------------------------------------------------


async def test_a_store_file_that_is_a_symlink_loop_is_refused_saying_so(tmp_path: Path) -> None:
    """Found: ``Runtime(store="sqlite:///loop.db")`` where ``loop.db`` is a symlink to a
    symlink back to it was refused with SQLite's bare "unable to open database file", which
    sent users to the file's permissions. (A directory, a missing or read-only folder are
    each named already.) Now the refusal names the symlink and says it leads nowhere; the
    files are left as they were."""
    loop, back = tmp_path / "loop.db", tmp_path / "back.db"
    loop.symlink_to(back)
    back.symlink_to(loop)
    with pytest.raises(StoreError, match=r"a symlink .*leads nowhere \(a loop\)"):
        async with Runtime(store=f"sqlite:///{loop}"):
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["back.db", "loop.db"]
    assert os.readlink(loop) == str(back)
