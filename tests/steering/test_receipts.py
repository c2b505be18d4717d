"""``SteeringReceipt`` is a frozen record: the router's ``issue`` (positional, unchecked) makes
what the keyword constructor makes, and pydantic reads and writes it as it did the model."""

from __future__ import annotations

import dataclasses
import json
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from tinyagents.errors import ArgumentError
from tinyagents.protocol import ReceiptStatus, SteeringReceipt

texts = st.text(max_size=8)
maybe = st.none() | texts


@given(st.sampled_from(list(ReceiptStatus)), texts, maybe, maybe, maybe)
def test_issue_makes_what_the_constructor_makes(
    status: ReceiptStatus, cid: str, run_id: str | None, reason: str | None, pid: str | None
) -> None:
    issued = SteeringReceipt.issue(status, cid, run_id, reason, pid)
    built = SteeringReceipt(
        status=status.value, correlation_id=cid, run_id=run_id, reason=reason, policy_id=pid
    )
    assert issued == built and hash(issued) == hash(built)
    for f in dataclasses.fields(SteeringReceipt):  # every slot set
        assert getattr(issued, f.name) == getattr(built, f.name)
    assert issued.status is status
    assert SteeringReceipt.model_validate_json(issued.model_dump_json()) == issued
    assert pickle.loads(pickle.dumps(issued)) == issued
    assert issued.accepted is (status is ReceiptStatus.ACCEPTED)


def test_its_json_and_dicts_are_the_models() -> None:
    receipt = SteeringReceipt.issue(ReceiptStatus.REJECTED, "c-1", "r-1", "forbidden", "authority")
    assert json.loads(receipt.model_dump_json()) == {
        "status": "rejected",
        "correlation_id": "c-1",
        "run_id": "r-1",
        "reason": "forbidden",
        "policy_id": "authority",
    }
    assert receipt.model_dump_json().startswith('{"status":"rejected","correlation_id":"c-1"')
    assert receipt.model_dump(mode="json")["status"] == "rejected"
    assert receipt.model_dump()["status"] is ReceiptStatus.REJECTED
    assert receipt.model_dump(exclude={"reason", "correlation_id"}) == {
        "status": ReceiptStatus.REJECTED,
        "run_id": "r-1",
        "policy_id": "authority",
    }
    assert SteeringReceipt.model_validate(receipt.model_dump(mode="json")) == receipt

    class Answer(BaseModel):  # a field of a model, as the server's error body has one
        receipt: SteeringReceipt | None = None

    assert Answer.model_validate_json(Answer(receipt=receipt).model_dump_json()).receipt == receipt


def test_it_is_frozen_and_refuses_what_is_no_receipt() -> None:
    receipt = SteeringReceipt(status="accepted", correlation_id="c-1")
    assert receipt.status is ReceiptStatus.ACCEPTED
    with pytest.raises(dataclasses.FrozenInstanceError):
        receipt.status = ReceiptStatus.REJECTED  # type: ignore[misc]
    with pytest.raises(ArgumentError, match="status is one of"):
        SteeringReceipt(status="maybe", correlation_id="c-1")  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="correlation_id is text"):
        SteeringReceipt(status="accepted", correlation_id=7)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="reason is text or None"):
        SteeringReceipt(status="accepted", correlation_id="c", reason=b"x")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):  # an unknown key, as the model refused it
        SteeringReceipt.model_validate_json('{"status":"accepted","correlation_id":"c","x":1}')
    with pytest.raises(ValidationError):
        SteeringReceipt.model_validate({"status": "maybe", "correlation_id": "c"})
