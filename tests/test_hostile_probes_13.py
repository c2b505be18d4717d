"""A hostile or careless user's thirteenth round: the testkit's local OpenAI-compatible server
spoken to with bodies no client of it should send (nested past the parser, messages that are
no objects, odd ``stream_options``, ``tools`` and ``tool_choice`` in each strict mode), and the
graph's thread API given a namespace that is no text.

Each test is a probe that found something (named in its docstring) or holds a decision down.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents import Agent, LiteLLMModel, RunStatus, Runtime, SupervisorSpec
from tinyagents.errors import ArgumentError, ConfigurationError
from tinyagents.events import mask
from tinyagents.events.redact import MAX_MASK_DEPTH
from tinyagents.graph import START, StateGraph
from tinyagents.harness import Model, ModelRequest, ModelResponse, Tool, ToolCall
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.supervisor import SupervisorSpecError
from tinyagents.supervisor.judge import Judge, JudgeError, JudgeInput, parse_verdict
from tinyagents.testkit import OpenAICompatServer, ScriptedModel, fake_agent, reply

HELLO = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
MODES = ["default", "openai", "vllm", "llama.cpp"]


pytestmark = pytest.mark.usefixtures("default_recursion_limit")


async def post(server: OpenAICompatServer, body: bytes | dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        url = f"{server.base_url}/chat/completions"
        if isinstance(body, bytes):
            headers = {"Content-Type": "application/json"}
            return await client.post(url, content=body, headers=headers)
        return await client.post(url, json=body)


# -- the testkit's OpenAI-compatible server --------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_body_nested_past_the_parser_is_a_400_that_uses_up_no_reply(mode: str) -> None:
    """Found: a body nested deeper than Python's JSON parser reads was a 500 ("Server got
    itself in trouble": the parser's ``RecursionError`` went unanswered), which every client
    retries, each retry a request the test did not mean to make."""
    deep = b'{"model": "m", "messages": [], "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    async with OpenAICompatServer(["the reply"], mode=mode) as server:  # type: ignore[arg-type]
        bad = await post(server, deep)
        good = await post(server, HELLO)

    assert bad.status_code == 400
    assert "not JSON" in bad.json()["error"]["message"]
    assert good.json()["choices"][0]["message"]["content"] == "the reply"


@pytest.mark.parametrize("mode", ["default", "openai"])
async def test_messages_that_are_no_objects_are_a_400_that_uses_up_no_reply(mode: str) -> None:
    """Found: ``"messages": [1, 2]`` took the next scripted reply and then failed counting the
    prompt's words, a 500; the strict modes vLLM and llama.cpp refused it already."""
    async with OpenAICompatServer(["the reply"], mode=mode) as server:  # type: ignore[arg-type]
        bad = await post(server, {"model": "m", "messages": [{"role": "user"}, 2]})
        good = await post(server, HELLO)

    assert bad.status_code == 400
    assert "message 1" in bad.json()["error"]["message"]
    assert good.json()["choices"][0]["message"]["content"] == "the reply"
    assert server.refusals and "message 1" in server.refusals[0]


@pytest.mark.parametrize("mode", ["vllm", "llama.cpp"])
async def test_the_strict_modes_still_answer_messages_that_are_no_objects_their_way(
    mode: str,
) -> None:
    """vLLM's 400 and llama.cpp's 500 for a message that is no object stay theirs."""
    async with OpenAICompatServer(["the reply"], mode=mode) as server:  # type: ignore[arg-type]
        bad = await post(server, {"model": "m", "messages": [2]})

    assert bad.status_code == (400 if mode == "vllm" else 500)
    assert f"[{mode}-strict]" in bad.text


@pytest.mark.parametrize("mode", ["default", "openai", "llama.cpp"])
async def test_stream_options_that_are_no_object_are_a_400_before_the_stream(mode: str) -> None:
    """Found: ``"stream": true, "stream_options": 5`` started the stream (200) and broke off
    inside it, the client left with a truncated body (``ClientPayloadError``) and the scripted
    reply used up. vLLM's mode refused it already."""
    body = {**HELLO, "stream": True, "stream_options": 5}
    async with OpenAICompatServer(["the reply"], mode=mode) as server:  # type: ignore[arg-type]
        bad = await post(server, body)
        good = await post(server, HELLO)

    assert bad.status_code == 400
    assert "stream_options" in bad.json()["error"]["message"]
    assert good.json()["choices"][0]["message"]["content"] == "the reply"


