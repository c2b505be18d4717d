"""``@tool``: schemas from signatures, and every way a tool call can fail coming back as text."""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import functools
import io
import json
import sys
import threading
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from tinyagents import Agent, RunLimits, RunStatus, Runtime, SubAgentTool
from tinyagents._threads import in_own_thread
from tinyagents.errors import ConfigurationError, ToolError
from tinyagents.harness import (
    FunctionTool,
    Message,
    ModelResponse,
    RunContext,
    Tool,
    ToolCall,
    ToolResult,
    ToolSpec,
    tool,
)
from tinyagents.harness.tools import execute_tool_call
from tinyagents.testkit import ScriptedModel, tool_call, tool_calls


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(id="call-1", name=name, args=args)


class Filters(BaseModel):
    customer: str
    year: int = 2024


@tool
def add(a: int, b: int = 2) -> int:
    """Add two integers.

    The second paragraph is part of the description too, as in pydantic-ai.

    Args:
        a: The first number,
            spread over two lines.
        b (int): The second number.
    """
    return a + b


@tool(name="search_invoices", description="Find invoices.", timeout_s=30)
async def search(
    query: str,
    filters: Filters | None = None,
    mode: Literal["exact", "fuzzy"] = "exact",
    limit: Annotated[int, Field(ge=1, description="how many results")] = 5,
) -> dict[str, Any]:
    return {"query": query, "filters": filters, "mode": mode, "limit": limit}


# --- schemas ------------------------------------------------------------------------------


DESCRIPTION = (
    "Add two integers.\n\nThe second paragraph is part of the description too, as in pydantic-ai."
)


def test_name_description_and_argument_docs_come_from_the_function():
    assert add.name == "add"
    assert add.description == DESCRIPTION
    assert add.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "The first number, spread over two lines."},
            "b": {"type": "integer", "default": 2, "description": "The second number."},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
    assert add.spec() == ToolSpec(name="add", description=DESCRIPTION, parameters=add.parameters)


async def test_a_field_as_a_parameters_default_gives_its_default_and_constraints():
    # `limit: int = Field(5, ge=1)`, as pydantic's validate_call (and pydantic-ai) read it:
    # the FieldInfo itself was the default, so a call without `limit` handed the tool a
    # FieldInfo object, `limit=0` passed unchecked, and the schema lost both (with a
    # PydanticJsonSchemaWarning)
    @tool
    def page(
        query: str = Field(description="what to find"),
        limit: int = Field(5, ge=1),
        size: int = Field(default_factory=lambda: 10, le=50),
    ) -> str:
        """Page.

        Args:
            limit: how many pages.
        """
        return f"{query} {limit} {size}"

    assert page.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to find"},
            "limit": {
                "type": "integer",
                "default": 5,
                "minimum": 1,
                "description": "how many pages.",
            },
            "size": {"type": "integer", "maximum": 50},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert await page.call({"query": "q"}) == "q 5 10"
    for bad in ({"query": "q", "limit": 0}, {"query": "q", "size": 51}, {}):
        with pytest.raises(ToolError, match="invalid arguments for tool 'page'"):
            await page.call(bad)


def test_sphinx_and_numpy_argument_docs_describe_the_arguments_too():
    # ports tests/test_tools.py::test_docstring_sphinx and ::test_docstring_numpy (pydantic-ai
    # reads all three styles): only Google-style "Args:" reached the schema, so a tool
    # documented ":param foo:" or in a numpy "Parameters" section offered the model
    # arguments without a word on what they are.
    @tool
    def sphinx_style(foo: int, bar: str = "x") -> str:
        """Sphinx style docstring.

        :param foo: The foo thing: a number,
            spread over two lines.
        :param str bar: The bar thing.
        :returns: Both.
        """
        return f"{foo} {bar}"

    @tool
    def numpy_style(*, foo: int, bar: str) -> str:
        """Numpy style docstring.

        Parameters
        ----------
        foo : int
            The foo thing.
        bar : str
            The bar thing,
            on two lines.

        Returns
        -------
        str
            Both.
        """
        return f"{foo} {bar}"

    # their Returns sections as pydantic-ai (2.78) reads them: NumPy's item line is its type
    assert sphinx_style.description == (
        "<summary>Sphinx style docstring.</summary>\n"
        "<returns>\n<description>Both.</description>\n</returns>"
    )
    assert numpy_style.description == (
        "<summary>Numpy style docstring.</summary>\n"
        "<returns>\n<type>str</type>\n<description>Both.</description>\n</returns>"
    )
    assert sphinx_style.parameters["properties"] == {
        "foo": {
            "type": "integer",
            "description": "The foo thing: a number, spread over two lines.",
        },
        "bar": {"type": "string", "default": "x", "description": "The bar thing."},
    }
    assert numpy_style.parameters["properties"] == {
        "foo": {"type": "integer", "description": "The foo thing."},
        "bar": {"type": "string", "description": "The bar thing, on two lines."},
    }


