"""One id rule for every backend: an id is non-empty, at most ``MAX_ID_LENGTH`` characters and
holds no control character (NUL among them) and no line or paragraph separator (U+2028,
U+2029), nor a bidi control or zero-width character. An id the rule refuses is refused where it enters
(a run, a thread, a command's target, actor or checkpoint), with a typed error, before any
store sees it; the longest ids it allows (in four-byte UTF-8 characters) are stored and read
back by every backend, PostgreSQL's btree indexes included (which refuse ~2.7 KB a row)."""

from __future__ import annotations

import pytest

from tinyagents.errors import InvalidCommandError, InvalidIdError, StoreError
from tinyagents.events import RunEvent, SteeringEvent
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.protocol.ids import MAX_ID_LENGTH
from tinyagents.runs import RunInfo
from tinyagents.store import Store
from tinyagents.testkit import EPOCH

WIDE = "\U0001d538"  # four bytes in UTF-8: the most an id character takes in an index


def longest(prefix: str) -> str:
    return prefix + WIDE * (MAX_ID_LENGTH - len(prefix))


TOO_LONG = "r" * (MAX_ID_LENGTH + 1)
REFUSED = [
    pytest.param(TOO_LONG, id="too-long"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("a\nb", id="newline"),
    pytest.param("a\x7fb", id="del"),
    pytest.param("a\x85b", id="c1-control"),
    # a line or paragraph separator: JavaScript and many log readers break a line at it
    pytest.param("a\u2028b", id="line-separator"),
    pytest.param("a\u2029b", id="paragraph-separator"),
    # shows as nothing, or reorders the text around it: the id is shown as another
    pytest.param("a\u202eb", id="right-to-left-override"),
    pytest.param("a\u2067b", id="right-to-left-isolate"),
    pytest.param("a\u200bb", id="zero-width-space"),
    pytest.param("a\ufeffb", id="byte-order-mark"),
]


@pytest.mark.parametrize("bad", REFUSED)
def test_a_run_or_thread_id_the_rule_refuses_is_an_invalid_id_error(bad: str) -> None:
    with pytest.raises(InvalidIdError, match=r"^run_id must be"):
        RunInfo(run_id=bad)
    with pytest.raises(InvalidIdError, match=r"^tenant_id must be"):
        RunInfo(run_id="r", tenant_id=bad)


@pytest.mark.parametrize("bad", REFUSED)
def test_a_command_naming_an_id_the_rule_refuses_is_refused_when_built(bad: str) -> None:
    builders = [
        lambda: SteeringTarget.agent_run(bad),
        lambda: SteeringTarget.subagent_run("p", bad),
        lambda: SteeringTarget.subagent_run(bad, "c"),
        lambda: SteeringTarget.graph_task(bad, "t"),
        lambda: SteeringTarget.graph_task("g", bad),
        lambda: SteeringTarget.thread(bad),
        lambda: SteeringActor.human("ana", tenant_id=bad),
        lambda: SteeringActor.parent_agent(bad, "orchestrator"),
        lambda: SteeringActor.graph_supervisor(bad, "sup"),
        lambda: SteeringActor.middleware("ops", run_id=bad),
        lambda: SteeringCommand(
            target=SteeringTarget.agent_run("r"),
            actor=SteeringActor.test(),
            kind=SteeringKind.RESUME,
            checkpoint_id=bad,
        ),
        lambda: SteeringCommand.model_validate(
            {
                "target": {"type": "agent_run", "run_id": bad},
                "actor": {"type": "test"},
                "kind": "resume",
            }
        ),
    ]
    for build in builders:
        with pytest.raises(InvalidCommandError) as caught:
            build()
        message = str(caught.value)
        assert "character" in message
        assert len(message) < 400  # the id is not quoted whole


async def test_the_longest_ids_the_rule_allows_are_stored_and_read_back_by_every_store(
    store: Store,
) -> None:
    tenant = longest("t")
    info = RunInfo(
        run_id=longest("r"),
        root_run_id=longest("R"),
        parent_run_id=longest("p"),
        thread_id=longest("h"),
        tenant_id=tenant,
    )
    await store.save_runs([info.snapshot()])
    [loaded] = await store.load_runs(tenant_id=tenant)
    assert (loaded["run_id"], loaded["root_run_id"]) == (info.run_id, info.root_run_id)
    assert await store.load_run(info.run_id) is not None

    cid = "c" + WIDE * 199  # a correlation id's own bound (200)
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run(info.run_id),
        actor=SteeringActor.human("ana", tenant_id=tenant, scopes=["agent:control"]),
        kind=SteeringKind.RESUME,
        correlation_id=cid,
        checkpoint_id=longest("k"),
    )
    assert await store.append_command(cmd, state="accepted", run_id=info.run_id)
    stored = await store.get_command(cid, scope=f"tenant:{tenant}")
    assert stored is not None and stored.command == cmd
    applied = await store.run_commands(info.run_id, states=("accepted",))
    assert [c.command.correlation_id for c in applied] == [cid]

    events = [
        RunEvent(
            type="run.started",
            run_id=info.run_id,
            root_run_id=info.root_run_id,
            parent_run_id=info.parent_run_id,
            tenant_id=tenant,
            agent_id="a",
            at=EPOCH,
        ),
        SteeringEvent(
            type="steering.accepted",
            run_id=info.run_id,
            root_run_id=info.root_run_id,
            tenant_id=tenant,
            target=cmd.target,
            actor=cmd.actor,
            kind=cmd.kind,
            correlation_id=cid,
            at=EPOCH,
        ),
    ]
    await store.append_events(events)
    read = [e for _, e in await store.read_events(run_id=info.run_id)]
    assert [e.type for e in read] == ["run.started", "steering.accepted"]
    assert [e.type for _, e in await store.read_events(tenant_id=tenant)] == [
        "run.started",
        "steering.accepted",
    ]
    assert len(await store.list_runs(tenant_id=tenant, root_run_id=info.root_run_id)) == 1


async def test_a_store_error_quotes_a_huge_id_cut_short(store: Store) -> None:
    # the store's own API takes any text; PostgreSQL refuses a NUL, and its error quoted the
    # whole megabyte-long id
    huge = "x" * 1_000_000 + "\x00"
    for read in (
        lambda: store.get_command(huge),
        lambda: store.load_run(huge),
        lambda: store.run_commands(huge),
    ):
        try:
            assert await read() in (None, [])
        except StoreError as exc:
            assert len(str(exc)) < 1_000
            assert "1,000,001 characters" in str(exc)