async def test_stream_options_asking_for_usage_still_get_it() -> None:
    body = {**HELLO, "stream": True, "stream_options": {"include_usage": True}}
    async with OpenAICompatServer(["the reply"]) as server:
        streamed = await post(server, body)

    assert streamed.status_code == 200
    assert '"usage": {"prompt_tokens": 1' in streamed.text


NAMED = {"type": "function", "function": {"name": "add"}}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"tools": [5], "tool_choice": NAMED}, "tool_choice"),
        ({"tools": [{"type": "function", "function": "add"}], "tool_choice": NAMED}, "tool_choice"),
        (
            {
                "tools": [{"type": "function", "function": {"name": "add"}}],
                "tool_choice": {"type": "function", "function": 5},
            },
            "tool_choice",
        ),
    ],
)
async def test_openai_mode_answers_an_odd_tool_choice_with_its_400(
    body: dict[str, Any], param: str
) -> None:
    """Found: in ``mode="openai"`` a named ``tool_choice`` whose ``function`` is no object, or
    beside ``tools`` holding what is no tool, was a 500 from the rule that reads it."""
    async with OpenAICompatServer(["the reply"], mode="openai") as server:
        bad = await post(server, {**HELLO, **body})
        good = await post(server, HELLO)

    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == param
    assert good.json()["choices"][0]["message"]["content"] == "the reply"


async def test_llama_cpp_mode_answers_tools_that_are_no_list_with_its_error() -> None:
    """Found: in ``mode="llama.cpp"``, ``"tools": 5`` was a bare 500 ("Server got itself in
    trouble") from iterating over it, not llama.cpp's "Failed to parse tools"."""
    async with OpenAICompatServer(["the reply"], mode="llama.cpp") as server:
        bad = await post(server, {**HELLO, "tools": 5})
        good = await post(server, HELLO)

    assert bad.status_code == 500
    assert "Failed to parse tools" in bad.json()["error"]["message"]
    assert good.json()["choices"][0]["message"]["content"] == "the reply"


# -- the graph's thread API --------------------------------------------------------------------


class S(TypedDict):
    x: int


def _graph() -> Any:
    def add(state: S) -> dict[str, int]:
        return {"x": state["x"] + 1}

    builder = StateGraph(S).add_node("add", add).add_edge(START, "add")
    return builder.compile(checkpointer=MemoryCheckpointer())


@pytest.mark.parametrize("ns", [5, b"sub:1", ["sub"]])
async def test_update_state_given_a_namespace_that_is_no_text_is_an_argument_error(
    ns: object,
) -> None:
    """Found: ``update_state(..., ns=5)`` was a bare ``ValueError`` (``history(ns=5)`` is an
    ``ArgumentError``); nothing is written either way."""
    graph = _graph()
    await graph.run({"x": 1}, thread_id="t")
    before = await graph.history("t")

    with pytest.raises(ArgumentError, match=r"update_state\(ns=\.\.\.\) takes a namespace"):
        await graph.update_state("t", {"x": 5}, ns=ns)

    assert await graph.history("t") == before
    assert (await graph.get_state("t")).values == {"x": 2}


# -- an api_base holding what no URL holds ----------------------------------------------------

ODD_URLS = [
    ("http://127.0.0.1:8080/v1\x00", "U+0000"),
    ("http://127.0.0.1:8080/v\n1", "U+000A"),
    ("http://\u202e127.0.0.1:8080/v1", "U+202E"),
    ("http://127.0.0.1:8080/v1 beta", "U+0020"),
    ("http://exa mple.com/v1", "U+0020"),
]


@pytest.mark.parametrize(("url", "says"), ODD_URLS)
def test_an_api_base_holding_a_control_bidi_or_space_character_is_refused_when_made(
    url: str, says: str
) -> None:
    """Found: ``LiteLLMModel(api_base=...)`` took a URL holding a NUL, a line break, a bidi
    override or a space; each call then failed as the server's "HTTP 500" (retried, though no
    server was asked) or a host no resolver knows."""
    with pytest.raises(ConfigurationError, match=re.escape(says)):
        LiteLLMModel("openai/m", api_base=url, api_key="sk-test")


