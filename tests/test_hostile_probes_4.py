"""A hostile user's fourth round: what a store is given to write, the id rule against
characters that show another id than the one stored, and the supervisor's spec lookup.

Each test is a probe that found something (named in its comment). The operator API's probes
of this round are in ``tests/server/test_hostile_api_4.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents import Agent, Runtime, SupervisorSpec
from tinyagents.cli import main
from tinyagents.errors import ArgumentError, InvalidCommandError, InvalidIdError
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.protocol.ids import id_problem
from tinyagents.runs import RunInfo
from tinyagents.runs.info import check_id
from tinyagents.store import MemoryStore, PostgresStore, SqliteStore, Store
from tinyagents.testkit import Gate


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        opened: Store = MemoryStore()
    elif request.param == "sqlite":
        opened = SqliteStore(tmp_path / "store.db")
    else:
        opened = PostgresStore(postgres_dsn(), schema=pg_schema(tmp_path))
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()
        await drop_pg_schemas()


# -- 1. a run snapshot with a time that is no time ---------------------------------------------

NO_TIMES = ["yesterday", "", "2026-13-45T00:00:00", 12, ["2026-01-01"], {"at": 1}, True]


@pytest.mark.parametrize("key", ["created_at", "updated_at"])
@pytest.mark.parametrize("garbage", NO_TIMES, ids=repr)
async def test_a_snapshot_whose_time_is_no_time_is_refused_before_it_is_stored(
    store: Store, key: str, garbage: Any
) -> None:
    """Found: ``save_runs`` stored a ``created_at`` of ``"yesterday"`` (the listing's key and a
    page's cursor), and every later read of the run was ``DamagedData``: a row the writer
    itself damaged. Now the write is an ``ArgumentError`` naming the run and the field, and
    nothing of the batch is stored (the good snapshot beside it included: one call, one
    answer)."""
    good = RunInfo(run_id="good", tenant_id="acme").snapshot()
    bad = {**RunInfo(run_id="bad", tenant_id="acme").snapshot(), key: garbage}
    with pytest.raises(ArgumentError, match=rf"'bad'.*{key}.*ISO") as caught:
        await store.save_runs([good, bad])
    assert isinstance(caught.value, ValueError)
    assert await store.load_runs() == []
    assert await store.list_runs() == []
    # claim_run writes a snapshot too
    with pytest.raises(ArgumentError, match=rf"{key}"):
        await store.claim_run(bad, lambda stored: True)
    assert await store.load_run("bad") is None
    # a snapshot with no such time, or None, or a datetime's ISO text, is still taken
    fine = {**RunInfo(run_id="fine", tenant_id="acme").snapshot(), "updated_at": None}
    assert await store.save_runs([fine, good]) == []
    assert sorted(r["run_id"] for r in await store.load_runs()) == ["fine", "good"]


async def test_a_snapshot_that_is_no_snapshot_is_an_argument_error(store: Store) -> None:
    """Found: a snapshot without a ``run_id`` (or with a number for one) was a ``KeyError``
    from deep in the store, or stored a row no reader could read back."""
    snap = RunInfo(run_id="r", tenant_id="acme").snapshot()
    for broken in (
        {k: v for k, v in snap.items() if k != "run_id"},
        {**snap, "run_id": 7},
        {**snap, "tenant_id": None},
        {**snap, "status": ["running"]},
    ):
        with pytest.raises(ArgumentError, match=r"run snapshot"):
            await store.save_runs([broken])
    assert await store.load_runs() == []


@pytest.mark.parametrize("bad", ["a\x00b", "a\nb", "a\ud800", "r" * 300, "", "  "], ids=repr)
@pytest.mark.parametrize("key", ["run_id", "root_run_id", "tenant_id", "parent_run_id"])
async def test_a_snapshot_naming_an_id_no_run_can_have_is_refused_by_every_store(
    store: Store, key: str, bad: str
) -> None:
    """Found: a snapshot's ids were stored as given: the memory store took a NUL, a newline,
    a lone surrogate and 300 characters; SQLite took all but the surrogate (a ``StoreError``
    quoting a codec); PostgreSQL refused the NUL and the surrogate (``StoreError``s quoting
    its driver). The id rule (as a lookup reads it: ids stored before a character was
    refused are saved again) is now checked first, the same ``ArgumentError`` on each."""
    snap = {**RunInfo(run_id="r", tenant_id="acme").snapshot(), key: bad}
    with pytest.raises(ArgumentError, match=rf"{key}"):
        await store.save_runs([snap])
    assert await store.load_runs() == []
    # an id stored before the rule refused bidi and zero-width characters is saved again
    legacy = {**RunInfo(run_id="r", tenant_id="acme").snapshot(), key: "r\u202e1"}
    assert await store.save_runs([legacy]) == []


async def test_a_snapshot_of_a_graph_run_without_a_thread_is_saved_by_every_store(
    store: Store,
) -> None:
    """Found (round 10 of the API's probes): a graph run with no checkpointer has no thread,
    its snapshot's ``thread_id`` ``""``; once ``thread_id`` was checked by the id rule, every
    store refused it (``thread_id is blank``) and a durable runtime lost the run. ``""`` is
    "no thread" and saved; a thread id of spaces is still refused."""
    snap = {**RunInfo(run_id="r", tenant_id="acme", kind="graph").snapshot(), "thread_id": ""}
    assert await store.save_runs([snap]) == []
    (loaded,) = await store.load_runs()
    assert loaded["run_id"] == "r" and not loaded.get("thread_id"), loaded
    with pytest.raises(ArgumentError, match="thread_id is blank"):
        await store.save_runs([{**snap, "run_id": "r2", "thread_id": "  "}])


async def test_a_snapshot_of_an_agent_run_with_a_blank_thread_id_is_still_refused(
    store: Store,
) -> None:
    """``""`` as "no thread" is a graph run's (one without a checkpointer): the exemption made
    for it took every run's, and a harness (agent) run's snapshot with ``thread_id`` ``""``,
    refused before it, was saved."""
    snap = {**RunInfo(run_id="r", tenant_id="acme").snapshot(), "thread_id": ""}
    with pytest.raises(ArgumentError, match="thread_id is blank"):
        await store.save_runs([snap])
    assert await store.load_runs() == []


# -- 2. ids that show as another id --------------------------------------------------------

#: Characters that reorder the text around them (bidi controls) or show as nothing
#: (zero-width): ``"r\u202e1-nur"`` shows as ``rrun-1``, ``"run\u200b-1"`` as ``run-1``.
SPOOFING = [
    "\u202a",
    "\u202b",
    "\u202c",
    "\u202d",
    "\u202e",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
    "\u200b",
    "\u200c",
    "\u200d",
    "\u200e",
    "\u200f",
    "\u061c",
    "\u2060",
    "\ufeff",
]


@pytest.mark.parametrize("char", SPOOFING, ids=lambda c: f"U+{ord(c):04X}")
def test_an_id_with_a_bidi_or_zero_width_character_is_refused_everywhere_saying_which(
    char: str,
) -> None:
    """Found: the id rule refused newlines and U+2028/U+2029 but took U+202E (right-to-left
    override) and U+200B (zero-width space): an operator could be shown ``run-1`` for a run
    whose id is another, and steer the wrong one. Refused where an id enters, the message
    naming the character by its code point."""
    bad = f"run{char}-1"
    code = f"U+{ord(char):04X}"
    problem = id_problem(bad)
    assert problem is not None and code in problem, problem
    with pytest.raises(InvalidIdError, match=re.escape(code)):
        RunInfo(run_id=bad)
    with pytest.raises(InvalidIdError, match=re.escape(code)):
        RunInfo(run_id="r", tenant_id=bad)
    with pytest.raises(InvalidIdError, match=re.escape(code)):
        check_id(bad, "thread_id")
    for build in (
        lambda: SteeringTarget.agent_run(bad),
        lambda: SteeringTarget.thread(bad),
        lambda: SteeringActor.human("ana", tenant_id=bad),
        lambda: SteeringCommand(
            target=SteeringTarget.agent_run("r"),
            actor=SteeringActor.test(),
            kind=SteeringKind.RESUME,
            checkpoint_id=bad,
        ),
    ):
        with pytest.raises(InvalidCommandError, match=re.escape(code)):
            build()


def test_text_that_only_looks_alike_is_still_an_id() -> None:
    """Letters of other scripts, right-to-left ones included, emoji and combining marks are
    ids: only characters that show nothing or reorder the text are refused (and, since the
    fifth round, text not in NFC: "e\u0301" is refused for "\u00e9"; a combining mark NFC
    keeps, as on a "q", is an id)."""
    for fine in ("\u05e8\u05d9\u05e6\u05d4-1", "\u0440\u0443\u043d", "run-\U0001f600", "q\u0301"):
        assert id_problem(fine) is None
        assert RunInfo(run_id=fine).run_id == fine


# -- 4. one lookup of the spec that watches a run ------------------------------------------


async def test_the_runtime_and_its_supervisor_find_a_runs_spec_by_one_lookup() -> None:
    """``Runtime`` asked whether to make a supervisor by a copy of the supervisor's own spec
    lookup (``_has_spec``): two copies that could come to differ (a run watched by a spec
    the runtime never made a supervisor for). Now both ask ``RunRegistry.supervisor_spec_for``:
    an agent's own spec, else the nearest graph's above it; none for a graph run."""
    quiet = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 99}])
    gate = Gate()
    async with Runtime() as rt:
        plain = await rt.start(Agent("plain", gate.model()), "go")
        assert rt.runs.supervisor_spec_for(plain) is None
        assert rt._supervisor is None  # no spec anywhere: no supervisor made
        watched = await rt.start(Agent("watched", gate.model(), supervisor=quiet), "go")
        assert rt.runs.supervisor_spec_for(watched) is quiet
        assert rt.supervisor.watched() == [watched.run_id]
        gate.open()
        await plain.result()
        await watched.result()


# -- the runs command and a run stored with an id the rule now refuses -----------------------


def test_the_runs_command_reads_a_stored_spoofing_id_and_refuses_to_steer_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run saved with U+202E in its id before the rule refused it: ``tinyagents runs``
    lists it and shows it (the terminal shown its id escaped, never reordered), and a
    command to it is refused naming the character, exit 2, nothing written."""
    legacy = "run\u202e-1"
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def save() -> None:
        store = SqliteStore(tmp_path / "runs.db")
        await store.open()
        snap = {"run_id": legacy, "root_run_id": legacy, "tenant_id": "default"}
        await store.save_runs([{**snap, "status": "completed"}])
        await store.close()

    asyncio.run(save())
    assert main(["runs", "list", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "\u202e" not in out and "run\\u202e-1" in out, out
    assert main(["runs", "show", legacy, "--store", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == legacy
    assert main(["runs", "pause", legacy, "--store", url]) == 2
    err = capsys.readouterr().err
    assert "U+202E" in err and "\u202e" not in err, err
