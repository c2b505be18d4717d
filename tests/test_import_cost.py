"""What ``import tinyagents`` does not do: build a pydantic model or a dataclass method it
does not need. Each is a share of the import time (``benchmarks/import_time.py`` measures it;
tests assert no times), so these hold the causes rather than the figure."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyagents._record import FrozenRecord, Record, record
from tinyagents.events import EVENT_CLASSES

_PROBE = """
import gc, json, sys
import tinyagents
from pydantic import BaseModel
built = sorted(
    c.__qualname__ for c in gc.get_objects()
    if isinstance(c, type) and issubclass(c, BaseModel)
    and c.__module__.startswith("tinyagents") and c.__pydantic_complete__
)
print(json.dumps({"built": built, "plugins": "pydantic.plugin._loader" in sys.modules}))
"""


def test_importing_the_package_builds_no_pydantic_model() -> None:
    """The first schema build loads a good part of pydantic (and its plugin loader, which
    reads every installed distribution's entry points): models are built on first use."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True
    )
    seen = json.loads(done.stdout)
    assert seen == {"built": [], "plugins": False}


def test_importing_the_package_loads_no_graph_runtime() -> None:
    """The graph runtime (about a tenth of the import) loads with the first graph built:
    ``rt.start_graph`` calls the graph's own ``start`` and the supervisor asks a run's driver
    for the spec its graph gives (``RunDriver.supervisor_spec``)."""
    probe = "import json, sys, tinyagents; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    assert [m for m in loaded if m.startswith("tinyagents.graph")] == []


def test_importing_the_package_loads_no_database_backend() -> None:
    """The SQLite and PostgreSQL stores and the checkpointers (with ``sqlite3``) load with the
    first one a program names: ``import tinyagents`` needs only the store ABC, the memory store
    and the lease helpers of ``tinyagents.store.checkpoint._lease``; the packages'
    ``__getattr__`` (``tinyagents._lazy``) imports the rest."""
    probe = "import json, sys, tinyagents; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    backends = (
        "sqlite3",
        "tinyagents.store.sqlite",
        "tinyagents.store.postgres",
        "tinyagents.store._postgres",
        "tinyagents.store.checkpoint.",
    )
    assert [m for m in loaded if m.startswith(backends)] == ["tinyagents.store.checkpoint._lease"]


def test_importing_the_package_loads_no_supervisor() -> None:
    """The supervisor (its spec's pydantic models, rules and judge: about a twelfth of the
    import) loads with the first ``SupervisorSpec`` a program names: ``tinyagents.Supervisor``
    and ``SupervisorSpec`` are lazy names (``tinyagents._lazy``) and a runtime reads only the
    environment's settings (``tinyagents.supervisor.settings``) until it has a run to watch."""
    probe = "import json, sys, tinyagents; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = [m for m in json.loads(done.stdout) if m.startswith("tinyagents.supervisor")]
    assert loaded == ["tinyagents.supervisor", "tinyagents.supervisor.settings"]


