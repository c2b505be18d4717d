"""A hostile or careless user's eighth round: an agent's name, a store's lookups called
directly, a SQLite URL's fragment, an interrupt id's last newline, ``tinyagents inspect``'s
run id, the steering policies' settings, a steering template's fields, a rejection's reason.
(The operator API's probes of this round are in ``tests/server/test_hostile_api_8.py``.)

Each test is a probe that found something (named in its docstring) or holds a decision down.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypedDict

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents import Agent, Runtime
from tinyagents.errors import ArgumentError, ConfigurationError, SteeringRejected
from tinyagents.graph import END, START, Command, StateGraph, interrupt
from tinyagents.store import MemoryStore, PostgresStore, SqliteStore, Store
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import ScriptedModel

# -- an agent's name --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["plan\x00ner", "plan\nner", "planner\n", "plan\u202ener", "plan\u2066ner", "a\u2028b"],
    ids=repr,
)
def test_an_agent_name_holding_a_control_or_bidi_character_is_refused(name: str) -> None:
    """Found: ``Agent("plan\\x00ner", ...)``, one with a newline or a right-to-left override
    was taken. Its name is shown as it is (the console, ``tinyagents runs`` and ``inspect``,
    logs, the API's ``agent_id``) and names the steering its runs send: a newline splits a
    log line in two, and an override shows the name reversed (CVE-2021-42574, "Trojan
    Source"); the steering header alone made it safe. A name is refused when the agent is
    made, as a tool name is, rather than rendered safe in each place that shows it; unlike
    an id, letters of any script, emoji and the zero-width joiner a Persian word or an emoji
    sequence needs stay names."""
    with pytest.raises(ConfigurationError, match="an agent's name is printable text"):
        Agent(name, ScriptedModel(["done"]))


@pytest.mark.parametrize(
    "name",
    ["planner", "план", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "👩\u200d💻 coder"],
    ids=repr,
)
def test_an_agent_name_of_any_script_is_still_taken(name: str) -> None:
    assert Agent(name, ScriptedModel(["done"])).name == name


# -- a store's lookups, called directly ---------------------------------------------------


def _stores(tmp_path: Path) -> list[Store]:
    return [
        MemoryStore(),
        SqliteStore(tmp_path / "store.db"),
        PostgresStore(postgres_dsn(), schema=pg_schema(tmp_path)),
    ]


def _lookups(store: Store, value: Any) -> dict[str, Any]:
    """Each public lookup of ``store`` given ``value`` where it takes text."""
    return {
        "get_command": store.get_command(value),
        "get_command(scope)": store.get_command("c-1", scope=value),
        "open_commands": store.open_commands(thread_id=value),
        "load_events(run_id)": store.load_events(run_id=value),
        "load_events(root_run_id)": store.load_events(root_run_id=value),
        "load_events(type_prefix)": store.load_events(type_prefix=value),
        "load_runs": store.load_runs(tenant_id=value),
        "list_runs(tenant_id)": store.list_runs(tenant_id=value),
        "list_runs(root_run_id)": store.list_runs(root_run_id=value),
        "list_runs(statuses)": store.list_runs(statuses=[value]),
        "run_commands": store.run_commands(value),
        "run_commands(states)": store.run_commands("r-1", states=(value,)),
        "load_run": store.load_run(value),
        "read_events(tenant_id)": store.read_events(tenant_id=value),
        "read_events(run_id)": store.read_events(run_id=value),
        "last_events(run_id)": store.last_events(run_id=value),
        "last_events(type_prefix)": store.last_events(type_prefix=value),
        "inbox_receipt": store.inbox_receipt(value),
        "inbox_take": store.inbox_take(value),
    }


async def _answers(store: Store, value: Any) -> dict[str, str]:
    said: dict[str, str] = {}
    for what, call in _lookups(store, value).items():
        try:
            said[what] = repr(await call)
        except Exception as exc:
            said[what] = type(exc).__name__
    return said


@pytest.mark.parametrize("value", ["r-\x00", "r-\ud800", "st\x00"], ids=repr)
async def test_a_store_lookup_of_text_no_row_can_hold_finds_nothing_on_every_backend(
    tmp_path: Path, value: str
) -> None:
    """Found: a ``Store`` lookup called directly (``store.load_run("r\\x00")``,
    ``load_events(type_prefix="\\x00")``, ``inbox_receipt("\\ud800")``...) found nothing in
    memory, was a ``StoreError`` on PostgreSQL for a NUL ("invalid byte sequence") and on
    SQLite and PostgreSQL for a lone surrogate: read as the store being out of reach. Now
    text no row can hold finds nothing (``None``, ``[]``), on every backend alike."""
    answers = []
    try:
        for store in _stores(tmp_path):
            await store.open()
            try:
                answers.append(await _answers(store, value))
            finally:
                await store.close()
    finally:
        await drop_pg_schemas()
    memory, sqlite, postgres = answers
    assert set(memory.values()) <= {"None", "[]"}, memory
    assert memory == sqlite == postgres


@pytest.mark.parametrize("value", [5, b"r-1", ["r-1"], 1.5], ids=repr)
async def test_a_store_lookup_given_no_text_is_an_argument_error_on_every_backend(
    tmp_path: Path, value: Any
) -> None:
    """Found: ``store.load_events(type_prefix=5)`` was a bare ``TypeError`` on SQLite, ``[]``
    in memory, a ``StoreError`` on PostgreSQL; ``load_run(["r"])`` a ``TypeError``
    ("unhashable") in memory; ``load_run(5)`` found nothing but on PostgreSQL. A lookup
    given what is no text (where it takes text) is now an ``ArgumentError`` naming the
    argument, on every backend."""
    try:
        for store in _stores(tmp_path):
            await store.open()
            try:
                said = await _answers(store, value)
            finally:
                await store.close()
            assert set(said.values()) == {"ArgumentError"}, (type(store).__name__, said)
    finally:
        await drop_pg_schemas()


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda s: s.read_events(after_id="5"), "after_id is a whole number"),
        (lambda s: s.read_events(limit=None), "limit is a whole number"),
        (lambda s: s.last_events(before_id="5"), "before_id is a whole number"),
        (lambda s: s.last_events(limit="5"), "limit is a whole number"),
        (lambda s: s.list_runs(limit="5"), "limit is a whole number"),
        (lambda s: s.inbox_take("o", limit=None), "limit is a whole number"),
        (lambda s: s.list_runs(statuses=5), "statuses is a list of text"),
        (lambda s: s.list_runs(statuses="running"), "statuses is a list of text"),
        (lambda s: s.run_commands("r-1", states=5), "states is a list of text"),
        (lambda s: s.list_runs(before=5), "before is a run key"),
        (lambda s: s.list_runs(before="x"), "before is a run key"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
async def test_a_store_lookup_given_a_bound_of_the_wrong_type_is_an_argument_error(
    tmp_path: Path, call: Any, says: str
) -> None:
    """Found: ``store.read_events(after_id="5")``, ``list_runs(limit="5")``,
    ``list_runs(before=5)``, ``list_runs(statuses=5)`` were bare ``TypeError``s or
    ``IndexError``s, differing by backend (``last_events(limit="5")`` was ``[]`` in memory,
    ``inbox_take("o", limit=None)`` a ``TypeError`` on PostgreSQL alone). Now an
    ``ArgumentError`` saying what it takes, on every backend."""
    try:
        for store in _stores(tmp_path):
            await store.open()
            try:
                with pytest.raises(ArgumentError, match=says):
                    await call(store)
            finally:
                await store.close()
    finally:
        await drop_pg_schemas()


# -- a SQLite URL's fragment ------------------------------------------------------------------


async def test_a_sqlite_url_with_a_fragment_is_refused_not_made_a_file(tmp_path: Path) -> None:
    """Found: ``Runtime(store="sqlite:///runs.db#main")`` made a file named ``runs.db#main``
    (a ``?query`` was refused already): in a URL, ``#`` starts a fragment, which every URL
    reader (``urllib``, a proxy's log) drops, and the file then differs from the one the
    URL is read to name. Refused, naming the file it reads as; a file whose name holds a
    ``#`` is given as a path (``SqliteStore(path)``)."""
    url = f"sqlite:///{tmp_path / 'runs.db'}#main"
    with pytest.raises(ConfigurationError, match="takes no fragment"):
        async with Runtime(store=url):
            pass
    assert list(tmp_path.iterdir()) == []
    store = SqliteStore(tmp_path / "runs#1.db")
    await store.open()
    await store.close()
    with sqlite3.connect(tmp_path / "runs#1.db") as db:
        assert db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0


# -- an interrupt id's last newline -----------------------------------------------------------


class Asked(TypedDict):
    answer: Any


def _ask(state: Asked) -> dict[str, Any]:
    return {"answer": interrupt("ok?")}


async def test_an_interrupt_id_with_a_trailing_newline_is_no_interrupt_id() -> None:
    """Found: ``Command(resume={id + "\\n": "yes"})`` was read as answering interrupts by id
    (the id pattern ended in ``$``, which matches before a last newline), and refused as
    "no pending interrupt with id i-...". A dict whose keys are not all interrupt ids is a
    plain value: it answers the one pending interrupt, as ``{"approved": True}`` does."""
    graph = StateGraph(Asked).add_node("ask", _ask).add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    first = await compiled.run({"answer": None}, thread_id="t")
    odd = {first.interrupts[0].id + "\n": "yes"}
    done = await compiled.run(Command(resume=odd), thread_id="t")
    assert done.state["answer"] == odd


# -- the CLI's inspect ------------------------------------------------------------------------


async def _store_file(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    async with Runtime(store=f"sqlite:///{path}") as rt:
        await (await rt.start(Agent("a", ScriptedModel(["done"])), "task")).result()
    return path


@pytest.mark.parametrize("run_id", ["", "  "], ids=repr)
def test_inspect_of_a_blank_run_id_is_refused_as_runs_show_refuses_it(
    tmp_path: Path, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: ``tinyagents inspect runs.db ""`` (an unset variable) said "run  is not in
    runs.db", naming no run, where ``tinyagents runs show ""`` says the id is blank. Now
    the same usage error (exit 2)."""
    from tinyagents.cli import main

    path = asyncio.run(_store_file(tmp_path))
    with pytest.raises(SystemExit) as exited:
        main(["inspect", str(path), run_id])
    assert exited.value.code == 2
    assert "must not be blank: give a run id" in capsys.readouterr().err


def test_inspect_of_a_long_run_id_quotes_it_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: ``tinyagents inspect runs.db <a 100,000-character id>`` printed the id whole in
    its "not in" line; every other message quotes an id cut (``shown_id``)."""
    from tinyagents.cli import main

    path = asyncio.run(_store_file(tmp_path))
    assert main(["inspect", str(path), "r" * 100_000]) != 0
    said = capsys.readouterr()
    assert "(100,000 characters)" in said.err + said.out
    assert len(said.err + said.out) < 2_000


@pytest.mark.parametrize("value", [5, None, "r-\x00", "r-\ud800"], ids=repr)
async def test_a_release_or_a_nonce_claim_given_odd_text_agrees_on_every_backend(
    tmp_path: Path, value: Any
) -> None:
    """Found: ``store.release_run("r\\x00", owner, None)`` was ``False`` (nothing released)
    in memory and on SQLite and a ``StoreError`` on PostgreSQL; ``claim_nonce(5, ...)``
    claimed in memory and on SQLite and was a ``StoreError`` on PostgreSQL, and
    ``claim_nonce("n", expires_at=None)`` ``False`` in memory, an ``AttributeError`` on SQLite
    and a ``TypeError`` on PostgreSQL. Now a run id or owner that is no text (or a nonce,
    or an expiry that is no datetime) is an ``ArgumentError``; a release of text no row can
    hold releases nothing; a nonce no row can hold is refused, never claimed."""
    expires = datetime.now(UTC) + timedelta(minutes=1)
    try:
        for store in _stores(tmp_path):
            await store.open()
            try:
                if isinstance(value, str):
                    assert await store.release_run(value, "owner", None) is False
                    assert await store.release_run("r-1", value, None) is False
                else:
                    with pytest.raises(ArgumentError, match="run_id is text"):
                        await store.release_run(value, "owner", None)
                    with pytest.raises(ArgumentError, match="owner is text"):
                        await store.release_run("r-1", value, None)
                with pytest.raises(ArgumentError, match="nonce is"):
                    await store.claim_nonce(value, expires_at=expires)
                with pytest.raises(ArgumentError, match="expires_at is a datetime"):
                    await store.claim_nonce("n-1", expires_at=value)
                assert await store.claim_nonce("n-1", expires_at=expires) is True
                assert await store.claim_nonce("n-1", expires_at=expires) is False
            finally:
                await store.close()
    finally:
        await drop_pg_schemas()


# -- the steering policies' settings ----------------------------------------------------------


@pytest.mark.parametrize("bound", [None, "16384", 1.5, True, 0, -1], ids=repr)
def test_a_payload_bound_that_is_no_whole_number_of_bytes_is_refused_when_made(
    bound: Any,
) -> None:
    """Found: ``PayloadPolicy(max_text_bytes=None)`` (or ``"16384"``) was taken, and every
    command sent after was rejected "policy 'payload' failed (TypeError: ...)": no run could
    be steered. ``1.5``, ``0`` and ``-1`` rejected every command as too large ("> 0
    bytes"), the smallest payload, ``{}``, being 2 bytes. Now a ``ConfigurationError``
    when the policy is made."""
    from tinyagents.steering import PayloadPolicy

    with pytest.raises(ConfigurationError, match="max_text_bytes must be a whole number >= 2"):
        PayloadPolicy(max_text_bytes=bound)


@pytest.mark.parametrize("clamp", ["no", 0, 1, None], ids=repr)
def test_a_budget_clamp_that_is_no_bool_is_refused(clamp: Any) -> None:
    """Found: ``BudgetPolicy(clamp="no")`` clamped (non-empty text is true) and
    ``clamp=0`` did not, each without a word. Now ``clamp`` is ``True`` or ``False``, as
    ``observe_only`` and ``subgraphs=`` are."""
    from tinyagents.steering import BudgetPolicy

    with pytest.raises(ConfigurationError, match="clamp= is True or False"):
        BudgetPolicy(clamp=clamp)
    assert BudgetPolicy(clamp=True).clamp is True


async def test_a_payload_bound_of_a_whole_number_still_bounds() -> None:
    from tinyagents import PolicyPipeline
    from tinyagents.steering import PayloadPolicy

    async with Runtime(policies=PolicyPipeline([PayloadPolicy(max_text_bytes=64)])) as rt:
        handle = await rt.start(Agent("a", ScriptedModel(["done"])), "task")
        assert (await handle.steer("look")).status.value == "accepted"
        with pytest.raises(SteeringRejected, match="payload too large"):
            await handle.steer("x" * 100)
        await handle.result()


# -- a steering renderer's template -----------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("{text.__class__}", "{text.__class__}"),
        ("{actor.__class__.__init__}", "{actor.__class__.__init__}"),
        ("{text:>99999999999}", "{text:>99999999999}"),
        ("{text:>300000000}", "{text:>300000000}"),
        ("{text!r}", "{text!r}"),
    ],
)
def test_a_template_field_is_a_plain_name(template: str, says: str) -> None:
    """Found: ``SteeringRenderer(template="{text.__class__}")`` was taken, and every steered
    model was shown ``<class 'str'>`` (``str.format`` reads a field's attributes and items:
    a template reaches what the values hold, as LangChain's f-string templates were found
    to, which now refuse a ``.`` or ``[`` in a field); ``"{text:>99999999999}"`` was a bare
    ``MemoryError`` when made, and ``"{text:>300000000}"`` sent 300 MB a steering. A field
    is now one of the names, as it is (no attribute, item, conversion or format spec)."""
    from tinyagents import SteeringRenderer

    with pytest.raises(ConfigurationError, match=re.escape(says)):
        SteeringRenderer(template=template)


def test_a_template_of_plain_fields_and_literal_braces_is_still_taken() -> None:
    from tinyagents import SteeringRenderer

    renderer = SteeringRenderer(template="{{note}} {kind} from {actor}: {text} [{correlation_id}]")
    assert renderer.template.startswith("{{note}}")


# -- a rejection's reason ---------------------------------------------------------------------


def _step(n: int) -> str:
    """One step."""
    return f"step {n}"


async def test_a_constrain_tools_naming_many_unknown_tools_is_refused_in_a_short_reason() -> None:
    """Found: ``constrain_tools`` naming 20,000 tools the run lacks was rejected with a
    189,000-character reason listing each (the allowlist comes before the payload bound in
    the pipeline, so a payload of any size was quoted whole), kept in the receipt, the
    ``steering.rejected`` event and the steering log. The reason now names the first few
    and counts the rest, each name cut as an id is."""
    async with Runtime() as rt:
        handle = await rt.start(Agent("a", ScriptedModel(["done"]), tools=[_step]), "task")
        with pytest.raises(SteeringRejected) as refused:
            await handle.constrain_tools([f"t{i}" for i in range(20_000)])
        reason = str(refused.value)
        assert len(reason) < 1_000, len(reason)
        assert "would widen the tools" in reason and "and 19,990 more" in reason
        with pytest.raises(SteeringRejected) as refused:
            await handle.constrain_tools(["x" * 5_000])
        assert len(str(refused.value)) < 1_000
        with pytest.raises(SteeringRejected, match=r"with \['nope'\]; allowed now: \['_step'\]"):
            await handle.constrain_tools(["nope"])
        await handle.result()