@pytest.mark.parametrize(("url", "says"), ODD_URLS[:3])
def test_a_supervisor_spec_api_base_holding_a_control_or_bidi_character_is_refused(
    url: str, says: str
) -> None:
    """The judge's ``api_base`` in a spec was taken so too (the judge's every call then failed,
    and the default ``on_judge_error: ignore`` passed each run unjudged)."""
    yaml_text = f"model: openai/m\napi_base: {json.dumps(url)}\n"
    with pytest.raises(SupervisorSpecError, match=re.escape(says)) as raised:
        SupervisorSpec.from_yaml(yaml_text)
    assert raised.value.line == 2


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/v1", "https://api.example.com/v1/", "http://[::1]:8080"]
)
def test_a_plain_api_base_is_still_taken(url: str) -> None:
    assert LiteLLMModel("openai/m", api_base=url, api_key="sk-test").api_base == url
    assert SupervisorSpec(model="openai/m", api_base=url).api_base == url


# -- a graph's drawing -------------------------------------------------------------------------


def test_nodes_whose_names_differ_only_in_punctuation_are_drawn_as_distinct_nodes() -> None:
    """Found: ``to_mermaid()`` made a node's Mermaid id by turning every character that is no
    letter or digit into ``_``: nodes ``a b``, ``a;b`` and ``a_b`` all became ``n_a_b``, one
    box with two self-loops, their edges lost from the drawing."""
    builder = StateGraph(S)
    for name in ("a b", "a;b", "a_b", "a_b_2"):
        builder.add_node(name, lambda state: {})
    graph = (
        builder.add_edge(START, "a b")
        .add_edge("a b", "a;b")
        .add_edge("a;b", "a_b")
        .add_edge("a_b", "a_b_2")
        .compile()
    )

    lines = graph.to_mermaid().splitlines()
    boxes = {line.split("[")[0].strip(): line.split('["')[1][:-2] for line in lines if '["' in line}
    assert sorted(boxes.values()) == ["a b", "a;b", "a_b", "a_b_2"]  # four ids, one per node
    ids = {name: id_ for id_, name in boxes.items()}
    arrows = [line.strip() for line in lines if "-->" in line]
    assert arrows == [
        f"__start__ --> {ids['a b']}",
        f"{ids['a b']} --> {ids['a;b']}",
        f"{ids['a;b']} --> {ids['a_b']}",
        f"{ids['a_b']} --> {ids['a_b_2']}",
        f"{ids['a_b_2']} --> __end__",
    ]


def test_a_node_of_a_plain_name_keeps_its_mermaid_id() -> None:
    graph = StateGraph(S).add_node("draft", lambda state: {}).add_edge(START, "draft").compile()
    assert "__start__ --> n_draft" in graph.to_mermaid()


# -- the LLM judge's answer ----------------------------------------------------------------------


def _judge_input() -> JudgeInput:
    return JudgeInput(
        iteration=1, tokens_used=10, token_budget=None, tool_calls={}, undeclared_tool_calls=0
    )


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


class _Answers(Model):
    """A judge model of the user's own (``SupervisorSpec(model=<a Model>)``) answering as told."""

    name = "own-judge"

    def __init__(self, answer: ModelResponse) -> None:
        self.answer = answer

    async def request(self, request: ModelRequest) -> ModelResponse:
        return self.answer


async def test_a_verdict_whose_reason_is_nested_past_what_json_writes_is_a_judge_error() -> None:
    """Found: a judge answering in a tool call whose ``reason`` is a list nested ~1,000 deep
    (arguments a provider's JSON held, or a model of the user's own) raised a bare
    ``RecursionError`` out of the verdict's parsing (writing the reason as text), not the
    ``JudgeError`` that ``on_judge_error`` handles."""
    answer = ModelResponse(
        tool_calls=[
            ToolCall(id="c1", name="verdict", args={"passed": False, "reason": _nested(995)})
        ]
    )

    assert parse_verdict(answer) is None
    with pytest.raises(JudgeError, match="did not answer a verdict"):
        await Judge(_Answers(answer), criteria="", timeout_s=60).verdict(_judge_input())


def test_a_verdict_whose_reason_is_a_list_still_reads_with_it_as_text() -> None:
    answer = ModelResponse(
        tool_calls=[ToolCall(id="c1", name="verdict", args={"passed": False, "reason": ["slow"]})]
    )
    verdict = parse_verdict(answer)
    assert verdict is not None and (verdict.passed, verdict.reason) == (False, '["slow"]')


