"""pydantic-ai's agent and tool tests, ported (a fifth batch; see test_pydantic_ai_ports.py,
_2, _3 and _4): union output types, a tool's whole docstring description, and the tool
calls of one response (pydantic-ai's sequential tools), over the testkit's fakes and the
OpenAI-compatible test server.

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/...``). Where we
behave differently on purpose, the test asserts our documented behaviour and says why.
"""

from __future__ import annotations

import asyncio
from typing import Any, Union

import pytest
from pydantic import BaseModel

from tinyagents import Agent, RunLimits, RunStatus, SubAgent, tool
from tinyagents.errors import ConfigurationError
from tinyagents.harness import LiteLLMModel, ModelRequest, ModelResponse, Usage
from tinyagents.testkit import (
    FunctionModel,
    OpenAICompatServer,
    ScriptedModel,
    tool_call,
    tool_calls,
)


class Apple(BaseModel):
    color: str


class Banana(BaseModel):
    """A banana."""

    length: float


def apple(color: str) -> str:
    return '{"result": {"kind": "Apple", "data": {"color": "%s"}}}' % color  # noqa: UP031


def asks(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if m.metadata.get("retry") == "invalid_output"]


# --- union output types --------------------------------------------------------------------


@pytest.mark.parametrize(
    "output_type",
    [[Apple, Banana], (Apple, Banana), Apple | Banana, Union[Apple, Banana]],  # noqa: UP007
    ids=["list", "tuple", "pipe", "Union"],
)
async def test_a_union_output_type_reads_the_member_its_answer_names(output_type: Any) -> None:
    # ports tests/test_agent.py::test_output_type_union_text_fallback: a union output type is
    # answered with pydantic-ai's union envelope, {"result": {"kind": ..., "data": ...}}, and
    # the run's output is the member it names. Our structured output is native (the schema
    # sent as response_format, pydantic-ai's NativeOutput), so a union is sent as
    # pydantic-ai's NativeOutput([Apple, Banana]) sends it, with no output tools.
    model = ScriptedModel([apple("red")])
    result = await Agent("a", model, output_type=output_type).run("What fruit is it?")
    assert (result.status, result.output) == (RunStatus.COMPLETED, Apple(color="red"))
    banana = '{"result": {"kind": "Banana", "data": {"length": 6}}}'
    result = await Agent("b", ScriptedModel([banana]), output_type=output_type).run("And this?")
    assert result.output == Banana(length=6.0)
    assert model.requests[0].tools == []  # no output tools offered


async def test_a_union_answer_whose_data_does_not_fit_its_kind_is_sent_back() -> None:
    # ports tests/test_agent.py::test_output_type_union_text_fallback_invalid_data_retries: the
    # right kind with data that does not fit that member is answered with what is wrong (the
    # member's own problem, at its field) and the model is asked once more.
    answers = ['{"result": {"kind": "Apple", "data": {"length": 12.0}}}', apple("green")]
    model = ScriptedModel(answers)
    result = await Agent("a", model, output_type=[Apple, Banana]).run("What fruit is it?")
    assert (result.status, result.output) == (RunStatus.COMPLETED, Apple(color="green"))
    (ask,) = asks(model.requests[1])
    assert '"loc": [\n      "color"\n    ],\n    "msg": "Field required"' in ask


async def test_a_union_answer_of_an_unknown_kind_is_sent_back() -> None:
    # ports tests/test_agent.py::test_output_type_union_text_fallback_invalid_kind_retries (and
    # ::test_prompted_output_union_invalid_kind_retries): a kind that is no member's name is a
    # problem at result.kind naming the kinds there are, and the model is asked once more.
    answers = [
        '{"result": {"kind": "Cherry", "data": {"color": "red"}}}',
        '{"result": {"kind": "Banana", "data": {"length": 6.0}}}',
    ]
    model = ScriptedModel(answers)
    result = await Agent("a", model, output_type=[Apple, Banana]).run("What fruit is it?")
    assert (result.status, result.output) == (RunStatus.COMPLETED, Banana(length=6.0))
    (ask,) = asks(model.requests[1])
    assert '"msg": "Input should be \'Apple\' or \'Banana\'",\n    "input": "Cherry"' in ask


