"""What ``import tinyagents`` does not do: build a pydantic model or a dataclass method it
does not need. Each is a share of the import time (``benchmarks/import_time.py`` measures it;
tests assert no times), so these hold the causes rather than the figure."""

from __future__ import annotations

import json
import subprocess
import sys

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


def test_event_classes_share_one_eq_and_repr() -> None:
    """Event classes get only their ``__init__`` generated; equality and repr keep the
    dataclass shape (same class, same field values in order)."""
    from datetime import UTC, datetime

    from tinyagents.events import EVENT_CLASSES, Event, GraphEvent, RunEvent

    assert all(
        cls.__eq__ is Event.__eq__ and cls.__repr__ is Event.__repr__ for cls in EVENT_CLASSES
    )
    at = datetime(2026, 1, 1, tzinfo=UTC)
    one = RunEvent(type="run.started", run_id="r", at=at)
    assert one == RunEvent(type="run.started", run_id="r", at=at)
    assert one != RunEvent(type="run.started", run_id="s", at=at)
    assert one != GraphEvent(type="graph.started", run_id="r", at=at)
    assert repr(one).startswith("RunEvent(type='run.started', offset=-1, at=datetime.datetime(")
    assert Event.__hash__ is None and RunEvent.__hash__ is None
