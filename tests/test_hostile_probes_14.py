"""A hostile or careless user's fourteenth round, against what was built the same day:
``@task(timeout=)`` / ``@entrypoint(timeout=)``, ``end_strategy``, ``capture_run_messages``,
``override(name=)``, run ``metadata=``, ``Checkpointer.saving_together()``, ``events.mask``.

Each test is a probe that found something (named in its docstring) or holds a decision down.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tinyagents.errors import ArgumentError, GraphValidationError
from tinyagents.graph import START, StateGraph, TimeoutPolicy, entrypoint, task

#: A whole number of seconds past any float: no finite timeout.
PAST_FLOATS = 10**400


# -- timeouts given as whole numbers too large for a float -----------------------------------


@pytest.mark.parametrize("decorator", [task, entrypoint])
def test_a_task_or_entrypoint_timeout_past_any_float_is_refused(decorator: Any) -> None:
    """Found: ``@task(timeout=10**400)`` (and ``@entrypoint``'s) was a bare ``OverflowError``
    (``int too large to convert to float``) out of the decorator: it passed ``0 < t < inf``
    and failed as it became a float. It is the ``GraphValidationError`` any other timeout
    no finite number of seconds is."""
    with pytest.raises(GraphValidationError, match="finite number of seconds"):
        decorator(timeout=PAST_FLOATS)


def test_a_node_or_step_timeout_past_any_float_is_refused() -> None:
    """Found with the probe above: ``add_node(timeout=10**400)`` and
    ``TimeoutPolicy(idle_timeout=10**400)`` were the same bare ``OverflowError``, and
    ``step_timeout = 10**400`` let every run fail with it at its first step."""
    graph: StateGraph[Any] = StateGraph(dict)
    with pytest.raises(GraphValidationError, match="finite number of seconds"):
        graph.add_node("n", lambda state: state, timeout=PAST_FLOATS)
    for field in ("run_timeout", "idle_timeout"):
        with pytest.raises(ArgumentError, match=f"TimeoutPolicy.{field} must be finite"):
            TimeoutPolicy(**{field: PAST_FLOATS})
    graph.add_node("n", lambda state: state)
    graph.add_edge(START, "n")
    compiled = graph.compile()
    with pytest.raises(GraphValidationError, match="step_timeout must be None or a finite"):
        compiled.step_timeout = PAST_FLOATS


def test_a_timeout_a_float_holds_is_still_taken() -> None:
    """The bound is what a float holds: a large but finite timeout (1e300 s, a timedelta of
    days) is taken, as before."""
    assert TimeoutPolicy.coerce(1e300) == TimeoutPolicy(run_timeout=1e300)
    assert task(timeout=timedelta(days=3)) is not None
    assert entrypoint(timeout=10**300) is not None