async def test_a_union_answer_of_an_unknown_kind_past_the_output_retries_fails_the_run() -> None:
    # ports tests/test_agent.py::test_output_type_union_text_fallback_invalid_kind_exhausts_
    # retries: an unknown kind answered again past output_retries ends the run failed with a
    # ModelResponseError (pydantic-ai's UnexpectedModelBehavior), never a KeyError.
    cherry = '{"result": {"kind": "Cherry", "data": {"color": "red"}}}'
    model = FunctionModel(lambda request: cherry)
    result = await Agent("a", model, output_type=[Apple, Banana]).run("What fruit is it?")
    assert result.status is RunStatus.FAILED
    assert result.error is not None and result.error.startswith("ModelResponseError")
    assert "not valid Apple_or_Banana output" in result.error and len(model.requests) == 2


class Foo(BaseModel):
    foo: str


class Bar(BaseModel):
    bar: str


class FooBar(BaseModel):
    """FooBar description"""

    foo: Foo
    bar: Bar


class FooBaz(BaseModel):
    """FooBaz description"""

    foo: Foo
    baz: Bar


async def test_a_union_of_models_sharing_nested_models_is_read() -> None:
    # ports tests/test_agent.py::test_prompted_output_with_defs: members whose fields are
    # models (shared between them, under the schema's $defs) are read whole.
    text = '{"result": {"kind": "FooBar", "data": {"foo": {"foo": "foo"}, "bar": {"bar": "bar"}}}}'
    result = await Agent("a", ScriptedModel([text]), output_type=[FooBar, FooBaz]).run("foo?")
    assert result.output == FooBar(foo=Foo(foo="foo"), bar=Bar(bar="bar"))


async def test_a_union_is_sent_as_pydantic_ais_native_union_schema() -> None:
    # ports tests/models/test_openai.py::test_openai_native_output_multiple (its union's schema,
    # as pydantic_ai/_output.py's UnionOutputProcessor builds it): an object whose "result" is
    # any of one object per member, {"kind": <const name>, "data": <member>}, titled with the
    # member's name and described by its docstring; sent strict, as OpenAI's strict mode holds it.
    async with OpenAICompatServer([apple("red")]) as server:
        model = LiteLLMModel(
            "openai/test-model", api_base=server.base_url, api_key="sk-test", max_retries=0
        )
        result = await Agent("a", model, output_type=Apple | Banana).run("go")
    assert result.output == Apple(color="red"), result.error
    sent = server.requests[0]["response_format"]["json_schema"]
    assert sent["name"] == "Apple_or_Banana" and sent["strict"] is True
    schema = sent["schema"]
    assert schema["required"] == ["result"] and schema["additionalProperties"] is False
    members = schema["properties"]["result"]["anyOf"]
    assert [m["properties"]["kind"]["const"] for m in members] == ["Apple", "Banana"]
    assert [m["title"] for m in members] == ["Apple", "Banana"]
    assert members[1]["description"] == "A banana."
    assert all(m["required"] == ["kind", "data"] for m in members)
    data = members[0]["properties"]["data"]
    assert schema["$defs"][data["$ref"].rsplit("/", 1)[1]]["required"] == ["color"]


async def test_two_members_of_one_name_get_kinds_of_their_own() -> None:
    # as pydantic-ai's UnionOutputProcessor keys them: a second member of an equal name (two
    # classes both called Apple) is the kind Apple_2.
    other = type("Apple", (BaseModel,), {"__annotations__": {"seeds": int}})
    text = '{"result": {"kind": "Apple_2", "data": {"seeds": 5}}}'
    result = await Agent("a", ScriptedModel([text]), output_type=[Apple, other]).run("go")
    assert isinstance(result.output, other) and result.output.seeds == 5