def test_schema_covers_optional_pydantic_literal_and_constrained_arguments():
    schema = search.parameters

    assert search.name == "search_invoices"
    assert search.description == "Find invoices."
    assert search.timeout_s == 30
    assert schema["required"] == ["query"]
    props = schema["properties"]
    assert props["query"] == {"type": "string"}
    assert props["filters"] == {
        "anyOf": [{"$ref": "#/$defs/Filters"}, {"type": "null"}],
        "default": None,
    }
    assert schema["$defs"]["Filters"]["properties"]["year"] == {"type": "integer", "default": 2024}
    assert props["mode"] == {"type": "string", "enum": ["exact", "fuzzy"], "default": "exact"}
    assert props["limit"] == {
        "type": "integer",
        "minimum": 1,
        "default": 5,
        "description": "how many results",
    }


def test_argument_names_that_shadow_basemodel_attributes_are_fine():
    @tool
    def lookup(json: str, model_config: int = 0, copy: bool = False) -> str:
        """Look something up."""
        return f"{json}:{model_config}:{copy}"

    assert set(lookup.parameters["properties"]) == {"json", "model_config", "copy"}


def test_a_ctx_parameter_is_hidden_from_the_model():
    @tool
    def whoami(ctx: Any, greeting: str = "hi") -> str:
        """Say who is calling."""
        return f"{greeting} {ctx}"

    assert list(whoami.parameters["properties"]) == ["greeting"]
    assert whoami.takes_ctx


async def test_a_parameter_annotated_run_context_receives_it_whatever_its_name():
    # pydantic-ai finds its RunContext by the annotation; ours failed with a raw pydantic
    # error ("not fully defined") when it was not called ctx
    @tool
    def lookup(run_ctx: RunContext, key: str) -> str:
        """Look a key up."""
        return f"{key} for {run_ctx}"

    assert lookup.takes_ctx and list(lookup.parameters["properties"]) == ["key"]
    result = await execute_tool_call(lookup, call("lookup", key="k"), timeout_s=None, ctx="run-7")
    assert result.content == "k for run-7"

    with pytest.raises(ConfigurationError, match="context twice"):

        @tool
        def twice(ctx: Any, other: RunContext) -> str:
            return ""


@pytest.mark.parametrize("annotation", [int, str, "list[int]", "Filters"])
def test_a_ctx_parameter_typed_as_an_argument_is_refused(annotation: Any) -> None:
    # a parameter named ctx receives the run's context: `ctx: int` was taken out of the
    # schema without a word, the model's `ctx` refused as an unknown argument, and the tool
    # handed a RunContext where it expected an int
    def lookup(ctx, key: str) -> str:  # type: ignore[no-untyped-def]
        """Look a key up."""
        return key

    lookup.__annotations__["ctx"] = annotation
    with pytest.raises(ConfigurationError, match=r"'ctx' .*receives the run's context.*rename"):
        tool(lookup)


