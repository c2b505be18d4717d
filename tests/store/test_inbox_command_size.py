"""A command too large to travel between processes through the store's inbox is refused by
its sender, as over Redis (``MAX_COMMAND_BYTES``), instead of being written whole into the
inbox, where the owner's take reads up to 100 such rows at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyagents import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.errors import InvalidCommandError
from tinyagents.steering.remote import submit_through_store
from tinyagents.store import SqliteStore, Store
from tinyagents.store.base import MAX_COMMAND_BYTES

OPS = SteeringActor.human("alice", tenant_id="acme", scopes=["agent:control"])


FAR = {
    "run_id": "r-far",
    "root_run_id": "r-far",
    "parent_run_id": None,
    "tenant_id": "acme",
    "status": "running",
    "owner": "rt-far",
    "updated_at": "2999-01-01T00:00:00+00:00",  # never silent
    "created_at": "2026-01-01T00:00:00+00:00",
}


async def test_a_command_too_large_for_the_inbox_is_refused_before_it_is_put(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "store.db")
    await store.open()
    try:
        await store.save_runs([FAR])
        huge = SteeringCommand(
            target=SteeringTarget.agent_run("r-far"),
            actor=OPS,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "x" * (MAX_COMMAND_BYTES + 1)},
        )
        with pytest.raises(InvalidCommandError, match=r"too large to send to another process"):
            await submit_through_store(store, huge, timeout_s=0.5)
        assert await store.inbox_take("rt-far") == []
    finally:
        await store.close()


async def test_a_command_put_into_the_inbox_is_made_json_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``submit_through_store`` made the command JSON to check its size, then the store made
    it again to write it: a command near the limit cost two 1 MiB dumps. The store's put
    checks the size of the JSON it writes. (The receipt never comes: no owner answers.)"""
    from tinyagents.errors import ReceiptTimeout

    await store.save_runs([FAR])
    dumps: list[str] = []
    dump = SteeringCommand.model_dump_json

    def counted(self: SteeringCommand, **kw: object) -> str:
        if self.payload.get("text") == "near the limit":
            dumps.append(self.correlation_id)
        return dump(self, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(SteeringCommand, "model_dump_json", counted)
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run("r-far"),
        actor=OPS,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "near the limit"},
    )
    with pytest.raises(ReceiptTimeout):
        await submit_through_store(store, cmd, timeout_s=0.01)
    assert dumps == [cmd.correlation_id]
    monkeypatch.undo()
    [item] = await store.inbox_take("rt-far")
    assert item.command == cmd


async def test_the_store_refuses_to_put_a_command_too_large_for_its_inbox(store: Store) -> None:
    huge = SteeringCommand(
        target=SteeringTarget.agent_run("r-far"),
        actor=OPS,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "x" * (MAX_COMMAND_BYTES + 1)},
    )
    with pytest.raises(InvalidCommandError, match=r"too large to send to another process"):
        await store.inbox_put(owner="rt-far", request_id="req-1", command=huge)
    assert await store.inbox_take("rt-far") == []


async def test_a_command_made_past_validation_is_refused_before_it_is_put(
    tmp_path: Path,
) -> None:
    """``model_copy(update=...)`` validates nothing: a cancel carrying an instruction's text
    was put into the inbox as it was, for the owner to find it invalid. The sender refuses
    it, as ``Runtime.submit`` does, with the error building it would have raised."""
    store = SqliteStore(tmp_path / "store.db")
    await store.open()
    try:
        await store.save_runs([FAR])
        valid = SteeringCommand(
            target=SteeringTarget.agent_run("r-far"),
            actor=OPS,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "focus"},
        )
        forged = valid.model_copy(update={"kind": SteeringKind.CANCEL})
        with pytest.raises(InvalidCommandError, match="invalid payload for cancel"):
            await submit_through_store(store, forged, timeout_s=0.5)
        assert await store.inbox_take("rt-far") == []
    finally:
        await store.close()
