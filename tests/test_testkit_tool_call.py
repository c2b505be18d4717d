"""``tool_call`` can script a call whose arguments include ``name`` (``spawn_subagent`` has one)."""

from __future__ import annotations

from tinyagents.testkit import tool_call


def test_a_tool_argument_called_name_is_an_argument_not_the_tool() -> None:
    call = tool_call("spawn_subagent", name="critic", input="check the ledger").tool_calls[0]
    assert call.name == "spawn_subagent"
    assert call.args == {"name": "critic", "input": "check the ledger"}


def test_a_tool_argument_called_args_or_id_goes_in_the_args_dict() -> None:
    call = tool_call("lookup", {"id": "42", "args": [1]}, id="call-1", name="x").tool_calls[0]
    assert (call.id, call.name) == ("call-1", "lookup")
    assert call.args == {"id": "42", "args": [1], "name": "x"}