@pytest.mark.parametrize(
    "annotation", [None, Any, object, RunContext, "RunContext | None", "'RunContext'"]
)
def test_a_ctx_parameter_untyped_or_typed_as_the_context_receives_it(annotation: Any) -> None:
    # "'RunContext'": `ctx: "RunContext"` quoted under `from __future__ import annotations`,
    # which evaluates to the string: it names the context too
    def lookup(ctx, key: str) -> str:  # type: ignore[no-untyped-def]
        """Look a key up."""
        return key

    if annotation is not None:
        lookup.__annotations__["ctx"] = annotation
    assert tool(lookup).takes_ctx


async def test_a_parameter_annotated_optional_run_context_receives_it_too():
    # refused: "cannot be arguments a model gives (... not fully defined ...)"
    @tool
    def lookup(key: str, context: RunContext | None = None) -> str:
        """Look a key up."""
        return f"{key} for {context}"

    assert lookup.takes_ctx and list(lookup.parameters["properties"]) == ["key"]
    result = await execute_tool_call(lookup, call("lookup", key="k"), timeout_s=None, ctx="run-7")
    assert result.content == "k for run-7"


class Opaque:
    """A class pydantic cannot make a schema of."""


def test_a_parameter_no_schema_can_describe_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="parameters cannot be arguments"):

        @tool
        def use(thing: Opaque) -> str:
            return ""


def test_values_in_a_schema_keep_their_title_keys():
    # the generated titles go; a default, an example or a constant is the user's data
    @tool
    def greet(
        person: Annotated[dict[str, Any], Field(examples=[{"title": "Dr", "name": "Who"}])] = {  # noqa: B006
            "title": "Dr",
            "x": 1,
        },
        title: str = "Mx",
    ) -> str:
        """Greet someone."""
        return ""

    properties = greet.parameters["properties"]
    assert properties["person"]["default"] == {"title": "Dr", "x": 1}
    assert properties["person"]["examples"] == [{"title": "Dr", "name": "Who"}]
    assert "title" not in properties["person"] and "title" not in properties["title"]
    assert list(properties) == ["person", "title"]


def test_a_function_without_docstring_or_arguments_gets_an_empty_object_schema():
    @tool
    def ping():
        return "pong"

    assert ping.description == ""
    assert ping.parameters == {"type": "object", "properties": {}, "additionalProperties": False}


@pytest.mark.parametrize("name", ["has space", "x" * 65, "dotted.name", 5, b"raw"])
def test_names_providers_would_refuse_are_rejected_at_decoration(name):
    def fn() -> None:
        """Do nothing."""

    with pytest.raises(ConfigurationError, match="1-64 letters"):
        tool(name=name)(fn)


def test_a_lambda_needs_an_explicit_name():
    with pytest.raises(ConfigurationError, match="pass name="):
        tool(lambda: None)
    assert tool(name="noop")(lambda: None).name == "noop"


def test_variadic_arguments_are_rejected_at_decoration():
    def spread(*items: str) -> None:
        """Spread."""

    with pytest.raises(ConfigurationError, match=r"\*items"):
        tool(spread)


def test_decorated_tool_is_a_tool():
    assert isinstance(add, FunctionTool) and isinstance(add, Tool)
    assert repr(add) == "<FunctionTool 'add'>"


# --- calling --------------------------------------------------------------------------------


async def test_sync_tool_runs_in_a_worker_thread():
    @tool
    def where() -> int:
        """Report the thread."""
        return threading.get_ident()

    result = await execute_tool_call(where, call("where"), timeout_s=None)

    assert not result.error
    assert int(result.content) != threading.get_ident()


async def test_async_tool_result_is_serialized_to_json():
    result = await execute_tool_call(
        search, call("search_invoices", query="acme", filters={"customer": "acme"}), timeout_s=None
    )

    assert result == ToolResult(
        call_id="call-1",
        name="search_invoices",
        content='{"query": "acme", "filters": {"customer": "acme", "year": 2024}, '
        '"mode": "exact", "limit": 5}',
    )


async def test_arguments_are_coerced_the_way_pydantic_coerces_them():
    result = await execute_tool_call(add, call("add", a="40"), timeout_s=None)

    assert result.content == "42"


