"""``SteeringEvent._trusted`` (every field by position, what the steering router builds four
times per command) makes the event ``SteeringEvent(...)`` makes from the same values: every
field set, none left to a default it does not know of."""

from __future__ import annotations

import dataclasses
import inspect
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tinyagents.events import STEERING_EVENT_TYPES, SteeringEvent
from tinyagents.protocol import SteeringActor, SteeringKind, SteeringTarget

ids = st.none() | st.text(min_size=1, max_size=6)
summaries = st.dictionaries(st.text(max_size=4), st.text(max_size=4) | st.integers(), max_size=3)


def test_it_takes_every_field_but_the_offset_in_field_order() -> None:
    taken = list(inspect.signature(SteeringEvent._trusted).parameters)
    names = [f.name for f in dataclasses.fields(SteeringEvent) if f.name != "offset"]
    assert taken == names


@given(
    type_=st.sampled_from(STEERING_EVENT_TYPES),
    at=st.datetimes(timezones=st.just(UTC)),
    run_ids=st.tuples(ids, ids, ids, ids),
    kind=st.sampled_from(list(SteeringKind)),
    correlation_id=st.text(min_size=1, max_size=6),
    rest=st.tuples(ids, ids, ids, ids, ids, ids, ids, ids),
    summary=summaries,
    affected=summaries,
    original=st.none() | summaries,
)
def test_it_makes_what_the_constructor_makes(
    type_: Any,
    at: datetime,
    run_ids: tuple[str | None, ...],
    kind: SteeringKind,
    correlation_id: str,
    rest: tuple[str | None, ...],
    summary: dict[str, Any],
    affected: dict[str, Any],
    original: dict[str, Any] | None,
) -> None:
    target = SteeringTarget.agent_run("r-1")
    actor = SteeringActor.human("ops", tenant_id="acme", scopes=["agent:control"])
    run_id, root_run_id, parent_run_id, tenant_id = run_ids
    task_id, node_id, policy_id, checkpoint_id, reason, boundary, superseded_by, by = rest
    values = {
        "type": type_,
        "at": at,
        "run_id": run_id,
        "root_run_id": root_run_id,
        "parent_run_id": parent_run_id,
        "tenant_id": tenant_id,
        "target": target,
        "actor": actor,
        "kind": kind,
        "correlation_id": correlation_id,
        "task_id": task_id,
        "node_id": node_id,
        "policy_id": policy_id,
        "checkpoint_id": checkpoint_id,
        "payload_summary": summary,
        "reason": reason,
        "boundary": boundary,
        "affected": affected,
        "superseded_by": superseded_by,
        "transformed_by": by,
        "original_payload_summary": original,
    }
    trusted = SteeringEvent._trusted(*values.values())
    built = SteeringEvent(**values)
    assert type(trusted) is SteeringEvent
    assert trusted.offset == built.offset == -1
    assert trusted == built
    for f in dataclasses.fields(SteeringEvent):  # every slot set, to the same object
        assert getattr(trusted, f.name) is getattr(built, f.name), f.name
    assert trusted.to_dict() == built.to_dict()