def test_a_union_of_one_type_is_that_type_and_one_of_bare_values_is_refused() -> None:
    # pydantic-ai's output_type=[Foo] is Foo. Text beside models (output_type=[Foo, str]) is
    # taken as pydantic-ai takes it, with output tools (test_pydantic_ai_ports_6.py); a bare
    # type (int) is a member wrapped in {"response": ...} (test_pydantic_ai_ports_8.py), and
    # so is None beside them (test_pydantic_ai_ports_9.py); an empty list is refused.
    assert Agent("a", ScriptedModel(["x"]), output_type=[Apple]).output_type is Apple
    Agent("a", ScriptedModel(["x"]), output_type=[Apple, int])
    Agent("a", ScriptedModel(["x"]), output_type=Apple | None)
    with pytest.raises(ConfigurationError, match="output_type"):
        Agent("a", ScriptedModel(["x"]), output_type=[])


async def test_a_sub_agents_union_output_reaches_its_parent_as_the_members_json() -> None:
    # a SubAgentTool hands a structured output to its parent model as JSON: the member's,
    # not the envelope's.
    child = Agent("child", ScriptedModel([apple("red")]), output_type=[Apple, Banana])
    output = await SubAgent(child, description="picks").invoke("pick")
    assert output == Apple(color="red")


async def test_a_union_childs_partial_output_is_read_as_the_member_it_names() -> None:
    # stop_with_partial hands back a typed child's partial text read as its answer is: for a
    # union, the member its envelope names, not the envelope.
    model = ScriptedModel([ModelResponse(text=apple("red"), usage=Usage(output_tokens=50))])
    limits = RunLimits(max_tokens=10, behavior="stop_with_partial")
    child = Agent("child", model, output_type=Apple | Banana, limits=limits)
    assert await SubAgent(child).invoke("pick") == Apple(color="red")


# --- tool descriptions: the docstring's whole description -----------------------------------


def test_a_tools_description_is_its_docstrings_whole_description() -> None:
    # ports pydantic-ai's docstring reading (pydantic_ai/_griffe.py::doc_descriptions, with
    # griffe; tests/test_tools.py::test_docstring_google for the arguments): the description
    # is every paragraph of the docstring's text, its line breaks kept, not the first
    # paragraph alone (which dropped what a tool's later paragraphs told the model); the
    # argument sections are left out. Expected strings are what pydantic-ai 2.78 sends.
    @tool
    def search(query: str, limit: int = 5) -> str:
        """Search the invoices, newest
        first.

        Only paid invoices are searched.

        Args:
            query: The words to find.
            limit: How many to return.
        """
        return query

    assert search.description == (
        "Search the invoices, newest\nfirst.\n\nOnly paid invoices are searched."
    )
    assert search.parameters["properties"]["query"]["description"] == "The words to find."

    @tool
    def sphinx(x: int) -> int:
        """Sphinx thing.

        Second para.

        :param x: The x.
        """
        return x

    @tool
    def numpy(x: int) -> int:
        """Numpy thing.

        Second para.

        Parameters
        ----------
        x : int
            The x.
        """
        return x

    assert sphinx.description == "Sphinx thing.\n\nSecond para."
    assert numpy.description == "Numpy thing.\n\nSecond para."
    assert numpy.parameters["properties"]["x"]["description"] == "The x."


def test_text_after_a_section_and_admonitions_are_part_of_the_description() -> None:
    # ports pydantic_ai/_griffe.py::_main_description (pydantic-ai 2.78): the text sections and
    # admonitions (a "Note:" or "Warning:" header over an indented block, unlike a section
    # such as "Raises:" or "Examples:") are joined in source order, a blank line between
    # them; an admonition keeps its header over its dedented text.
    @tool
    def fetch(url: str) -> str:
        """Fetch a page.

        Raises:
            ValueError: never.

        Warning:
            Pages over 1 MB are cut.

        Examples:
            fetch("https://example.com")

        Prefer the cache.

        Args:
            url: The page.
        """
        return url

    assert fetch.description == (
        "Fetch a page.\n\nWarning:\nPages over 1 MB are cut.\n\nPrefer the cache."
    )
    assert fetch.parameters["properties"]["url"]["description"] == "The page."