@pytest.mark.parametrize(
    ("value", "content"),
    [
        ("plain text", "plain text"),
        (None, "null"),
        ([1, "two"], '[1, "two"]'),
        (Filters(customer="c"), '{"customer": "c", "year": 2024}'),
        ("ünïcode", "ünïcode"),
    ],
)
async def test_return_values_become_text(value, content):
    @tool
    def give() -> Any:
        """Give a value."""
        return value

    assert (await execute_tool_call(give, call("give"), timeout_s=None)).content == content


async def test_unserializable_return_values_fall_back_to_str():
    class Opaque:
        def __str__(self) -> str:
            return "opaque!"

    @tool
    def give() -> Any:
        """Give an object."""
        return {"thing": Opaque()}

    assert (
        await execute_tool_call(give, call("give"), timeout_s=None)
    ).content == '{"thing": "opaque!"}'


async def test_invalid_arguments_come_back_as_an_error_result_naming_each_problem():
    result = await execute_tool_call(add, call("add", a="many", c=1), timeout_s=None)

    assert result.error
    assert result.content.startswith("invalid arguments for tool 'add': ")
    assert "a: Input should be a valid integer" in result.content
    assert "(got 'many')" in result.content
    assert "c: Extra inputs are not permitted" in result.content
    assert "Call it again" in result.content


async def test_missing_and_nested_arguments_are_named_by_path():
    result = await execute_tool_call(
        search, call("search_invoices", filters={"year": "x"}, limit=0), timeout_s=None
    )

    assert result.error
    for problem in (
        "query: Field required",
        "filters.customer: Field required",
        "limit: Input should be greater than or equal to 1",
    ):
        assert problem in result.content


async def test_unknown_tool_lists_the_available_ones():
    result = await execute_tool_call(
        None, call("delete_all"), timeout_s=None, available=["add", "search"]
    )

    assert result == ToolResult(
        call_id="call-1",
        name="delete_all",
        content="unknown tool 'delete_all'; available: add, search. Call one of those.",
        error=True,
        refused=True,  # no tool ran: the call is not counted against max_tool_calls
    )
    none_left = await execute_tool_call(None, call("x"), timeout_s=None)
    assert "available: none" in none_left.content


async def test_arguments_the_provider_could_not_parse_are_reported():
    broken = ToolCall(id="c", name="add", parse_error="arguments are not valid JSON (line 1)")

    result = await execute_tool_call(add, broken, timeout_s=None)

    assert result.error
    assert (
        result.content
        == "could not read the arguments for tool 'add': arguments are not valid JSON (line 1)"
    )


async def test_an_async_tool_that_hangs_times_out():
    never = asyncio.Event()

    @tool
    async def hang() -> None:
        """Wait forever."""
        await never.wait()

    result = await execute_tool_call(hang, call("hang"), timeout_s=0.01)

    assert result.error
    assert result.content.startswith("tool 'hang' timed out after 0.01 s")


async def test_a_sync_tool_that_blocks_times_out_without_blocking_the_loop():
    release = threading.Event()

    @tool
    def block() -> str:
        """Block a thread."""
        release.wait()
        return "done"

    try:
        result = await execute_tool_call(block, call("block"), timeout_s=0.01)
    finally:
        release.set()  # let the abandoned worker thread finish

    assert result.error and "timed out after 0.01 s" in result.content


async def test_the_smaller_of_the_tool_and_run_timeouts_wins():
    never = asyncio.Event()

    @tool(timeout_s=0.01)
    async def hang() -> None:
        """Wait forever."""
        await never.wait()

    result = await execute_tool_call(hang, call("hang"), timeout_s=60)

    assert "timed out after 0.01 s" in result.content


async def test_a_timeout_error_raised_by_the_tool_itself_is_not_reported_as_our_timeout():
    @tool
    async def fetch() -> None:
        """Fetch."""
        raise TimeoutError("upstream took too long")

    result = await execute_tool_call(fetch, call("fetch"), timeout_s=60)

    assert result.content == "tool 'fetch' raised TimeoutError: upstream took too long"