def test_importing_the_package_defines_no_payload_model() -> None:
    """The payload models (``tinyagents.protocol.payloads``) load with the first payload
    validated: ``PAYLOAD_MODELS`` is a lazy name of ``tinyagents.protocol`` and
    ``validate_payload`` reads it through ``tinyagents.protocol._payload_models``."""
    probe = (
        "import json, sys, tinyagents; loaded = 'tinyagents.protocol.payloads' in sys.modules; "
        "from tinyagents import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget; "
        "cmd = SteeringCommand(target=SteeringTarget.agent_run('r1'), "
        "actor=SteeringActor.human('ana', tenant_id='acme'), "
        "kind=SteeringKind.ADD_INSTRUCTION, payload={'text': 'hi'}); "
        "print(json.dumps([loaded, 'tinyagents.protocol.payloads' in sys.modules, cmd.payload]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [False, True, {"text": "hi"}]


_MODELS = '''
import json, sys
from tinyagents import Agent, tool
from tinyagents.testkit import ScriptedModel, reply

def loaded():
    return [m for m in sys.modules if m.startswith("tinyagents.harness.litellm")]

@tool
def search() -> str:
    """Search."""
    return ""

seen = [loaded()]
Agent("a", ScriptedModel([reply("x")]))
seen.append(loaded())
seen.append(type(Agent("b", "openai/gpt-4o-mini").model).__name__)
forced = {"type": "function", "function": {"name": "nope"}}
from tinyagents import LiteLLMModel
try:
    Agent("c", LiteLLMModel("openai/gpt-4o-mini", tool_choice=forced), tools=[search])
except Exception as exc:
    seen.append(type(exc).__name__)
print(json.dumps(seen))
'''


def test_an_agent_given_a_model_object_loads_no_litellm_model() -> None:
    """``LiteLLMModel``'s module (with its stream and error readers) loads with the first
    model string an agent is given (``tinyagents.harness._litellm``), not with the package
    nor with an agent given a ``Model``; a string still makes a ``LiteLLMModel``, whose
    ``tool_choice`` is still checked against the agent's tools."""
    done = subprocess.run(
        [sys.executable, "-c", _MODELS], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == [[], [], "LiteLLMModel", "ConfigurationError"]


_SUPERVISED = """
import asyncio, json, sys
from tinyagents import Agent, Runtime
from tinyagents.testkit import ScriptedModel, reply

def loaded():
    return "tinyagents.supervisor.supervisor" in sys.modules

async def main():
    seen = {}
    async with Runtime() as rt:
        free = Agent("free", ScriptedModel([reply("y")]))
        seen["plain"] = [(await (await rt.start(free, "go")).result()).status.value, loaded()]
        from tinyagents import SupervisorSpec
        spec = SupervisorSpec(rules=[{"when": "iteration_reached", "gte": 1}], on_violation="abort")
        watched = Agent("watched", ScriptedModel([reply("x")]), supervisor=spec)
        seen["spec named"] = loaded()
        result = await (await rt.start(watched, "go")).result()
        seen["watched"] = [result.status.value, loaded(), rt.supervisor.actions]
        free = Agent("free", ScriptedModel([reply("z")]))
        again = await (await rt.start(free, "go")).result()
        seen["plain again"] = [again.status.value, rt.supervisor.watched()]
    print(json.dumps(seen))

asyncio.run(main())
"""


def test_a_runtime_without_a_spec_makes_its_supervisor_with_the_first_run_it_watches() -> None:
    """A plain run loads no supervisor; an agent given a spec is supervised all the same (the
    runtime makes its supervisor when it registers the run), and so are the runs after it."""
    done = subprocess.run(
        [sys.executable, "-c", _SUPERVISED], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == {
        "plain": ["completed", False],
        "spec named": False,
        "watched": ["aborted", True, 1],
        "plain again": ["completed", []],
    }


def test_importing_the_package_loads_no_email_parser() -> None:
    """``email`` (with ``calendar`` and its charsets) reads only a ``Retry-After`` given as an
    HTTP date, on a rate limit: it is imported there (``tests/harness/test_model_errors.py``
    reads such a date), not by ``import tinyagents``."""
    probe = "import json, sys, tinyagents; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert [m for m in json.loads(done.stdout) if m.split(".")[0] == "email"] == []


_COMPILES = """
import json, re, sys
seen = set()
compile = re.compile
def counting(pattern, flags=0):
    module = sys._getframe(1).f_globals.get("__name__", "")
    if module.startswith("tinyagents"):
        seen.add(module)
    return compile(pattern, flags)
re.compile = counting
import tinyagents
print(json.dumps(sorted(seen)))
"""


def test_importing_the_package_compiles_only_the_patterns_of_hot_paths() -> None:
    """A pattern costs about 0.1 ms to compile. The ones used on every command, event or tool
    call are compiled at import; those of a tool's docstring, a judge's fenced answer, an
    ``api_key_env`` name or a fenced JSON answer are text that ``re``'s cache compiles on
    first use."""
    done = subprocess.run(
        [sys.executable, "-c", _COMPILES], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == [
        "tinyagents.events.redact",
        "tinyagents.harness.loop",
        "tinyagents.harness.render",
        "tinyagents.protocol.ids",
    ]


@pytest.mark.parametrize(
    ("place", "name", "home"),
    [
        ("tinyagents.store", "SqliteStore", "tinyagents.store.sqlite"),
        ("tinyagents.store", "PostgresStore", "tinyagents.store.postgres"),
        ("tinyagents.store.checkpoint", "SqliteCheckpointer", "tinyagents.store.checkpoint.sqlite"),
        ("tinyagents.store.checkpoint", "Checkpointer", "tinyagents.store.checkpoint.base"),
        ("tinyagents.protocol", "PAYLOAD_MODELS", "tinyagents.protocol.payloads"),
        ("tinyagents.supervisor", "SupervisorSpec", "tinyagents.supervisor.spec"),
        ("tinyagents.supervisor", "Supervisor", "tinyagents.supervisor.supervisor"),
        ("tinyagents", "SupervisorSpec", "tinyagents.supervisor.spec"),
        ("tinyagents", "Supervisor", "tinyagents.supervisor.supervisor"),
        ("tinyagents", "LiteLLMModel", "tinyagents.harness.litellm_model"),
        ("tinyagents.harness", "LiteLLMModel", "tinyagents.harness.litellm_model"),
    ],
)
def test_a_lazy_name_is_the_object_its_module_defines(place: str, name: str, home: str) -> None:
    package = importlib.import_module(place)
    assert getattr(package, name) is getattr(importlib.import_module(home), name)
    assert name in dir(package) and name in package.__all__
    with pytest.raises(AttributeError, match=f"module '{place}' has no attribute 'Nothing'"):
        package.Nothing  # noqa: B018


def test_open_store_opens_each_backend_it_loads_on_first_use(tmp_path: Any) -> None:
    from tinyagents.store import PostgresStore, SqliteStore, open_store

    assert isinstance(open_store(f"sqlite:///{tmp_path / 'runs.db'}"), SqliteStore)
    assert isinstance(open_store("postgresql://u@127.0.0.1/db"), PostgresStore)


def _package_dataclasses() -> list[type]:
    import tinyagents

    found = []
    for info in pkgutil.walk_packages(tinyagents.__path__, "tinyagents."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and dataclasses.is_dataclass(value)
                and value.__module__ == info.name
            ):
                found.append(value)
    return found


#: Dataclasses that compare by identity on purpose.
_BY_IDENTITY = {"tinyagents.steering.router.MiddlewareCapability"}


def test_every_dataclass_of_the_package_shares_one_eq_and_repr() -> None:
    """Dataclasses get only their ``__init__`` (and a frozen one its guards) generated:
    equality, repr and hash come from ``Record`` / ``FrozenRecord``, in the dataclass shape
    (on CPython 3.11 each generated method is an ``exec``: sixty-odd classes paid it at import)."""
    classes = _package_dataclasses()
    assert len(classes) > 60 and EVENT_CLASSES[0] in classes
    for cls in classes:
        if f"{cls.__module__}.{cls.__qualname__}" in _BY_IDENTITY:
            assert cls.__eq__ is object.__eq__, cls
            continue
        frozen = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert issubclass(cls, FrozenRecord if frozen else Record), cls
        assert cls.__eq__ is Record.__eq__, cls
        if "__repr__" not in vars(cls):  # its own repr, written for it
            assert cls.__repr__ is Record.__repr__, cls
        assert cls.__hash__ is (FrozenRecord.__hash__ if frozen else None), cls


def test_every_dataclass_of_the_package_says_what_it_is() -> None:
    """A dataclass without a docstring gets one made of its signature (on CPython 3.11 an
    ``inspect.signature`` of the class as it is declared, at import), and pydantic leaves
    that out of a JSON Schema: a docstring of its own says more and costs nothing."""
    bare = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _package_dataclasses()
        if not cls.__doc__ or cls.__doc__.startswith(f"{cls.__name__}(")
    ]
    assert bare == []


@dataclasses.dataclass(slots=True, kw_only=True)
class _Generated:
    a: int
    b: Any = None
    hidden: str = dataclasses.field(default="h", repr=False)
    ignored: str = dataclasses.field(default="i", compare=False)


@dataclasses.dataclass(slots=True, kw_only=True, eq=False, repr=False)
class _Shared(Record):
    a: int
    b: Any = None
    hidden: str = dataclasses.field(default="h", repr=False)
    ignored: str = dataclasses.field(default="i", compare=False)


@dataclasses.dataclass(frozen=True, slots=True)
class _GeneratedFrozen:
    a: int
    b: Any = None


@dataclasses.dataclass(frozen=True, slots=True, eq=False, repr=False)
class _SharedFrozen(FrozenRecord):
    a: int
    b: Any = None


_values = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.floats(allow_nan=True))


@given(st.integers(), _values, st.text(max_size=3), st.integers(), _values, st.text(max_size=3))
def test_record_eq_repr_and_hash_agree_with_what_dataclass_generates(
    a1: int, b1: Any, i1: str, a2: int, b2: Any, i2: str
) -> None:
    gen1, gen2 = _Generated(a=a1, b=b1, ignored=i1), _Generated(a=a2, b=b2, ignored=i2)
    own1, own2 = _Shared(a=a1, b=b1, ignored=i1), _Shared(a=a2, b=b2, ignored=i2)
    assert (own1 == own2) is (gen1 == gen2)
    assert (own1 == own1) is (gen1 == gen1)  # NaN: the same object compares equal
    assert repr(own1).replace("_Shared", "_Generated") == repr(gen1)
    assert own1 != gen1 and own1 != (a1, b1)
    assert _Shared.__hash__ is None and _Generated.__hash__ is None

    fg1, fg2 = _GeneratedFrozen(a1, b1), _GeneratedFrozen(a2, b2)
    fo1, fo2 = _SharedFrozen(a1, b1), _SharedFrozen(a2, b2)
    assert (fo1 == fo2) is (fg1 == fg2)
    assert hash(fo1) == hash(fg1)
    assert repr(fo1).replace("_SharedFrozen", "_GeneratedFrozen") == repr(fg1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fo1.a = 0  # type: ignore[misc]


def test_a_record_that_holds_itself_has_a_finite_repr() -> None:
    loop = _Shared(a=1)
    loop.b = loop
    assert repr(loop) == "_Shared(a=1, b=..., ignored='i')"


def test_event_classes_share_one_eq_and_repr() -> None:
    """Event classes get only their ``__init__`` generated; equality and repr keep the
    dataclass shape (same class, same field values in order)."""
    from datetime import UTC, datetime

    from tinyagents.events import EVENT_CLASSES, Event, GraphEvent, RunEvent

    assert all(
        cls.__eq__ is Record.__eq__ and cls.__repr__ is Record.__repr__ for cls in EVENT_CLASSES
    )
    at = datetime(2026, 1, 1, tzinfo=UTC)
    one = RunEvent(type="run.started", run_id="r", at=at)
    assert one == RunEvent(type="run.started", run_id="r", at=at)
    assert one != RunEvent(type="run.started", run_id="s", at=at)
    assert one != GraphEvent(type="graph.started", run_id="r", at=at)
    assert repr(one).startswith("RunEvent(type='run.started', offset=-1, at=datetime.datetime(")
    assert Event.__hash__ is None and RunEvent.__hash__ is None


def test_importing_the_package_generates_no_event_init() -> None:
    """An event class's ``__init__`` (some twenty keyword parameters, one ``exec`` on CPython
    3.11) is generated with its first instance (``tinyagents._record.record``)."""
    probe = (
        "import inspect, json; from tinyagents.events import EVENT_CLASSES, RunEvent; "
        "deferred = lambda: [c.__name__ for c in EVENT_CLASSES "
        "if not inspect.isfunction(c.__init__)]; "
        "before = deferred(); RunEvent(type='run.started', run_id='r'); "
        "print(json.dumps([before, deferred()]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    before, after = json.loads(done.stdout)
    assert before == [cls.__name__ for cls in EVENT_CLASSES]
    assert after == [cls.__name__ for cls in EVENT_CLASSES if cls.__name__ != "RunEvent"]


@record(slots=True, kw_only=True, eq=False, repr=False)
class _Deferred(Record):
    """A record to build."""

    a: int
    items: list[int] = dataclasses.field(default_factory=list)
    seen: int = dataclasses.field(default=0, init=False)

    def __post_init__(self) -> None:
        self.seen += 1


@record(slots=True, kw_only=True, eq=False, repr=False)
class _DeferredChild(_Deferred):
    """A record built on another."""

    b: str = "b"


@record(frozen=True, slots=True, eq=False, repr=False)
class _DeferredFrozen(FrozenRecord):
    """A frozen record to build."""

    a: int
    b: Any = None


@record(slots=True, eq=False, repr=False)
class _OwnInit(Record):
    """A record that writes its own ``__init__``."""

    a: int

    def __init__(self, text: str) -> None:
        self.a = len(text)


def test_a_record_builds_as_its_dataclass_would() -> None:
    """``@record`` leaves ``__init__`` to the first instance; that one and every later one
    are built as ``@dataclass`` builds them: keyword-only or positional fields, defaults and
    factories, ``__post_init__``, a frozen record's guards, a subclass's own ``__init__``."""
    first = _DeferredChild(a=1)
    assert first == _DeferredChild(a=1, items=[], b="b") and first.seen == 1
    assert _DeferredChild(a=1).items is not first.items
    assert repr(_Deferred(a=2, items=[3])) == "_Deferred(a=2, items=[3], seen=1)"
    assert _Deferred(a=2).seen == 1
    with pytest.raises(TypeError, match="positional"):
        _Deferred(1)  # type: ignore[misc]
    with pytest.raises(TypeError, match="'a'"):
        _DeferredChild()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="seen"):
        _Deferred(a=1, seen=2)  # type: ignore[call-arg]
    frozen = _DeferredFrozen(1)
    assert frozen == _DeferredFrozen(1, None) and hash(frozen) == hash(_DeferredFrozen(a=1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        frozen.a = 2  # type: ignore[misc]
    assert _OwnInit("abc").a == 3
    for cls in (_Deferred, _DeferredChild, _DeferredFrozen):
        assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
        assert cls.__init__.__code__.co_varnames[1:3] != ("args", "kwargs")


def test_a_record_class_has_its_signature_before_its_first_instance() -> None:
    """Found: until its first instance ``inspect.signature`` of a record class (and of its
    ``__init__``) read ``(*args, **kwargs)``, the deferred ``__init__``'s own; an editor, a
    doc tool or a function that reads a class's parameters saw none. It reads as the
    ``@dataclass`` of the same declaration's from the class's creation on, the same after."""

    def declare(decorate: Any) -> Any:
        @decorate(slots=True, kw_only=True, eq=False, repr=False)
        class Fresh(Record):
            """A record no one has built yet."""

            a: int
            items: list[int] = dataclasses.field(default_factory=list)
            seen: int = dataclasses.field(default=0, init=False)

        return Fresh

    fresh, plain = declare(record), declare(dataclasses.dataclass)
    expected = inspect.signature(plain)
    assert str(expected) == "(*, a: 'int', items: 'list[int]' = <factory>) -> None"
    assert inspect.signature(fresh) == expected
    assert inspect.signature(fresh.__init__) == inspect.signature(plain.__init__)
    assert fresh(a=1) == fresh(a=1, items=[])
    assert inspect.signature(fresh) == expected