# -- an output the model answers ------------------------------------------------------------------


@pytest.mark.parametrize("depth", [990, 100_000])
async def test_an_output_string_nested_past_the_parser_is_sent_back_not_a_failed_run(
    depth: int,
) -> None:
    """Found: with ``output_type=list[int]``, an answer ``{"response": "[[[[..."}`` (the list
    as text, nested past what the JSON reader reads) failed the run with a bare
    ``RecursionError`` from reading the text as JSON; an answer that is no list is sent back
    to the model to correct, as a shallower one was."""
    model = ScriptedModel([reply('{"response": "' + "[" * depth + '"}'), '{"response": [1]}'])

    result = await Agent("lister", model, output_type=list[int]).run("list them")

    assert result.status == "completed", result.error
    assert result.output == [1]
    assert len(model.requests) == 2  # the second saw what was wrong with the first


# -- a tool's parameters schema -------------------------------------------------------------------


class _SchemaTool(Tool):
    async def call(self, args: dict[str, Any], ctx: Any = None) -> str:
        return "called"


def _array_of_arrays(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return {"type": "object", "properties": {"a": schema}}


@pytest.mark.parametrize("depth", [990, 5_000])
def test_a_tool_schema_nested_past_what_json_writes_is_refused_when_made(depth: int) -> None:
    """Found: a ``Tool`` whose ``parameters`` schema nests deeper than JSON can be written (it
    goes to the provider as JSON in every request) was a bare ``RecursionError`` when made; a
    schema holding itself was already a ``ConfigurationError``."""
    with pytest.raises(ConfigurationError, match="nested too deep"):
        _SchemaTool(name="deep", parameters=_array_of_arrays(depth))


def test_a_tool_schema_of_ordinary_depth_is_still_taken() -> None:
    assert _SchemaTool(name="shallow", parameters=_array_of_arrays(50)).name == "shallow"


# -- the testkit server's script ------------------------------------------------------------------


@pytest.mark.parametrize("replies", ["hello", b"hello", 5])
def test_a_server_script_that_is_no_list_of_replies_is_refused_when_made(replies: Any) -> None:
    """Found: ``OpenAICompatServer("hello")`` scripted five replies, one per letter
    (``ScriptedModel("hello")`` is refused), and ``OpenAICompatServer(5)`` was a bare
    ``TypeError``."""
    with pytest.raises(ArgumentError, match="list of replies"):
        OpenAICompatServer(replies)


def test_a_scripted_reply_of_no_reply_type_is_refused_naming_it() -> None:
    """Found: a reply of ``5`` (or ``None``) was taken, and the request it answered was a 500
    ("Server got itself in trouble") from building a completion of it; ``add`` took them
    too."""
    with pytest.raises(ArgumentError, match=r"reply 2 is int"):
        OpenAICompatServer(["fine", 5])
    server = OpenAICompatServer(["fine"])
    with pytest.raises(ArgumentError, match=r"reply 2 is NoneType"):
        server.add(None)  # type: ignore[arg-type]
    assert server._scripted == 1  # nothing was queued


async def test_a_scripted_callable_answering_no_reply_is_a_400_naming_it() -> None:
    """Found with the probe above: a callable reply returning ``5`` was a 500, as a reply of
    5 was; a callable that raises is a 400 naming it."""
    async with OpenAICompatServer([lambda body: 5, "the reply"]) as server:
        bad = await post(server, HELLO)
        good = await post(server, HELLO)

    assert bad.status_code == 400
    assert "returned int" in bad.json()["error"]["message"]
    assert good.json()["choices"][0]["message"]["content"] == "the reply"


def test_a_server_mode_it_does_not_know_is_an_argument_error() -> None:
    with pytest.raises(ArgumentError, match="mode must be"):
        OpenAICompatServer([], mode="zz")  # type: ignore[arg-type]


# -- a run id of another tenant's run ---------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    dsn = postgres_dsn()
    sep = "&" if "?" in dsn else "?"
    yield f"{dsn}{sep}schema={pg_schema()}"
    await drop_pg_schemas()


def _kept(snapshot: dict[str, Any] | None) -> dict[str, Any]:
    assert snapshot is not None
    return {k: v for k, v in snapshot.items() if k != "silence_s"}


async def test_a_start_under_another_tenants_run_id_is_refused_and_changes_nothing(
    store_url: str,
) -> None:
    """Found: ``rt.start(..., run_id=X, tenant_id="globex")`` with X the id of an acme run the
    store kept (finished) claimed the id and wrote globex's run over acme's record: acme's run
    was gone from the store, and its id (with its events) listed as globex's. It is refused
    as an id taken, naming nothing of the other run; its own tenant still starts it again."""
    async with Runtime(store_url) as rt:
        done = await rt.start(fake_agent("clerk"), "acme work", run_id="job-1", tenant_id="acme")
        assert (await done.result()).status is RunStatus.COMPLETED
    async with Runtime(store_url) as rt:
        kept = _kept(await rt.store.load_run("job-1"))
        model = ScriptedModel([reply("globex's answer")])
        with pytest.raises(ConfigurationError, match=r"run id 'job-1' is taken") as refused:
            await rt.start(Agent("clerk", model), "globex work", run_id="job-1", tenant_id="globex")
        assert "acme" not in str(refused.value) and "owner" not in str(refused.value)
        assert model.requests == []
        assert rt.runs.get("job-1") is None
        assert _kept(await rt.store.load_run("job-1")) == kept
        again = await rt.start(fake_agent("clerk"), "acme again", run_id="job-1", tenant_id="acme")
        assert (await again.result()).status is RunStatus.COMPLETED
        await rt.flush()
        now = await rt.store.load_run("job-1")
        assert now is not None and now["tenant_id"] == "acme"


# -- events.mask on a cyclic or deep value ----------------------------------------------------


def _depth(value: Any) -> int:
    level = 0
    while isinstance(value, (dict, list)):
        level += 1
        value = value[0] if isinstance(value, list) else next(iter(value.values()))
    return level


def test_mask_of_a_cyclic_value_cuts_it_as_a_summary_does() -> None:
    """Found: the public ``tinyagents.events.mask`` recursed into a dict holding itself (and
    into a list nested past Python's recursion limit) until a bare ``RecursionError``; a
    summary (``summarize``) cuts such a value at its depth bound with a marker. ``mask``
    now does so at ``MAX_MASK_DEPTH``, secrets above the cut still masked."""
    loop: dict[str, Any] = {"password": "hunter2"}
    loop["again"] = loop
    masked = mask(loop)
    assert masked["password"] == "***"
    level, inner = 1, masked
    while isinstance(inner.get("again"), dict):
        assert inner["password"] == "***"
        inner, level = inner["again"], level + 1
    assert level == MAX_MASK_DEPTH
    assert inner["again"] == f"… (2 items nested deeper than {MAX_MASK_DEPTH} levels)"


def test_mask_of_a_value_nested_past_the_recursion_limit_is_cut() -> None:
    deep: list[Any] = ["leaf"]
    for _ in range(5_000):
        deep = [deep]
    masked = mask({"args": deep, "token": "t"})
    assert masked["token"] == "***"
    assert _depth(masked) == MAX_MASK_DEPTH


def test_mask_keeps_a_value_within_its_depth_whole() -> None:
    value: Any = {"api_key": "k", "leaf": "x" * 5_000}
    for _ in range(MAX_MASK_DEPTH - 1):
        value = {"v": value}
    masked = mask(value)
    assert _depth(masked) == MAX_MASK_DEPTH
    inner = masked
    while "v" in inner:
        inner = inner["v"]
    assert inner == {"api_key": "***", "leaf": "x" * 5_000}


# -- rt.runs.get of an id that is no text ------------------------------------------------------


@pytest.mark.parametrize("run_id", [5, [1], {"a": 1}, None, b"r-1"])
async def test_runs_get_of_an_id_that_is_no_text_is_an_argument_error(run_id: Any) -> None:
    """Found: ``rt.runs.get([1])`` was a bare ``TypeError`` (unhashable) while
    ``rt.runs.get(5)`` answered None, as if no run had the id. Both are the
    ``ArgumentError`` that ``rt.forget(5)`` and ``rt.tree(5)`` give for an id that is no text."""
    async with Runtime() as rt:
        done = await rt.start(fake_agent("clerk"), "work", run_id="r-1")
        await done.result()
        with pytest.raises(ArgumentError, match="run_id is a run id"):
            rt.runs.get(run_id)
        with pytest.raises(ArgumentError, match="run_id is a run id"):
            rt.forget(run_id)
        assert rt.runs.get("r-1") is done
        assert rt.runs.get("no-such-run") is None