async def test_exceptions_become_error_results_with_type_and_message():
    @tool
    def explode(reason: str) -> None:
        """Fail."""
        raise ValueError(reason)

    result = await execute_tool_call(explode, call("explode", reason="no ledger"), timeout_s=None)

    assert result == ToolResult(
        call_id="call-1",
        name="explode",
        content="tool 'explode' raised ValueError: no ledger",
        error=True,
    )


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


def _circular() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


@pytest.mark.parametrize(
    "value", [_circular(), 10**5000, _Unprintable()], ids=["circular", "huge-int", "str-raises"]
)
async def test_a_return_value_that_cannot_be_text_is_an_error_result(value: Any) -> None:
    # it failed the whole run (execute_tool_call says it never raises)
    @tool
    def odd() -> Any:
        """Return something odd."""
        return value

    result = await execute_tool_call(odd, call("odd"), timeout_s=None)
    assert result.error and "cannot be made text" in result.content


async def test_a_tool_error_is_passed_to_the_model_verbatim():
    @tool
    def picky() -> None:
        """Refuse."""
        raise ToolError("the archive is read-only; ask for a summary instead")

    result = await execute_tool_call(picky, call("picky"), timeout_s=None)

    assert result.error and result.content == "the archive is read-only; ask for a summary instead"


async def test_cancelling_the_caller_cancels_the_tool_call():
    started, never = asyncio.Event(), asyncio.Event()

    @tool
    async def wait() -> None:
        """Wait."""
        started.set()
        await never.wait()

    task = asyncio.create_task(execute_tool_call(wait, call("wait"), timeout_s=None))
    await started.wait()
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_call_context_reaches_function_tools_and_subclasses():
    @tool
    def whoami(ctx: Any, greeting: str = "hi") -> str:
        """Say who is calling."""
        return f"{greeting} {ctx}"

    class Echo(Tool):
        def __init__(self) -> None:
            super().__init__(
                name="echo",
                description="Echo the input.",
                parameters={"type": "object", "properties": {"input": {"type": "string"}}},
            )

        async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
            return {"input": args["input"], "ctx": ctx}

    fn_result = await execute_tool_call(
        whoami, call("whoami", greeting="hello"), timeout_s=None, ctx="run-7"
    )
    sub_result = await execute_tool_call(
        Echo(), call("echo", input="x"), timeout_s=None, ctx="run-7"
    )

    assert fn_result.content == "hello run-7"
    assert sub_result.content == '{"input": "x", "ctx": "run-7"}'
    assert Echo().spec().description == "Echo the input."


def test_a_bare_tool_subclass_must_implement_call():
    class Bare(Tool):
        pass

    with pytest.raises(TypeError, match="abstract"):
        Bare(name="bare")  # type: ignore[abstract]


def test_tool_result_becomes_a_tool_message():
    ok = ToolResult(call_id="c1", name="add", content="3")
    failed = dataclasses.replace(ok, error=True)

    assert ok.to_message() == Message(role="tool", content="3", tool_call_id="c1", name="add")
    assert failed.to_message().metadata == {"error": True}


def test_timeouts_must_be_positive():
    with pytest.raises(ConfigurationError, match="timeout_s"):
        tool(timeout_s=0)(add.fn)


def test_an_async_generator_function_is_refused_at_decoration():
    # taken: each call answered the model with '"<async_generator object stream at 0x…>"'
    async def stream(query: str):  # type: ignore[no-untyped-def]
        """Stream results."""
        yield query

    with pytest.raises(ConfigurationError, match=r"tool 'stream' is an async generator"):
        tool(stream)


@pytest.mark.parametrize("timeout_s", [float("nan"), float("inf"), "30", True])
def test_a_tool_timeout_that_is_no_finite_number_of_seconds_is_refused(timeout_s):
    # nan and inf were taken (a call that never times out), "30" raised TypeError ('<='
    # not supported), True was a timeout of one second
    def fetch(url: str) -> str:
        """Fetch a page."""
        return url

    with pytest.raises(ConfigurationError, match=r"timeout_s must be a finite number of sec"):
        tool(timeout_s=timeout_s)(fetch)