# --- the tool calls of one response: one at a time, in order --------------------------------


async def test_every_tool_call_runs_alone_as_pydantic_ais_sequential_tools_do() -> None:
    # ports tests/test_agent.py::TestEndStrategy::test_sequential_tool_is_a_per_tool_barrier:
    # pydantic-ai runs a response's calls concurrently and a tool marked sequential=True runs
    # alone, a barrier the others parallelize around. Ours all run one after another, in the
    # order the model made them, each between its own before_tool_dispatch and
    # after_tool_result (docs/harness.md, "Sub-agents"): every tool is such a barrier, marked
    # or not (sequential=True is taken, as pydantic-ai's code gives it, and changes nothing),
    # and no two calls are ever in flight together.
    active = 0
    most = 0
    ran: list[str] = []

    async def track(name: str) -> str:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await asyncio.sleep(0)  # lets another call start, were they run together
        await asyncio.sleep(0)
        active -= 1
        ran.append(name)
        return name

    @tool
    async def parallel_a() -> str:
        """A."""
        return await track("a")

    @tool(sequential=True)
    async def barrier() -> str:
        """The one pydantic-ai marks sequential."""
        return await track("barrier")

    @tool
    async def parallel_b() -> str:
        """B."""
        return await track("b")

    model = ScriptedModel(
        [
            tool_calls(
                tool_call("parallel_a"),
                tool_call("barrier"),
                tool_call("parallel_b"),
                tool_call("parallel_a"),
            ),
            "done",
        ]
    )
    tools = [parallel_a, barrier, parallel_b]
    result = await Agent("a", model, tools=tools).run("test")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "done")
    assert most == 1 and ran == ["a", "barrier", "b", "a"]
    assert (barrier.sequential, parallel_a.sequential) == (True, False)


async def test_a_tool_call_sees_what_the_calls_before_it_in_the_response_did() -> None:
    # ports tests/test_agent.py::test_sequential_calls: six calls that must see the value 1,
    # one that sets it to 2, seven that must see 2, in one response. pydantic-ai needs the
    # setter marked sequential=True (or parallel_tool_call_execution_mode('sequential')); ours
    # run in the model's order with no marker. (Its requires_approval call, a deferred tool
    # request, has no counterpart here and is left out.)
    holder = 1
    seen: list[tuple[str, int]] = []

    @tool
    def call_first() -> None:
        """First."""
        seen.append(("first", holder))

    @tool
    def increment_integer_holder() -> None:
        """Increment."""
        nonlocal holder
        holder = 2

    @tool
    def call_second() -> None:
        """Second."""
        seen.append(("second", holder))

    calls = (
        [tool_call("call_first") for _ in range(6)]
        + [tool_call("increment_integer_holder")]
        + [tool_call("call_second") for _ in range(7)]
    )
    model = ScriptedModel([tool_calls(*calls), "done"])
    tools = [call_first, increment_integer_holder, call_second]
    result = await Agent("a", model, tools=tools).run("call a lot of tools")
    assert result.status is RunStatus.COMPLETED and holder == 2
    assert seen == [("first", 1)] * 6 + [("second", 2)] * 7
    assert len([m for m in model.requests[1].messages if m.role == "tool"]) == 14


# --- tool descriptions: a Returns section --------------------------------------------------


def _returns_xml(description: str, kind: str | None = None) -> str:
    kind_tag = f"<type>{kind}</type>\n" if kind else ""
    return f"<returns>\n{kind_tag}<description>{description}</description>\n</returns>"


