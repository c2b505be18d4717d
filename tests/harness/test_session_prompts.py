"""A ``SubAgentSession``'s turns get the system prompt a plain run of its agent gets.

Its first turn put a system message of its own (the instructions' text) before the run
started, so the run saw a conversation that brought its own prompt: the agent's
``@agent.system_prompt`` functions never ran, and a dynamic one had no place to be written
again in later turns. The first turn now starts as ``agent.run`` does; later turns continue
its transcript, with its one system message.
"""

from __future__ import annotations

from typing import Any

from tinyagents import Agent, SubAgent
from tinyagents.harness import ModelRequest
from tinyagents.runtime import Runtime
from tinyagents.testkit import FunctionModel


def capturing() -> tuple[FunctionModel, list[ModelRequest]]:
    seen: list[ModelRequest] = []

    def model(request: ModelRequest) -> str:
        seen.append(request)
        return f"answer {len(seen)}"

    return FunctionModel(model), seen


def system_texts(request: ModelRequest) -> list[str]:
    return [str(m.content) for m in request.messages if m.role == "system"]


async def test_a_sessions_first_turn_runs_the_system_prompt_functions() -> None:
    model, seen = capturing()
    agent = Agent("chat", model, instructions="Be brief.")

    @agent.system_prompt
    def persona() -> str:
        return "You are a librarian."

    async with Runtime() as rt:
        plain = await agent.run("hi")
        session = SubAgent(agent).session(runtime=rt)
        await session.send("hi")
        await session.send("and again")
    alone, first, second = seen
    assert system_texts(first) == system_texts(alone) == ["Be brief.\n\nYou are a librarian."]
    # the later turn continues the transcript: its one system prompt, not a second
    assert system_texts(second) == system_texts(first)
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "user"]
    assert plain.output == "answer 1"


async def test_a_dynamic_system_prompt_is_written_again_in_each_turn() -> None:
    model, seen = capturing()
    agent = Agent("chat", model, instructions="Be brief.")
    turns = iter(range(1, 10))

    @agent.system_prompt(dynamic=True)
    def clock() -> str:
        return f"turn {next(turns)}"

    async with Runtime() as rt:
        session = SubAgent(agent).session(runtime=rt)
        await session.send("one")
        await session.send("two")
    first, second = seen
    assert system_texts(first) == ["Be brief.\n\nturn 1"]
    assert system_texts(second) == ["Be brief.\n\nturn 2"]


async def test_instruction_functions_are_called_for_each_turns_requests() -> None:
    model, seen = capturing()
    calls: list[int] = []

    def numbered(ctx: Any) -> str:
        calls.append(1)
        return f"call {len(calls)}"

    agent = Agent("chat", model, instructions=["Be brief.", numbered])

    @agent.instructions
    def more() -> str:
        return "Cite sources."

    async with Runtime() as rt:
        session = SubAgent(agent).session(runtime=rt)
        await session.send("one")
        await session.send("two")
    first, second = seen
    assert system_texts(first) == ["Be brief.\n\ncall 1\n\nCite sources."]
    assert system_texts(second) == ["Be brief.\n\ncall 2\n\nCite sources."]
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "user"]


async def test_a_session_with_plain_instructions_sends_them_once() -> None:
    model, seen = capturing()
    agent = Agent("chat", model, instructions="Be brief.")
    async with Runtime() as rt:
        session = SubAgent(agent).session(runtime=rt)
        await session.send("one")
        await session.send("two")
    first, second = seen
    assert system_texts(first) == system_texts(second) == ["Be brief."]
    assert session.messages[0].role == "system"
    assert [m.role for m in session.messages].count("system") == 1