async def test_a_huge_invalid_argument_is_quoted_only_in_part():
    # the whole value (or one line per bad item) was echoed back to the model, in every retry
    @tool
    def ids(numbers: list[int], count: int = 0) -> int:
        """Count ids."""
        return count

    huge = await execute_tool_call(ids, call("ids", numbers=[], count="x" * 100_000))
    many = await execute_tool_call(ids, call("ids", numbers=["a"] * 5_000))

    assert huge.refused and many.refused
    assert "count: Input should be a valid integer" in huge.content
    assert "(and 99802 more characters))" in huge.content and len(huge.content) < 1_000
    assert "numbers.9: Input should be a valid integer" in many.content
    assert "numbers.10:" not in many.content and len(many.content) < 2_000
    assert "; and 4990 more problems." in many.content
    for result in (huge, many):
        assert result.content.endswith("Call it again with arguments that match its schema.")


async def test_a_sync_generator_tool_runs_in_a_worker_thread_and_returns_its_items():
    # its body ran on the event loop's thread (a blocking read there froze every run) when
    # the result was made text
    @tool
    def lines(count: int):  # type: ignore[no-untyped-def]
        """Read lines."""
        for number in range(count):
            yield [number, threading.get_ident()]

    result = await execute_tool_call(lines, call("lines", count=2), timeout_s=None)

    assert not result.error
    items = json.loads(result.content)
    assert [number for number, _ in items] == [0, 1]
    assert all(thread != threading.get_ident() for _, thread in items)


@pytest.mark.parametrize(
    ("parameters", "words"),
    [
        # taken: every request then failed at the provider, a pydantic class as an HTTP 500
        # ("ModelMetaclass is not JSON serializable"), retried as a server error
        (Filters, r"parameters must be a JSON Schema dict, got ModelMetaclass; for a pydantic "),
        ('{"type": "object"}', r"parameters must be a JSON Schema dict, got str"),
        (
            {"type": "array"},
            r"parameters must describe an object \(\"type\": \"object\"\), got 'array'",
        ),
    ],
)
def test_tool_parameters_that_are_no_object_schema_are_refused(parameters: Any, words: str):
    class Lookup(Tool):
        async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
            return args

    with pytest.raises(ConfigurationError, match=r"tool 'lookup': " + words):
        Lookup(name="lookup", parameters=parameters)


async def test_a_tool_that_tries_to_exit_the_process_is_an_error_result():
    # SystemExit (argparse on arguments it cannot parse, a sys.exit in a library) went through
    # the run's task to the event loop: the run stayed 'running' and asyncio.run ended
    @tool
    def cli(argv: str) -> str:
        """Run the report command line."""
        parser = argparse.ArgumentParser(prog="report", exit_on_error=True)
        parser.add_argument("--year", type=int, required=True)
        return str(parser.parse_args(argv.split()).year)

    @tool
    async def stop(code: int) -> str:
        """Stop."""
        sys.exit(code)

    with contextlib.redirect_stderr(io.StringIO()):  # argparse prints its usage there
        parsed = await execute_tool_call(cli, call("cli", argv="--year 2024"), timeout_s=None)
        bad = await execute_tool_call(cli, call("cli", argv="--yaer 2024"), timeout_s=None)
    stopped = await execute_tool_call(stop, call("stop", code=3), timeout_s=None)

    assert (parsed.error, parsed.content) == (False, "2024")
    assert bad.error and not bad.refused
    assert bad.content == "tool 'cli' tried to exit the process (SystemExit: 2)"
    assert stopped.content == "tool 'stop' tried to exit the process (SystemExit: 3)"


