"""A hostile user's fifth round: the correlation id against the id rule, an empty supervisor
spec, numbers and nesting a command's payload cannot hold, and YAML alias bombs.

Each test is a probe that found something (named in its comment) or holds a decision down.
The operator API's probes of this round are in ``tests/server/test_hostile_api_5.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tinyagents import Agent, Runtime, SupervisorSpec
from tinyagents.cli import main
from tinyagents.errors import InvalidCommandError, InvalidIdError
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.protocol.ids import MAX_ID_LENGTH, id_problem
from tinyagents.runs import RunInfo
from tinyagents.runs.info import check_id
from tinyagents.supervisor import SupervisorSpecError
from tinyagents.supervisor.validate import validate_file
from tinyagents.testkit import ScriptedModel


def _command(**fields: object) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run("r"),
        actor=SteeringActor.test(),
        kind=SteeringKind.RESUME,
        **fields,
    )


# -- 1. the correlation id keeps the id rule ----------------------------------------------

#: Ids the id rule refuses, each with the words its refusal says.
REFUSED_IDS = [
    ("c\u202e1", "U+202E"),
    ("c\u200b1", "U+200B"),
    ("c\u200d1", "U+200D"),
    ("c\ufeff1", "U+FEFF"),
    ("c\x1b[31m1", "control character"),
    ("c\u20281", "separator"),
    ("c\u00ad1", "U+00AD"),
    ("c\u206a1", "U+206A"),
    ("c\u31641", "U+3164"),
]


@pytest.mark.parametrize(("bad", "says"), REFUSED_IDS, ids=lambda v: repr(v))
def test_a_correlation_id_is_refused_for_what_an_id_is_refused_saying_the_same(
    bad: str, says: str
) -> None:
    """Found: the correlation id had a rule of its own (``str.isprintable`` and 200
    characters) beside the id rule: each refused what the other took (the id rule a
    no-break space and a private-use character; the correlation id a soft hyphen or a
    Hangul filler, which show as nothing, the id rule took), and said it in other words.
    A correlation id is echoed in receipts, events, logs and the console as an id is: it
    now keeps the id rule (``id_problem``), and says so in its words."""
    assert id_problem(bad) is not None and says in id_problem(bad)  # type: ignore[operator]
    with pytest.raises(InvalidCommandError, match=rf"correlation_id: .*{re.escape(says)}"):
        _command(correlation_id=bad)
    with pytest.raises(InvalidCommandError, match=rf"correlation_id: .*{re.escape(says)}"):
        SteeringCommand.model_validate(
            {
                "target": {"type": "agent_run", "run_id": "r"},
                "actor": {"type": "test"},
                "kind": "resume",
                "correlation_id": bad,
            }
        )


def test_a_correlation_id_takes_what_an_id_takes_up_to_its_own_bound() -> None:
    """The other half of the one rule: text an id may be (a space, a no-break space, other
    scripts, emoji) is a correlation id too; its bound stays 200 characters (it is stored
    beside its sender's scope in one index row), said as the id rule says a bound."""
    for fine in ("retry 1", "c\u00a01", "\u05e8\u05d9\u05e6\u05d4", "c-\U0001f600", "c\ue000"):
        assert id_problem(fine) is None
        assert _command(correlation_id=fine).correlation_id == fine
    assert _command(correlation_id="c" * 200).correlation_id == "c" * 200
    with pytest.raises(InvalidCommandError, match=r"correlation_id: 201 characters; at most 200"):
        _command(correlation_id="c" * 201)
    assert MAX_ID_LENGTH >= 200


# -- 2. an empty spec ----------------------------------------------------------------------

EMPTY_SPECS = ["", "   \n", "# only a comment\n", "null\n", "~\n", "---\n", "supervisor:\n"]


@pytest.mark.parametrize("text", EMPTY_SPECS, ids=repr)
def test_an_empty_or_null_spec_file_is_an_error_naming_the_file(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: an empty spec file (or one holding only ``null``, a comment, ``---``, or an
    empty ``supervisor:``) loaded as a spec of defaults: a file truncated by a failed copy
    or saved before it was written supervised nothing, and said nothing. Now it is a
    ``SupervisorSpecError`` naming the file, as other malformed YAML is; ``{}`` still
    asks for the defaults, in so many words."""
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SupervisorSpecError, match="empty") as caught:
        SupervisorSpec.from_yaml(path)
    assert caught.value.source == str(path)
    assert str(path) in str(caught.value)
    with pytest.raises(SupervisorSpecError, match="empty"):
        SupervisorSpec.from_yaml(text)
    (finding,) = validate_file(path)
    assert finding.severity == "error" and "empty" in finding.message
    assert main(["validate", str(path)]) == 1
    assert "empty" in capsys.readouterr().out
    assert SupervisorSpec.from_yaml("{}\n") == SupervisorSpec()


# -- 3. numbers a spec cannot print, YAML that expands ---------------------------------------

HUGE = 16**5000  # 6,021 decimal digits: Python prints no int past 4,300


@pytest.mark.parametrize(
    "build",
    [
        lambda: SupervisorSpec(every_n_iterations=HUGE),
        lambda: SupervisorSpec.model_validate(
            {"rules": [{"when": "tool_repeated", "count": HUGE}]}
        ),
        lambda: SupervisorSpec.from_yaml("every_n_iterations: 0x" + "f" * 5000 + "\n"),
        lambda: SupervisorSpec.from_yaml(
            "rules: [{when: iteration_reached, gte: 0o" + "7" * 7000 + "}]\n"
        ),
    ],
    ids=["keyword", "model_validate", "yaml-hex", "yaml-octal"],
)
def test_an_integer_too_long_to_print_is_a_spec_error(build: object) -> None:
    """Found: a spec given an integer of more than 4,300 digits (in Python, or in YAML as hex
    or octal, which Python reads without that limit) raised pydantic's raw
    ``ValidationError``, "Exceeds the limit (4300 digits) for integer string conversion":
    quoting the value refused in the message failed. Now the ``SupervisorSpecError`` every
    other refused value is, naming the field and the value's size."""
    with pytest.raises(
        SupervisorSpecError, match=r"(every_n_iterations|count|gte).*digits"
    ) as caught:
        build()  # type: ignore[operator]
    assert len(str(caught.value)) < 500, str(caught.value)[:600]


def test_a_yaml_value_its_tag_cannot_read_is_quoted_cut() -> None:
    """Found: a scalar PyYAML's constructor refused (``!!int`` of 900,000 digits) was quoted
    whole in the error: a message of 900 KB on one terminal line. Cut as every quoted value
    of a spec error is."""
    with pytest.raises(SupervisorSpecError, match=r"!!int cannot read") as caught:
        SupervisorSpec.from_yaml("every_n_iterations: " + "9" * 900_000 + "\n")
    assert len(str(caught.value)) < 500, len(str(caught.value))
    assert "(900,002 characters)" in str(caught.value)  # its repr, quotes included


BOMBS = {
    "laughs": "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
    ),
    "merges": "b0: &b0 {x: 1, y: 2}\n"
    + "".join(f"b{i + 1}: &b{i + 1}\n  <<: [{', '.join([f'*b{i}'] * 9)}]\n" for i in range(12)),
    "itself": "rules: &r\n  - *r\n",
    "in-rules": "rules: &r [{when: tool_repeated}]\n"
    + "".join(
        f"r{i}: &r{i} [{', '.join(['*r' if i == 0 else f'*r{i - 1}'] * 9)}]\n" for i in range(8)
    ),
}


@pytest.mark.parametrize("name", BOMBS)
def test_a_yaml_alias_bomb_is_refused_before_it_is_built(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Held (a guard): the "billion laughs" (nine aliases of nine aliases... of nine values,
    9^9 values once expanded), the same with merge keys, and an anchor that holds itself are
    measured on the composed nodes and refused as a ``SupervisorSpecError`` naming the file,
    by ``from_yaml`` and ``tinyagents validate`` alike; nothing is expanded."""
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMBS[name])
    with pytest.raises(SupervisorSpecError, match=r"expands to more than|refers to itself") as c:
        SupervisorSpec.from_yaml(path)
    assert c.value.source == str(path)
    assert main(["validate", str(path)]) == 1
    assert re.search(r"expands to more than|refers to itself", capsys.readouterr().out)


# -- 4. ids that differ only in their Unicode normalization --------------------------------

NFC, NFD = "r-caf\u00e9", "r-cafe\u0301"  # both show as "r-café"


async def test_two_runs_whose_ids_differ_only_in_normalization_cannot_both_be_started() -> None:
    """Found: ``r-caf\\u00e9`` and ``r-cafe\\u0301`` (an ``e`` and a combining acute) both
    started, as two runs: the console, the CLI and every receipt showed two runs called
    ``r-café``, and an operator steered whichever the link they clicked held. Unicode holds
    the two canonically equivalent (one text), UAX #31 compares identifiers normalized: an
    id not in NFC is refused where an id enters (``id_problem``), saying to normalize it,
    for a run, a thread, a tenant and a correlation id alike. A lookup of what is stored
    (``stored=True``) still takes it, so a run saved before reads."""
    problem = id_problem(NFD)
    assert problem is not None and "NFC" in problem, problem
    assert id_problem(NFC) is None and id_problem(NFD, stored=True) is None
    with pytest.raises(InvalidIdError, match="NFC"):
        RunInfo(run_id=NFD)
    with pytest.raises(InvalidIdError, match="NFC"):
        RunInfo(run_id="r", tenant_id="acm\u00e9".replace("\u00e9", "e\u0301"))
    with pytest.raises(InvalidIdError, match="NFC"):
        check_id(NFD, "thread_id")
    with pytest.raises(InvalidCommandError, match=r"correlation_id: .*NFC"):
        _command(correlation_id=NFD)
    async with Runtime() as rt:
        first = await rt.start(Agent("a", ScriptedModel(["ok"])), "x", run_id=NFC)
        with pytest.raises(InvalidIdError, match="NFC"):
            await rt.start(Agent("b", ScriptedModel(["ok"])), "x", run_id=NFD)
        await first.result()
        assert [info.run_id for info in rt.runs.list()] == [NFC]
