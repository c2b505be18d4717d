"""``tinyagents validate FILE.yaml`` and ``validate_file`` over good and bad specs in
tests/data/supervisor."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tinyagents.cli import main
from tinyagents.supervisor import SupervisorSpec, SupervisorSpecError
from tinyagents.supervisor import spec as spec_module
from tinyagents.supervisor.validate import validate_command, validate_file

DATA = Path(__file__).resolve().parent.parent / "data" / "supervisor"


@pytest.mark.parametrize("name", ["good_full.yaml", "good_rules_only.yaml"])
def test_good_specs_have_no_findings_and_load(name: str) -> None:
    assert validate_file(DATA / name) == []
    SupervisorSpec.from_yaml(DATA / name)


def test_the_full_spec_reads_its_criteria_from_its_steering_directory() -> None:
    spec = SupervisorSpec.from_yaml(DATA / "good_full.yaml")
    assert spec.criteria_text().startswith("Answer billing questions only.")


@pytest.mark.parametrize(
    ("name", "line", "words"),
    [
        ("warn_missing_criteria.yaml", 3, "does not exist"),
        ("warn_bare_model.yaml", 1, "not in the models registry"),
    ],
)
def test_warnings(name: str, line: int, words: str) -> None:
    [finding] = validate_file(DATA / name)
    assert (finding.severity, finding.line) == ("warning", line)
    assert words in finding.message


@pytest.mark.parametrize(
    ("name", "line", "words"),
    [
        ("bad_unknown_key.yaml", 4, "unknown key 'on_violaton'"),
        ("bad_rule_kind.yaml", 3, "unknown rule kind"),
        ("bad_action.yaml", 4, "rules.0.then"),
        ("bad_every_n.yaml", 2, "every_n_iterations"),
        ("bad_criteria_escape.yaml", 3, "outside the steering directory"),
        ("bad_malformed.yaml", 4, "malformed YAML"),
    ],
)
def test_errors_name_their_line(name: str, line: int, words: str) -> None:
    findings = validate_file(DATA / name)
    assert [f.severity for f in findings] == ["error"]
    assert (findings[0].line, words in findings[0].message) == (line, True), findings
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml(DATA / name)
    assert caught.value.line == line


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        # PyYAML keeps the last of a key given twice: an abort quietly became a pause
        ("rules: []\non_violation: abort\non_violation: pause\n", 3, "duplicate key"),
        ("rules:\n  - kind: max_tool_calls\n    count: 3\n    count: 1\n", 4, "first on line 3"),
        # the same on one line, in flow style, was accepted
        ("{rules: [], on_violation: abort, on_violation: pause}\n", 1, "duplicate key"),
        ("rules: [{when: tool_repeated, then: abort, then: steer}]\n", 1, "duplicate key"),
        # a blank judge model passed, and left a run registered that nothing drove
        ('rules: []\nmodel: "  "\n', 2, "must not be blank"),
        ('rules: []\nmodels:\n  j: ""\n', 2, "'j' must not be blank"),
        ('rules: []\nsteer_message: "   "\n', 2, "must not be blank"),
        # a steer carrying it was refused at run time (payload too large), long after
        ("rules: []\nsteer_message: " + "Stay on billing. " * 200 + "\n", 2, "at most 2,000"),
        # the OS refuses a NUL in a path: a bare ValueError traceback from validate
        ('rules: []\nmodels_file: "\\0"\n', 2, "NUL"),
        ('rules: []\ncriteria_file: "a\\0b"\n', 2, "NUL"),
        ("models: {j: openai/x}\nsupervisor:\n  model: j\n", 2, "move 'models' under it"),
    ],
)
def test_odd_values_are_errors_on_their_line(
    tmp_path: Path, text: str, line: int, words: str
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    findings = validate_file(spec)
    assert [f.severity for f in findings] == ["error"], findings
    assert findings[0].line == line and words in findings[0].message, findings
    with pytest.raises(SupervisorSpecError, match=words):
        SupervisorSpec.from_yaml(spec)


def test_a_merge_key_may_override_what_it_merges(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "base: &base {kind: max_tool_calls, count: 3, then: pause}\n"
        "rules:\n  - <<: *base\n    count: 1\n"
    )
    findings = validate_file(spec)
    assert not [f for f in findings if f.severity == "error" and "duplicate" in f.message]


def test_every_error_is_reported_not_only_the_first(tmp_path: Path) -> None:
    spec = tmp_path / "two.yaml"
    spec.write_text("on_violation: nope\nevery_n_iterations: 0\n")
    assert [(f.severity, f.line) for f in validate_file(spec)] == [("error", 1), ("error", 2)]


def test_the_command_prints_findings_and_exits_non_zero_on_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", str(DATA / "good_full.yaml")]) == 0
    assert "ok (0 warning(s))" in capsys.readouterr().out
    assert main(["validate", str(DATA / "warn_bare_model.yaml")]) == 0
    assert main(["validate", str(DATA / "bad_unknown_key.yaml")]) == 1
    out = capsys.readouterr().out
    assert f"{DATA / 'bad_unknown_key.yaml'}:4: error: unknown key 'on_violaton'" in out
    assert "1 error(s)" in out


def test_a_missing_file_is_an_error() -> None:
    out = io.StringIO()
    assert validate_command("/nonexistent/spec.yaml", out) == 1
    assert "no such file" in out.getvalue()


def test_a_directory_is_said_to_be_one(tmp_path: Path) -> None:
    # it said "no such file", which sent the user looking for a typo
    out = io.StringIO()
    assert validate_command(str(tmp_path), out) == 1
    assert "a directory, not a file" in out.getvalue()


#: A YAML "billion laughs": nine aliases of nine aliases ... nine levels deep (387,420,489
#: strings once expanded) in under 400 bytes.
ALIAS_BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_a_yaml_alias_bomb_is_refused_not_expanded(tmp_path: Path) -> None:
    """Walking the aliases for line numbers ran out of memory (a MemoryError traceback)."""
    spec = tmp_path / "bomb.yaml"
    spec.write_text(ALIAS_BOMB + "rules: *i\n")
    [finding] = validate_file(spec)
    assert finding.severity == "error" and "expands to more than" in finding.message
    with pytest.raises(SupervisorSpecError, match="expands to more than"):
        SupervisorSpec.from_yaml(ALIAS_BOMB + "rules: *i\n")
    out = io.StringIO()
    assert validate_command(str(spec), out) == 1


def test_a_huge_spec_without_aliases_is_refused_for_its_size_on_its_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # refused only once all of it was composed (seconds for a 1 MB flow list), as a spec
    # whose "aliases repeat what their anchors hold", when it has no alias at all, and with
    # no line (the bound made small here: composing 100,000 values takes seconds)
    monkeypatch.setattr(spec_module, "MAX_YAML_VALUES", 1_000)
    text = "rules: []\nwatches: [" + "a," * 1_500 + "a]\n"
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml(text)
    assert "alias" not in str(caught.value)
    assert "more than 1,000 values" in str(caught.value)
    assert caught.value.line == 2
    [finding] = validate_file(text)
    assert finding.severity == "error" and finding.line == 2


def test_aliases_that_stay_small_are_still_read(tmp_path: Path) -> None:
    spec = tmp_path / "aliases.yaml"
    spec.write_text(
        "rules:\n  - &loop {when: tool_repeated, tool: search, count: 3}\n"
        "  - {<<: *loop, count: 5, then: abort}\n"
    )
    assert validate_file(spec) == []
    assert len(SupervisorSpec.from_yaml(spec).rules) == 2


def test_a_file_that_is_not_utf8_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    spec = tmp_path / "binary.yaml"
    spec.write_bytes(b"\xff\xfe\x00rules: []\n")
    [finding] = validate_file(spec)
    assert finding.severity == "error" and "not UTF-8" in finding.message
    out = io.StringIO()
    assert validate_command(str(spec), out) == 1
    with pytest.raises(SupervisorSpecError, match="not UTF-8"):
        SupervisorSpec.from_yaml(spec)


def test_a_byte_that_is_not_utf8_is_named_by_its_line(tmp_path: Path) -> None:
    # only its offset in the file was said: no FILE:LINE in 'tinyagents validate', and a
    # count of bytes to find it in an editor
    spec = tmp_path / "latin1.yaml"
    spec.write_bytes("on_violation: abort\ncriteria: café\n".encode("latin-1"))
    [finding] = validate_file(spec)
    assert finding.line == 2 and "byte 0xe9 on line 2" in finding.message
    out = io.StringIO()
    assert validate_command(str(spec), out) == 1
    assert out.getvalue().startswith(f"{spec}:2: error: ")
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml(spec)
    assert caught.value.line == 2
    (tmp_path / "policy.md").write_bytes(b"Stay on billing.\n\xff\n")
    spec.write_text("model: openai/judge\ncriteria_file: policy.md\n")
    [finding] = validate_file(spec)
    assert finding.line == 2  # the spec's line naming the file; the byte's is in the message
    assert "byte 0xff on line 2 of it" in finding.message


def test_yaml_nested_too_deep_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    """PyYAML composes recursively: 600 nested lists were a RecursionError traceback."""
    spec = tmp_path / "deep.yaml"
    spec.write_text("rules: " + "[" * 5000 + "]" * 5000 + "\n")
    [finding] = validate_file(spec)
    assert finding.severity == "error" and "nested too deep" in finding.message
    with pytest.raises(SupervisorSpecError, match="nested too deep"):
        SupervisorSpec.from_yaml(spec)


def test_a_long_wrong_value_is_quoted_short(tmp_path: Path) -> None:
    spec = tmp_path / "long.yaml"
    spec.write_text("rules: " + "[" * 100 + "]" * 100 + "\non_violation: " + "x" * 5000 + "\n")
    findings = validate_file(spec)
    assert findings and all(len(f.message) < 400 for f in findings)


@pytest.mark.parametrize("levels", [70, 300])
def test_nesting_past_the_spec_limit_is_refused_whatever_the_recursion_limit(
    tmp_path: Path, levels: int
) -> None:
    import sys

    spec = tmp_path / "deep.yaml"
    spec.write_text("rules: " + "[" * levels + "]" * levels + "\n")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)  # as a test runner or a library may have set it
    try:
        [finding] = validate_file(spec)
    finally:
        sys.setrecursionlimit(limit)
    assert "nested too deep" in finding.message


def test_yaml_that_refers_to_itself_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "cycle.yaml"
    spec.write_text("rules: &r [*r]\n")
    [finding] = validate_file(spec)
    assert "refers to itself" in finding.message


@pytest.mark.parametrize(
    ("extra", "line", "words"),
    [
        # only criteria, criteria_file, every_n_iterations and on_judge_error were checked
        ("judge_timeout_s: 5\n", 3, "'judge_timeout_s' configures the judge"),
        ("api_base: http://127.0.0.1:8080/v1\n", 3, "'api_base' configures the judge"),
        ("api_key_env: JUDGE_KEY\n", 3, "'api_key_env' configures the judge"),
        ("models:\n  judge: openai/gpt-4o-mini\n", 3, "'models' configures the judge"),
        # an empty watches list watches nothing: the rules never run
        ("watches: []\n", 3, "watches no runs"),
    ],
)
def test_settings_that_cannot_act_are_warned_about(extra: str, line: int, words: str) -> None:
    findings = validate_file("rules:\n  - when: iteration_reached\n" + extra)
    assert [(f.severity, f.line, words in f.message) for f in findings] == [
        ("warning", line, True)
    ], findings


def test_a_rule_given_twice_is_warned_about_on_its_line() -> None:
    # both copies fire on the same event: the run was paused or steered twice for one reason
    findings = validate_file(
        "rules:\n"
        "  - when: tool_repeated\n"
        "    tool: search\n"
        "  - when: iteration_reached\n"
        "  - {when: tool_repeated, tool: search, count: 3}\n"
    )
    assert [(f.severity, f.line) for f in findings] == [("warning", 5)]
    assert "rules.2 repeats rules.0" in findings[0].message


@pytest.mark.parametrize(
    ("content", "words"),
    [(b"\xff\xfe policy", "not UTF-8"), (b"x" * 1_000_001, "more than 1,000,000")],
)
def test_a_criteria_file_the_judge_cannot_read_is_an_error(
    tmp_path: Path, content: bytes, words: str
) -> None:
    # validate said "ok" and Runtime(supervisor=spec) then refused the spec
    (tmp_path / "policy.md").write_bytes(content)
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: openai/judge\ncriteria_file: policy.md\n")
    [finding] = validate_file(spec)
    assert (finding.severity, finding.line) == ("error", 2) and words in finding.message
    assert validate_command(str(spec), io.StringIO()) == 1


def test_a_file_name_too_long_for_the_os_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    # Path.is_file() raises OSError(ENAMETOOLONG) where it returns False for a missing file
    # (Python 3.11, 3.12): from_yaml raised a bare OSError, and 'tinyagents validate'
    # crashed with a traceback
    long = "a" * 300
    out = io.StringIO()
    assert validate_command(f"{long}.yaml", out) == 1
    assert out.getvalue().startswith(f"{long}.yaml: error: ")
    with pytest.raises(SupervisorSpecError):
        SupervisorSpec.from_yaml(f"{long}.yaml")
    spec = tmp_path / "supervisor.yaml"
    spec.write_text(f"model: judge\ncriteria_file: {long}.md\nmodels_file: {long}.yaml\n")
    findings = validate_file(spec)
    assert [(f.severity, f.line) for f in findings] == [("warning", 2), ("warning", 3)]


@pytest.mark.parametrize("target", ["loop", "missing"])
def test_a_symlink_that_leads_nowhere_is_said_to_be_one(tmp_path: Path, target: str) -> None:
    # it said "no such file" of a name that is there (ls lists it), a symlink in a loop or
    # to a file that is gone, which sent the user looking for a typo
    link = tmp_path / "spec.yaml"
    link.symlink_to(link if target == "loop" else tmp_path / "gone.yaml")
    out = io.StringIO()
    assert validate_command(str(link), out) == 1
    printed = out.getvalue()
    assert "no such file" not in printed and "a symlink" in printed, printed
    assert ("gone.yaml" in printed) == (target == "missing")


LONG = "k" * 2000


@pytest.mark.parametrize(
    "text",
    [
        f"? {LONG}\n: 1\n",  # an unknown key (YAML's explicit key: a plain one is at most 1,024)
        f"rules:\n  - when: tool_repeated\n    ? {LONG}\n    : 3\n",
        f"models:\n  ? {LONG}\n  : 3\n",
        f"rules:\n  - when: {LONG}\n",
        f"rules:\n  - when: tool_repeated\n    tool: {LONG}\n    count: 2\n",
        f"model: {LONG}\n",
        f"model: {LONG}/x\n",
        f"model: a\nmodels:\n  ? {LONG}\n  : openai/x\n",
        f"criteria_file: {LONG}.md\nmodel: openai/x\n",
        f"criteria_file: ../{LONG}\nmodel: openai/x\n",
        f"models_file: {LONG}.yaml\nmodel: openai/x\n",
        f"? {'9' * 5000}\n: 1\n",  # a key YAML reads as an integer Python will not print
    ],
)
def test_a_long_name_is_cut_in_every_message(text: str, tmp_path: Path) -> None:
    """A 2,000-character key (or value naming a file, a model, a tool) was echoed back whole:
    each message quotes at most ``MAX_QUOTED_ID`` characters of it, saying how long it was."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    out = io.StringIO()
    validate_command(str(spec), out)
    lines = out.getvalue().splitlines()
    assert lines
    assert all(len(line) < 600 for line in lines), [line[:200] for line in lines]
    assert any("characters" in line for line in lines), lines