async def test_a_tool_that_raises_generator_exit_is_an_error_result(rt: Runtime):
    # GeneratorExit (a BaseException: a library closing a generator by hand, a tool raising
    # it to stop) went past every handler of the call and of the run: the run's task ended
    # with it, the run stayed 'running' and `await handle.result()` never returned. A sync
    # tool's came back through a future, thrown into the run's task, which closes every
    # frame of the loop at once: it failed the run, where it is now the tool's error result.
    @tool
    def closes() -> str:
        """Read a feed."""
        raise GeneratorExit("feed closed")

    @tool
    async def closes_async() -> str:
        """Read a feed."""
        raise GeneratorExit("no more items")

    model = ScriptedModel([tool_call("closes"), tool_call("closes_async"), "done"])
    handle = await rt.start(Agent("a", model, tools=[closes, closes_async]), "go")
    result = await handle.result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, "done")
    answers = [m for m in result.messages if m.role == "tool"]
    assert [m.content for m in answers] == [
        "tool 'closes' raised GeneratorExit: feed closed",
        "tool 'closes_async' raised GeneratorExit: no more items",
    ]
    assert all(m.metadata == {"error": True} for m in answers)


async def test_an_async_tool_awaiting_a_future_that_raises_generator_exit_is_an_error_result(
    rt: Runtime,
):
    # A future's GeneratorExit (a thread's, through run_in_executor) is thrown into the task
    # awaiting it, which closes every frame of that task at once: with the tool in the run's
    # task, the handler that makes a tool's error its result was closed past, and the run
    # ended 'failed' instead of the model being told.
    def read() -> str:
        raise GeneratorExit("feed closed")

    @tool
    async def feed() -> str:
        """Read a feed."""
        return await asyncio.get_running_loop().run_in_executor(None, read)

    @tool
    async def note(text: str) -> str:
        """Note something."""
        return f"noted {text}"

    batch = tool_calls(tool_call("feed"), tool_call("note", text="x"))
    model = ScriptedModel([batch, tool_call("feed"), "done"])
    handle = await rt.start(Agent("a", model, tools=[feed, note]), "go")
    result = await handle.result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, "done")
    answers = [(m.content, m.metadata) for m in result.messages if m.role == "tool"]
    closed = ("tool 'feed' raised GeneratorExit: feed closed", {"error": True})
    # the rest of the batch ran, and the run went on: every call answered once, in order
    assert answers == [closed, ("noted x", {}), closed]
    assert [len(r.messages) for r in model.requests] == [1, 4, 6]


