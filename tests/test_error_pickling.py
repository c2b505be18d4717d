"""Every tinyagents error survives ``pickle`` and ``copy`` whole: its type, message and
attributes. An error crosses a process boundary whenever a run is driven from a
``ProcessPoolExecutor``, a multiprocessing worker or a task queue; one whose ``__init__`` takes
other arguments than its message (``RunLimitExceeded(limit, used, allowed)``) failed to unpickle,
or came back with its message read as its first argument (``run run r-1 was cancelled ...``)."""

from __future__ import annotations

import copy
import importlib
import pickle
import pkgutil
from collections.abc import Iterator
from typing import Any

import pytest

import tinyagents
from tinyagents.errors import RunCancelled, RunLimitExceeded, ThreadBusy, TinyAgentsError
from tinyagents.protocol import ReceiptStatus, SteeringReceipt


def _load_every_module() -> None:
    for module in pkgutil.walk_packages(tinyagents.__path__, "tinyagents."):
        importlib.import_module(module.name)


def _subclasses(cls: type[BaseException]) -> Iterator[type[BaseException]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


#: How to build each error whose constructor takes more than a message, by the class that
#: defines that constructor (its subclasses are built the same way), as its raiser builds it.
FACTORIES: dict[str, Any] = {
    "DamagedData": lambda cls: cls(
        "run snapshot of 'r-1': it is not JSON", record="run snapshot of 'r-1'", tenant_id="acme"
    ),
    "GraphValidationError": lambda cls: cls("unreachable node 'b'", nodes=["b"]),
    "NodeTimeoutError": lambda cls: cls("slow", 0.5, 0.51),
    "NodeCancelledError": lambda cls: cls("flaky"),
    "InvalidIdError": lambda cls: cls("run_id must be a non-blank string", field="run_id"),
    "ModelError": lambda cls: cls(
        "slow down", model="openai/gpt-4o", status=429, retry_after_s=2.5
    ),
    "ReceiptTimeout": lambda cls: cls("c-1", "rt-2", 5.0),
    "RunCancelled": lambda cls: cls("r-1", "no longer needed", by='human "alice"'),
    "RunLimitExceeded": lambda cls: cls("max_tool_calls", 4, 3, run_id="r-1", detail="2 made"),
    "SteeringRejected": lambda cls: cls(
        SteeringReceipt.issue(ReceiptStatus.REJECTED, "c-1", "r-1", "forbidden", "authority")
    ),
    "ThreadBusy": lambda cls: cls("t-1", held_by="r-1"),
    "TaskCancelled": lambda cls: cls("cancelled by steering", {"t-1": "a"}),
    "JudgeError": lambda cls: cls("no verdict", usage=None),
    "SupervisorSpecError": lambda cls: cls("invalid rule", line=3, source="spec.yaml"),
}


def _sample(cls: type[TinyAgentsError]) -> TinyAgentsError:
    defining = next(
        (b for b in cls.__mro__ if issubclass(b, TinyAgentsError) and "__init__" in vars(b)),
        None,
    )
    if defining is None:
        return cls(f"a {cls.__name__}")
    if defining.__name__ not in FACTORIES:
        pytest.fail(f"add how to build {defining.__module__}.{defining.__name__} to FACTORIES")
    return FACTORIES[defining.__name__](cls)  # type: ignore[no-any-return]


def _every_error() -> list[type[TinyAgentsError]]:
    _load_every_module()
    found = {TinyAgentsError, *_subclasses(TinyAgentsError)}
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))  # type: ignore[return-value]


def _state(exc: BaseException) -> tuple[Any, ...]:
    return (type(exc), str(exc), exc.args, _attributes(exc))


def _attributes(exc: BaseException) -> dict[str, Any]:
    out = {}
    for name, value in vars(exc).items():
        out[name] = value.model_dump() if hasattr(value, "model_dump") else value
    return out


@pytest.mark.parametrize("cls", _every_error(), ids=lambda c: c.__qualname__)
def test_an_error_comes_back_from_pickle_and_copy_as_it_was(cls: type[TinyAgentsError]) -> None:
    exc = _sample(cls)
    for again in (
        pickle.loads(pickle.dumps(exc)),
        copy.copy(exc),
        copy.deepcopy(exc),
    ):
        assert _state(again) == _state(exc)


def test_the_samples_carry_what_their_raisers_set() -> None:
    limit = pickle.loads(pickle.dumps(RunLimitExceeded("max_tool_calls", 4, 3, run_id="r-1")))
    assert (limit.limit, limit.used, limit.allowed, limit.run_id) == ("max_tool_calls", 4, 3, "r-1")
    assert str(limit) == "run limit 'max_tool_calls' exceeded in run r-1: used 4, allowed 3"
    cancelled = pickle.loads(pickle.dumps(RunCancelled("r-1", "done", by='human "al"')))
    assert str(cancelled) == 'run r-1 was cancelled by human "al": done'
    assert (cancelled.run_id, cancelled.reason, cancelled.by) == ("r-1", "done", 'human "al"')
    busy = pickle.loads(pickle.dumps(ThreadBusy("t-1")))
    assert busy.thread_id == "t-1" and str(busy).count("t-1") == 1