def test_a_returns_section_is_described_as_pydantic_ai_describes_it() -> None:
    # ports tests/test_tools.py::test_google_style_with_returns, ::test_sphinx_style_with_returns,
    # ::test_numpy_style_with_returns and ::test_only_returns_type (pydantic_ai/_griffe.py::
    # _main_desc_with_returns): a docstring's first Returns section was dropped from the
    # description; pydantic-ai wraps the description in <summary> and adds a <returns> block,
    # its <type> the section's when it has one. The expected strings are what pydantic-ai 2.78
    # sends (an annotated function's Google section is its description whole: the annotation,
    # not the text before a colon, is its type; griffe keeps the text of a type as written).
    def google(x: int) -> str:
        """A function that does something.

        Args:
            x: The input value.

        Returns:
            str: The result as a string.
        """
        return str(x)

    def google_unannotated(x: int):
        """A function that does something.

        Returns:
            (int, str): The pair,
                on two lines.

        More text after.
        """
        return x, str(x)

    def sphinx(x: int) -> str:
        """A sphinx function with returns.

        :param x: The input value.
        :rtype: str
        :return: The result as a string
            with type.
        """
        return str(x)

    def numpy(x: int) -> str:
        """A numpy function with returns.

        Parameters
        ----------
        x : int
            The input value.

        Returns
        -------
        result : str
            The result as a string
            with type.
        """
        return str(x)

    def only_returns() -> str:
        """

        Returns:
            The result.
        """
        return "foo"

    assert tool(google).description == (
        "<summary>A function that does something.</summary>\n"
        + _returns_xml("str: The result as a string.")
    )
    assert tool(google).parameters["properties"]["x"]["description"] == "The input value."
    assert tool(google_unannotated).description == (
        "<summary>A function that does something.\n\nMore text after.</summary>\n"
        + _returns_xml("The pair,\n    on two lines.", "int, str")
    )
    assert tool(sphinx).description == (
        "<summary>A sphinx function with returns.</summary>\n"
        + _returns_xml("The result as a string\nwith type.", "str")
    )
    assert tool(numpy).description == (
        "<summary>A numpy function with returns.</summary>\n"
        + _returns_xml("The result as a string\nwith type.", "str")
    )
    assert tool(numpy).parameters["properties"]["x"]["description"] == "The input value."
    assert tool(only_returns).description == _returns_xml("The result.")
    # description= replaces it all, as before
    assert tool(description="Mine.")(google).description == "Mine."


def test_what_is_no_returns_section_adds_no_returns_block() -> None:
    # pydantic-ai 2.78 again: a Sphinx ":rtype:" alone is no returns section, "Return:" (no s)
    # is an admonition, and a header over no indented block is text; only the first Returns
    # section counts
    def rtype_only(x: int) -> int:
        """Do.

        :param x: The x.
        :rtype: int
        """
        return x

    def singular(x: int) -> int:
        """Do.

        Return:
            The x.
        """
        return x

    def two(x: int) -> int:
        """Do.

        Returns:
            The first.

        Returns:
            The second.
        """
        return x

    assert tool(rtype_only).description == "Do."
    assert tool(singular).description == "Do.\n\nReturn:\nThe x."
    assert tool(two).description == "<summary>Do.</summary>\n" + _returns_xml("The first.")


def test_a_returns_header_in_a_code_fence_is_text_and_a_sphinx_returns_may_start_below() -> None:
    # pydantic-ai 2.78 (griffe): a header inside a ``` fence is the fence's text, not a
    # section (it was dropped from the description, and would have been its <returns>); a
    # Sphinx ":returns:" whose text starts on the next line has that text, no blank first line
    def fenced(x: int) -> int:
        """Do.

        ```
        Returns:
            x
        ```
        """
        return x

    def below(x: int) -> int:
        """Do.

        :returns:
            the thing
            more.
        """
        return x

    assert tool(fenced).description == "Do.\n\n```\nReturns:\n    x\n```"
    assert tool(below).description == "<summary>Do.</summary>\n" + _returns_xml("the thing\nmore.")