async def test_an_async_tool_behind_a_plain_decorator_is_awaited():
    # a decorator with a sync wrapper hides that the function is async: the wrapper ran in a
    # worker thread and its coroutine was the result ('"<coroutine object search at 0x…>"',
    # never awaited)
    def logged(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        return wrapper

    @tool
    @logged
    async def search(query: str) -> str:
        """Search."""
        await asyncio.sleep(0)
        return f"found {query}"

    result = await execute_tool_call(search, call("search", query="acme"), timeout_s=None)

    assert (result.error, result.content) == (False, "found acme")


async def test_an_async_tool_that_returns_a_coroutine_it_forgot_to_await_is_awaited():
    # `return lookup(q)` without `await` in an async tool: the model was answered
    # '<coroutine object lookup at 0x…>' and the coroutine was never run (a RuntimeWarning),
    # where the same coroutine from a sync wrapper is awaited (the test above)
    async def lookup(query: str) -> str:
        await asyncio.sleep(0)
        return f"found {query}"

    @tool
    async def search(query: str) -> str:
        """Search."""
        return lookup(query)  # type: ignore[return-value]

    result = await execute_tool_call(search, call("search", query="acme"), timeout_s=None)

    assert (result.error, result.content) == (False, "found acme")


def test_a_tool_description_that_is_no_text_is_refused():
    # taken, and offered to the model as a number: providers refuse the tool on every request
    with pytest.raises(ConfigurationError, match=r"tool 'add': description must be text, got int"):
        tool(description=5)(add.fn)  # type: ignore[arg-type]


async def test_a_sync_tool_whose_iterator_runs_out_is_an_error_result():
    # next() on an empty iterator raised StopIteration in the worker thread, which asyncio
    # cannot hand to the awaiting future: the call never ended (until its timeout)
    @tool
    def first_overdue(invoices: list[str]) -> str:
        """The first overdue invoice."""
        return next(i for i in invoices if i.endswith("!"))

    result = await execute_tool_call(
        first_overdue, call("first_overdue", invoices=["a", "b"]), timeout_s=60
    )

    assert result.error
    assert result.content == (
        "tool 'first_overdue' raised StopIteration: an iterator ran out (next() on an empty one?)"
    )


@pytest.mark.parametrize("args", [[1, 2], "a=1"])
async def test_arguments_that_are_no_object_are_refused_before_any_tool_runs(args: Any):
    # A custom model (or middleware) handing a call arguments that are not a JSON object:
    # a Tool of its own (a SubAgentTool here) got them as they were, raised a TypeError that
    # the model heard as the tool's own failure, and the call counted as one the tool made.
    # (None is no arguments, as pydantic-ai reads it: test_pydantic_ai_ports.)
    ran: list[dict[str, Any]] = []

    class Echo(Tool):
        def __init__(self) -> None:
            super().__init__(name="echo")

        async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
            ran.append(dict(args))
            return "echoed"

    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    ToolCall(id="c1", name="echo", args=args),
                    ToolCall(id="c2", name="child", args=args),
                ]
            ),
            "done",
        ]
    )
    child = Agent("child", ScriptedModel(["never asked"]))
    agent = Agent(
        "parent",
        model,
        tools=[Echo(), SubAgentTool(child)],
        limits=RunLimits(max_tool_calls=2),
    )

    result = await agent.run("go")

    assert result.status is RunStatus.COMPLETED and result.output == "done"
    assert ran == [] and child.model.requests == []
    answers = [m for m in model.requests[1].messages if m.role == "tool"]
    assert [m.metadata for m in answers] == [{"error": True}, {"error": True}]
    for answer in answers:
        if isinstance(args, str):  # JSON text is read as a provider's (test_pydantic_ai_ports)
            assert answer.content.startswith(
                f"could not read the arguments for tool {answer.name!r}: arguments are not "
                "valid JSON"
            )
            assert answer.content.endswith("'a=1'")
            continue
        assert answer.content == (
            f"could not read the arguments for tool {answer.name!r}: arguments must be a "
            f"JSON object, got {type(args).__name__}. Call it again with an object."
        )
    assert result.usage["tool_calls"] == 0  # refused: neither call spent the budget


async def test_sync_tools_past_their_timeout_never_starve_the_loops_default_executor():
    # A sync tool that never returns is abandoned at its timeout, but its thread runs on.
    # On the event loop's default executor (asyncio.to_thread) a few of them took every
    # worker, and every later sync tool, and litellm's request preparation, waited for ever.
    release = threading.Event()

    @tool(timeout_s=0.05)
    def stuck() -> str:
        """Never returns (until the test ends)."""
        release.wait()
        return "late"

    @tool
    def quick(x: int) -> int:
        """Answers at once."""
        return x + 1

    loop = asyncio.get_running_loop()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    loop.set_default_executor(pool)
    try:
        for _ in range(3):  # more than the pool has workers
            result = await execute_tool_call(stuck, call("stuck"), timeout_s=None)
            assert result.error and "timed out" in result.content
        # the loop's executor is free for others (a guard, not a timing: it never waits)
        assert await asyncio.wait_for(asyncio.to_thread(lambda: 42), 60) == 42
        later = await asyncio.wait_for(execute_tool_call(quick, call("quick", x=1)), 60)
        assert later.content == "2"
    finally:
        release.set()


async def test_a_sync_tool_sees_the_callers_context_variables_and_raises_through():
    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")

    @tool
    def read() -> str:
        """Reads the context."""
        return seen.get()

    @tool
    def fails() -> str:
        """Raises."""
        raise ValueError("no such invoice")

    seen.set("from the caller")
    assert (await execute_tool_call(read, call("read"))).content == "from the caller"
    failed = await execute_tool_call(fails, call("fails"))
    assert failed.error and "no such invoice" in failed.content


async def test_in_own_thread_hands_back_a_stop_iteration_as_a_runtime_error():
    # a future refuses StopIteration: handed over as it is, the await would last for ever
    def ends() -> None:
        next(iter(()))

    with pytest.raises(RuntimeError, match="StopIteration"):
        await asyncio.wait_for(in_own_thread(ends), 60)
