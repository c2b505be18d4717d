"""``SupervisorSpec``: Python and YAML, typed errors naming the line, confined criteria files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from tinyagents import LiteLLMModel, SupervisorSpec
from tinyagents.errors import ConfigurationError
from tinyagents.supervisor import ModelEntry, SupervisorSpecError
from tinyagents.supervisor.spec import BudgetFraction, IterationReached, ToolRepeated
from tinyagents.supervisor.validate import validate_file

GOOD = """\
supervisor:
  rules:
    - when: tool_repeated
      tool: search
      count: 3
    - when: budget_fraction
      gt: 0.5
      then: abort
    - when: iteration_reached
      gte: 4
  on_violation: steer
  model: openai/judge
  criteria: Stay on the billing question.
  every_n_iterations: 2
  on_judge_error: pause
"""


def test_yaml_text_builds_every_field() -> None:
    spec = SupervisorSpec.from_yaml(GOOD)
    assert spec.rules == [
        ToolRepeated(when="tool_repeated", tool="search", count=3),
        BudgetFraction(when="budget_fraction", gt=0.5, then="abort"),
        IterationReached(when="iteration_reached", gte=4),
    ]
    assert (spec.on_violation, spec.model, spec.every_n_iterations, spec.on_judge_error) == (
        "steer",
        "openai/judge",
        2,
        "pause",
    )
    assert spec.watches == ["agents"]


def test_defaults() -> None:
    spec = SupervisorSpec()
    assert (spec.on_violation, spec.on_judge_error, spec.every_n_iterations) == (
        "pause",
        "ignore",
        1,
    )
    assert spec.effective_pause_max_s() == 300
    assert spec.effective_judge_timeout_s() == 30


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1e3", 1000.0), ("1.5E2", 150.0), ("2.0e+1", 20.0), ("1.0e2", 100.0), ("90", 90)],
)
def test_numbers_in_exponent_form_are_numbers(text: str, seconds: float) -> None:
    # YAML 1.1 (PyYAML's default) reads 1e3 and 1.0e2 as text, so the number field refused
    # them as "not a valid number"; they are read as YAML 1.2 reads them
    spec = SupervisorSpec.from_yaml(f"pause_max_s: {text}\njudge_timeout_s: {text}\n")
    assert spec.pause_max_s == spec.judge_timeout_s == seconds
    assert SupervisorSpec.from_yaml("watches: [agents]\nmodel: '1e3'\n").model == "1e3"


@pytest.mark.parametrize(
    ("text", "read"),
    [
        # YAML 1.1 (PyYAML's default) read 010 as octal 8, 1:30 as 90 (sexagesimal), 1_000
        # as 1000, yes/no/on/off as booleans and a date as a date; YAML 1.2 does not
        ("every_n_iterations: 010", {"every_n_iterations": 10}),
        ("every_n_iterations: 0o17", {"every_n_iterations": 15}),
        ("every_n_iterations: 0x10", {"every_n_iterations": 16}),
        ("pause_max_s: -.5e1", {"pause_max_s": "error"}),
        ("every_n_iterations: 1:30", {"every_n_iterations": "error"}),
        ("pause_max_s: 1_000", {"pause_max_s": "error"}),
        ("rules: [{when: tool_repeated, tool: no}]", {"tool": "no"}),
        ("rules: [{when: tool_repeated, tool: off}]", {"tool": "off"}),
        ("rules: [{when: tool_repeated, tool: Yes}]", {"tool": "Yes"}),
        ("criteria: 2024-01-01", {"criteria": "2024-01-01"}),
        ("criteria: =", {"criteria": "="}),
    ],
)
def test_scalars_are_read_as_yaml_1_2_reads_them(text: str, read: dict[str, object]) -> None:
    [(key, value)] = read.items()
    if value == "error":
        with pytest.raises(SupervisorSpecError, match=key):
            SupervisorSpec.from_yaml(text)
        return
    spec = SupervisorSpec.from_yaml(text)
    got = spec.rules[0].tool if key == "tool" else getattr(spec, key)  # type: ignore[union-attr]
    assert (got, type(got)) == (value, type(value))


def test_environment_sets_the_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYAGENTS_JUDGE_TIMEOUT_S", "2.5")
    monkeypatch.setenv("TINYAGENTS_PAUSE_MAX_S", "7")
    spec = SupervisorSpec()
    assert (spec.effective_judge_timeout_s(), spec.effective_pause_max_s()) == (2.5, 7)
    for wrong in ("soon", "nan", "inf", "-1", "0"):  # nan passed the '> 0' check
        monkeypatch.setenv("TINYAGENTS_PAUSE_MAX_S", wrong)
        with pytest.raises(ConfigurationError, match="TINYAGENTS_PAUSE_MAX_S"):
            spec.effective_pause_max_s()


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("rules: []\nonviolation: pause\n", 2, "unknown key 'onviolation'"),
        ("rules:\n  - when: tool_repeated\n    cuont: 3\n", 3, "unknown key 'rules.0.cuont'"),
        ("rules:\n  - when: looping\n", 2, "unknown rule kind"),
        ("rules:\n  - tool: x\n", 2, "needs 'when'"),
        ("on_violation: explode\n", 1, "on_violation"),
        ("every_n_iterations: 0\n", 1, "greater than or equal to 1"),
        ("every_n_iterations: '2'\n", 1, "every_n_iterations"),
        ("every_n_iterations: 1.5\n", 1, "every_n_iterations"),
        ("rules: []\non_judge_error: retry\n", 2, "on_judge_error"),
        ("rules:\n  - when: budget_fraction\n    gt: 2\n", 3, "rules.0.gt: Input should be less"),
        ("rules: [\n", 2, "malformed YAML"),
        ("a: b: c\n", 1, "malformed YAML"),
        ("- just\n- a list\n", 1, "mapping"),
        # the wrapper beside another key: "unknown key 'supervisor'", the one key that was right
        ("supervisor:\n  on_violation: abort\nversion: 1\n", 1, "move 'version' under it"),
    ],
)
def test_bad_yaml_is_a_typed_error_naming_the_line(text: str, line: int, words: str) -> None:
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml(text)
    assert caught.value.line == line, str(caught.value)
    assert words in str(caught.value)
    assert str(caught.value).startswith(f"line {line}: ")  # text: no file name


@pytest.mark.parametrize(
    "value",
    [
        "!!float abc",
        '!!float ""',
        "!!int abc",
        "!!int 0xZZ",
        "!!int 0b101",
        "!!bool maybe",
        "!!timestamp nope",
        "!!set [a]",
        "!!map [a]",
    ],
)
def test_a_tag_its_value_does_not_fit_is_a_typed_error_naming_the_line(value: str) -> None:
    # PyYAML's constructors raise ValueError, KeyError, TypeError... for these: a traceback
    # out of from_yaml and out of 'tinyagents validate'
    text = f"rules: []\non_violation: {value}\n"
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml(text)
    assert caught.value.line == 2, str(caught.value)
    assert "malformed YAML" in str(caught.value) and value.split()[0] in str(caught.value)
    [finding] = validate_file(text)
    assert (finding.severity, finding.line) == ("error", 2)


@given(st.text(max_size=200))
def test_any_text_is_a_spec_or_a_typed_error(text: str) -> None:
    try:
        SupervisorSpec.from_yaml(text)
    except SupervisorSpecError:
        pass


def test_a_file_path_reads_the_file_and_confines_criteria_to_its_directory(
    tmp_path: Path,
) -> None:
    steering = tmp_path / "steering"
    steering.mkdir()
    (steering / "policy.md").write_text("Never touch production.")
    (tmp_path / "secret.md").write_text("outside")
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text("steering_dir: steering\ncriteria_file: policy.md\n")
    spec = SupervisorSpec.from_yaml(spec_file)
    assert spec.criteria_text() == "Never touch production."
    assert SupervisorSpec.from_yaml(str(spec_file)).criteria_text() == "Never touch production."

    for escape in ("../secret.md", str(tmp_path / "secret.md"), "sub/../../secret.md"):
        spec_file.write_text(f"steering_dir: steering\nrules: []\ncriteria_file: {escape}\n")
        with pytest.raises(SupervisorSpecError, match="outside the steering directory") as caught:
            SupervisorSpec.from_yaml(spec_file)
        assert caught.value.line == 3


def test_paths_built_in_python_may_be_path_objects(tmp_path: Path) -> None:
    # SupervisorSpec(criteria_file=Path(...)) was refused, "Input should be a valid string",
    # though from_yaml takes a Path and the fields are paths
    steering = tmp_path / "steering"
    steering.mkdir()
    (steering / "policy.md").write_text("Never touch production.")
    (tmp_path / "models.yaml").write_text("judge: openai/gpt-4o-mini\n")
    spec = SupervisorSpec(
        model="judge",
        steering_dir=steering,
        criteria_file=Path("policy.md"),
        models_file=tmp_path / "models.yaml",
    )
    assert spec.criteria_text() == "Never touch production."
    assert spec.steering_dir == str(steering)
    assert isinstance(spec.judge_target(), ModelEntry)
    assert spec.judge_target().model == "openai/gpt-4o-mini"  # type: ignore[union-attr]
    assert SupervisorSpec.model_validate_json(spec.model_dump_json()) == spec
    with pytest.raises(SupervisorSpecError, match="outside the steering directory"):
        SupervisorSpec(steering_dir=steering, criteria_file=tmp_path / "models.yaml")
    with pytest.raises(SupervisorSpecError, match="criteria_file: Input should be a valid string"):
        SupervisorSpec(criteria_file=b"policy.md")  # type: ignore[arg-type]


def test_a_symlink_pointing_out_of_the_steering_directory_is_refused(tmp_path: Path) -> None:
    steering = tmp_path / "steering"
    steering.mkdir()
    (tmp_path / "secret.md").write_text("outside")
    (steering / "policy.md").symlink_to(tmp_path / "secret.md")
    with pytest.raises(SupervisorSpecError, match="outside"):
        SupervisorSpec(steering_dir=str(steering), criteria_file="policy.md")


@pytest.mark.parametrize(
    ("key", "line"),
    [("criteria_file: loop.md", 2), ("steering_dir: loop.md\ncriteria_file: x.md", 3)],
)
def test_a_symlink_loop_is_a_spec_error_not_a_runtime_error(
    tmp_path: Path, key: str, line: int
) -> None:
    """A path that is a symlink loop raised pathlib's RuntimeError ("Symlink loop from ...")
    out of from_yaml, and a traceback out of `tinyagents validate` (Python 3.11 and 3.12;
    3.13 resolves it as it stands, and reading it then fails as for a missing file)."""
    (tmp_path / "loop.md").symlink_to(tmp_path / "loop.md")
    spec = tmp_path / "supervisor.yaml"
    spec.write_text(f"model: openai/judge\n{key}\n")
    with pytest.raises(SupervisorSpecError):
        SupervisorSpec.from_yaml(spec).criteria_text()
    [finding] = validate_file(spec)
    assert finding.line == line  # criteria_file's, where the loop is met


def test_a_models_file_that_is_a_symlink_loop_is_a_spec_error(tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    path = tmp_path / "supervisor.yaml"
    path.write_text("model: judge\nmodels_file: loop.yaml\n")
    spec = SupervisorSpec.from_yaml(path)
    with pytest.raises(SupervisorSpecError):
        spec.judge_target()
    [finding] = validate_file(path)
    assert finding.line == 2


def test_criteria_and_criteria_file_exclude_each_other() -> None:
    with pytest.raises(SupervisorSpecError, match="not both") as caught:
        SupervisorSpec.from_yaml("criteria: x\ncriteria_file: y.md\nrules: []\n")
    # a check of the whole spec quoted the whole spec back ("(got {'criteria': ...})")
    assert "got {" not in str(caught.value) and "rules" not in str(caught.value)


@pytest.mark.parametrize("missing", ["supervisr.yaml", "conf/supervisor.yml", "PATH"])
def test_a_file_that_is_not_there_is_no_such_file_not_yaml_text(
    tmp_path: Path, missing: str
) -> None:
    # a missing path was read as YAML text: "a supervisor spec is a mapping, got str"
    source: str | Path = tmp_path / "gone.yaml" if missing == "PATH" else missing
    with pytest.raises(SupervisorSpecError, match="no such file") as caught:
        SupervisorSpec.from_yaml(source)
    assert str(source) in str(caught.value)
    [finding] = validate_file(source)
    assert finding.severity == "error" and "no such file" in finding.message
    with pytest.raises(SupervisorSpecError, match="a directory, not a file"):
        SupervisorSpec.from_yaml(tmp_path)


def test_bytes_are_a_typed_error_saying_to_decode_them() -> None:
    with pytest.raises(SupervisorSpecError, match=r"got bytes; decode it"):
        SupervisorSpec.from_yaml(b"on_violation: abort\n")  # type: ignore[arg-type]


def test_a_control_character_is_an_error_naming_its_line() -> None:
    # PyYAML's reader error is not a marked one: it named no line, and its message ran over
    # two lines with '<unicode string>' in it
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml('rules:\n  - when: tool_repeated\n    tool: "se\x01arch"\n')
    assert caught.value.line == 3
    assert "#x0001" in str(caught.value) and "\n" not in str(caught.value)
    [finding] = validate_file("rules: []\n\non_violation: \x07abort\n")
    assert (finding.severity, finding.line) == ("error", 3)


def test_a_spec_past_the_size_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    big = "rules: []\n" + "# padding\n" * 100_001
    spec_file = tmp_path / "big.yaml"
    spec_file.write_text(big)
    for source in (spec_file, big):
        with pytest.raises(SupervisorSpecError, match=r"more than 1,000,000"):
            SupervisorSpec.from_yaml(source)
    [finding] = validate_file(spec_file)
    assert finding.severity == "error" and "1,000,000" in finding.message


def test_inline_criteria_past_the_size_limit_are_refused_as_a_criteria_file_is() -> None:
    # a criteria_file over 1 MB was refused, the same text inline was taken, and sent to the
    # judge with every call
    with pytest.raises(SupervisorSpecError, match=r"criteria: .*2,000,000 bytes, more than"):
        SupervisorSpec(criteria="x" * 2_000_000)
    with pytest.raises(SupervisorSpecError, match=r"criteria: .*more than 1,000,000"):
        SupervisorSpec(criteria="é" * 500_001)  # counted in bytes, as a file is
    assert SupervisorSpec(criteria="x" * 1_000_000).criteria_text() == "x" * 1_000_000


@pytest.mark.parametrize(
    "text", ["pause_max_s: .inf", "judge_timeout_s: .nan", "pause_max_s: -.inf"]
)
def test_a_timeout_that_is_no_finite_number_is_refused(text: str) -> None:
    """``.inf`` was taken for ``pause_max_s`` (a pause that never escalates), while the same
    value in ``TINYAGENTS_PAUSE_MAX_S`` is refused."""
    with pytest.raises(SupervisorSpecError, match=r"finite number|greater than 0"):
        SupervisorSpec.from_yaml(text)


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ('on_violation: steer\nsteer_message: "stop \\ud800 now"\n', 2, "steer_message"),
        ('rules:\n  - when: tool_repeated\n    tool: "se\\udc00"\n', 3, "rules.0.tool"),
        ('model: "openai/\\ud800"\n', 1, "model"),
        ('model: openai/x\ncriteria: "be \\ud800 brief"\n', 2, "criteria"),
        ('models:\n  judge: "openai/\\ud800"\n', 1, "model 'judge'"),
    ],
)
def test_text_holding_a_lone_surrogate_is_refused_naming_the_line(
    text: str, line: int, field: str
) -> None:
    """A double-quoted "\\ud800" escape was taken: a steer_message holding one made every
    steer of its rule an InvalidCommandError at run time, logged and skipped (the rule never
    acted), a judge model or criteria failed at the judge's first call."""
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml(text)
    assert caught.value.line == line, str(caught.value)
    assert field in str(caught.value) and "UTF-8" in str(caught.value)
    errors = [f for f in validate_file(text) if f.severity == "error"]
    assert [f.line for f in errors] == [line]
    with pytest.raises(SupervisorSpecError, match="UTF-8"):
        SupervisorSpec(steer_message="stop \ud800 now")


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("model: openai/x\napi_key_env: ''\n", 2, "api_key_env"),
        ("model: openai/x\napi_base: ' '\n", 2, "api_base"),
        ("models:\n  judge: {model: openai/x, api_key_env: ''}\n", 2, "models.judge.api_key_env"),
        ("models:\n  judge: {model: openai/x, api_base: ''}\n", 2, "models.judge.api_base"),
        # a rule counting the tool named "" never fired, and nothing said why
        ("rules:\n  - when: tool_repeated\n    tool: ' '\n", 3, "rules.0.tool"),
    ],
)
def test_a_blank_api_key_env_api_base_or_rule_tool_is_refused_naming_the_line(
    text: str, line: int, field: str
) -> None:
    """``api_key_env: ''`` was taken as no key variable at all: the judge then sent litellm's
    usual key (``OPENAI_API_KEY``) to its ``api_base``; a blank ``api_base`` sent the judge
    to the provider's own endpoint (or, in a spec, let a registry entry's win)."""
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml(text)
    assert caught.value.line == line, str(caught.value)
    assert field in str(caught.value) and "blank" in str(caught.value)
    with pytest.raises(SupervisorSpecError, match="blank"):
        SupervisorSpec(model="openai/x", api_key_env="")


@pytest.mark.parametrize("base", ["not a url", "localhost:8080/v1", "ftp://host/v1", "http://[::1"])
def test_an_api_base_that_is_no_http_url_is_refused_naming_the_line(base: str) -> None:
    """It was taken, and every judge call failed after three attempts as an "HTTP 500"
    whose message sent the reader to a server's log (litellm posted to '/not%20a%20url')."""
    text = f"model: openai/x\napi_base: '{base}'\n"
    with pytest.raises(SupervisorSpecError, match=r"http\(s\) URL") as caught:
        SupervisorSpec.from_yaml(text)
    assert caught.value.line == 2
    with pytest.raises(SupervisorSpecError, match=r"http\(s\) URL") as caught:
        SupervisorSpec.from_yaml(f"models:\n  judge: {{model: openai/x, api_base: '{base}'}}\n")
    assert caught.value.line == 2
    spec = SupervisorSpec(model="openai/x", api_base="http://127.0.0.1:8080/v1")
    assert spec.api_base == "http://127.0.0.1:8080/v1"


@pytest.mark.parametrize(
    "base",
    [
        "http://127.0.0.1:99999/v1",
        "http://127.0.0.1:abc/v1",
        "https://judge.example:0/v1",
        "http://[::1]:65536/v1",
    ],
)
def test_an_api_base_with_a_bad_port_is_refused_naming_the_line(base: str) -> None:
    """It was taken (its scheme and host are fine), and the spec's judge failed only when it
    was called, at run time, where nobody reads why."""
    text = f"model: openai/x\napi_base: '{base}'\n"
    with pytest.raises(SupervisorSpecError, match="port") as caught:
        SupervisorSpec.from_yaml(text)
    assert caught.value.line == 2
    assert "1 to 65535" in str(caught.value)
    with pytest.raises(SupervisorSpecError, match="port") as caught:
        SupervisorSpec.from_yaml(f"models:\n  judge: {{model: openai/x, api_base: '{base}'}}\n")
    assert caught.value.line == 2
    with pytest.raises(SupervisorSpecError, match="port"):
        SupervisorSpec(model="openai/x", api_base=base)
    with pytest.raises(ConfigurationError, match="port"):
        LiteLLMModel("openai/x", api_base=base)
    assert SupervisorSpec(model="openai/x", api_base="http://h:65535/v1").api_base


@pytest.mark.parametrize(
    "host",
    ["a" * 64 + ".example", "x" * 2000, ".".join(["a" * 50] * 6)],
    ids=["label", "2000", "name"],
)
def test_an_api_base_whose_host_no_dns_name_can_be_is_refused_naming_the_line(host: str) -> None:
    """A host of 2,000 characters (or a label past 63) was taken, and the judge failed only
    when first called, on a name no resolver takes; the message is cut, not the whole URL."""
    base = f"http://{host}/v1"
    with pytest.raises(SupervisorSpecError, match="host name") as caught:
        SupervisorSpec.from_yaml(f"model: openai/x\napi_base: '{base}'\n")
    assert caught.value.line == 2
    assert len(str(caught.value)) < 500
    with pytest.raises(ConfigurationError, match="host name") as refused:
        LiteLLMModel("openai/x", api_base=base)
    assert len(str(refused.value)) < 500
    longest = ".".join(["a" * 63] * 3) + ".example"  # 200 characters, each label 63
    assert SupervisorSpec(model="openai/x", api_base=f"https://{longest}/v1").api_base


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: SupervisorSpec(every_n_iterations=0), "every_n_iterations"),
        (lambda: SupervisorSpec(on_violation="explode"), "on_violation"),
        (lambda: SupervisorSpec(rules=[{"when": "tool_loops"}]), "unknown rule kind 'tool_loops'"),
        (lambda: SupervisorSpec(rulez=[]), "unknown key 'rulez'"),
        (lambda: SupervisorSpec(criteria="x", criteria_file="y.md"), "not both"),
        (lambda: SupervisorSpec.model_validate({"pause_max_s": -1}), "pause_max_s"),
        (lambda: SupervisorSpec.model_validate_json('{"rules": [{"when": 1}]}'), "rules.0"),
        (lambda: SupervisorSpec.model_validate_strings({"every_n_iterations": "x"}), "every_n"),
    ],
)
def test_a_spec_built_from_bad_values_is_a_typed_error_saying_what_was_wrong(
    build: Any, words: str
) -> None:
    # SupervisorSpec(...) raised pydantic's ValidationError, where a YAML spec raised
    # SupervisorSpecError: a program had to catch both, and Runtime(supervisor=...) callers
    # handling ConfigurationError missed it
    with pytest.raises(SupervisorSpecError) as caught:
        build()
    assert isinstance(caught.value, ConfigurationError)
    assert words in str(caught.value)
    assert str(caught.value).startswith("invalid supervisor spec: ")
    assert isinstance(caught.value.__cause__, ValidationError)


@pytest.mark.parametrize(
    ("build", "start", "words"),
    [
        (lambda: ModelEntry(model=" "), "invalid model entry: ", "model: must not be blank"),
        (
            lambda: ModelEntry(model="openai/x", api_base="localhost:8080/v1"),
            "invalid model entry: ",
            "api_base: ",
        ),
        (lambda: ModelEntry.model_validate({"modle": "x"}), "invalid model entry: ", "'modle'"),
        (
            lambda: ModelEntry.model_validate_json('{"model": 5}'),
            "invalid model entry: ",
            "model: ",
        ),
        (
            lambda: ToolRepeated(when="tool_repeated", count=0),
            "invalid tool_repeated rule: ",
            "count: Input should be greater than or equal to 1",
        ),
        (
            lambda: BudgetFraction.model_validate({"when": "budget_fraction", "gt": 2}),
            "invalid budget_fraction rule: ",
            "gt: ",
        ),
        (
            lambda: IterationReached(when="iteration_reached", gte=1, then="explode"),
            "invalid iteration_reached rule: ",
            "then: ",
        ),
    ],
)
def test_a_model_entry_or_a_rule_built_from_bad_values_is_a_typed_error(
    build: Any, start: str, words: str
) -> None:
    # only SupervisorSpec(...) was converted: ModelEntry(...) and the rules built on their
    # own raised pydantic's ValidationError, which a program catching ConfigurationError
    # (as for a spec) missed
    with pytest.raises(SupervisorSpecError) as caught:
        build()
    assert str(caught.value).startswith(start)
    assert words in str(caught.value)
    assert isinstance(caught.value.__cause__, ValidationError)
    assert caught.value.refused is caught.value.__cause__


def test_a_bad_rule_or_entry_inside_a_spec_is_one_error_naming_where_it_is() -> None:
    # each part converting its own error would have let the first one out, naming neither
    # the rule's index nor the model's name, and hidden the spec's other problems
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec(
            rules=[{"when": "tool_repeated", "count": 0}],
            models={"judge": {"model": " "}},
            every_n_iterations=0,
        )
    message = str(caught.value)
    assert message.startswith("invalid supervisor spec: ")
    assert "rules.0.count" in message and "models.judge.model" in message
    assert "every_n_iterations" in message
    assert message.count("invalid") == 1


def test_a_bad_rule_or_entry_in_yaml_still_names_its_line(tmp_path: Path) -> None:
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml("rules:\n  - when: iteration_reached\n    gte: 0\n")
    assert caught.value.line == 3 and "rules.0.gte" in str(caught.value)
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml("models:\n  judge:\n    model: openai/x\n    api_base: ftp://x\n")
    assert caught.value.line == 4 and "models.judge.api_base" in str(caught.value)
    models = tmp_path / "models.yaml"
    models.write_text("plain: openai/y\njudge:\n  model: openai/x\n  api_key_env: ' '\n")
    spec = SupervisorSpec(model="judge", models_file=str(models))
    with pytest.raises(SupervisorSpecError) as caught:
        spec.registry()
    assert caught.value.line == 4 and "judge.api_key_env" in str(caught.value)


def test_every_problem_of_a_spec_built_in_python_is_named() -> None:
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec(every_n_iterations=0, on_violation="explode")
    assert "every_n_iterations" in str(caught.value) and "on_violation" in str(caught.value)


def test_a_yaml_spec_error_keeps_the_pydantic_error_as_its_cause() -> None:
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml("rules: []\nevery_n_iterations: 0\n")
    assert caught.value.line == 2
    assert isinstance(caught.value.__cause__, ValidationError)


@pytest.mark.parametrize("value", ["5", "true", "[openai/x]", "{name: openai/x}"])
def test_a_judge_model_of_the_wrong_type_is_one_error_naming_the_model_key(value: str) -> None:
    # `model` is a string or (in Python) a Model: pydantic reported one error per branch,
    # at "model.str" and "model.is-instance[Model]", a key the YAML does not have, and told
    # a YAML author to give a Python Model instance
    text = f"rules: []\nmodel: {value}\n"
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml(text)
    assert caught.value.line == 2
    assert caught.value.problem.startswith("model: ")
    assert "model.str" not in str(caught.value) and "is-instance" not in str(caught.value)
    assert "'openai/gpt-4o-mini'" in str(caught.value)
    [finding] = validate_file(text)
    assert finding.severity == "error" and finding.line == 2
    assert finding.message == caught.value.problem
    with pytest.raises(SupervisorSpecError) as built:
        SupervisorSpec(model=5)
    assert str(built.value).startswith("invalid supervisor spec: model: ")
    assert "is-instance" not in str(built.value) and "model.str" not in str(built.value)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("rules: []\n5: x\n", 2),
        ("rules: []\nnull: x\n", 2),
        ("rules: []\ntrue: x\n", 2),
        ("models:\n  judge: openai/x\n  2024: openai/y\n", 3),
        ("models:\n  judge: openai/x\n  ~: openai/y\n", 3),
    ],
)
def test_a_key_that_is_no_string_is_refused_on_its_own_line(text: str, line: int) -> None:
    # a key YAML reads as a number, a boolean or null was refused on line 1: the lines are
    # kept by a key's text ("5", "true"), which pydantic's location (5, 1, 'None') never
    # matched; and the error named the key as pydantic's location spells it ("1" for true)
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml(text)
    assert caught.value.line == line
    assert "quote it" in caught.value.problem
    [finding] = validate_file(text)
    assert finding.line == line and finding.message == caught.value.problem


def test_a_rule_built_in_python_needs_no_when_of_its_own_kind() -> None:
    """``ToolRepeated(tool="search", count=3)`` was refused ("when: Field required"): a rule
    class had to be told its own kind, the one value its ``when`` may have. Built without it,
    it is the rule YAML gives, in a spec too; a spec's rules read as dicts still need it."""
    rules = [
        ToolRepeated(tool="search", count=3),
        BudgetFraction(gt=0.5, then="abort"),
        IterationReached(gte=4),
    ]
    assert rules == SupervisorSpec.from_yaml(GOOD).rules
    assert SupervisorSpec(rules=rules).rules == rules
    assert [rule.when for rule in rules] == [
        "tool_repeated",
        "budget_fraction",
        "iteration_reached",
    ]
    with pytest.raises(SupervisorSpecError, match="when"):
        SupervisorSpec.model_validate({"rules": [{"tool": "search"}]})


@pytest.mark.parametrize("key", ["criteria_file", "models_file", "steering_dir"])
def test_a_blank_path_is_refused_naming_the_line(key: str) -> None:
    # "criteria_file: ''" names no file: it resolved to the spec's own directory, and was at
    # most a warning ("not a regular file (/the/spec/dir)"), the judge failing when it started
    text = f"model: openai/x\ncriteria: x\n{key}: ' '\n".replace(
        "criteria: x\ncriteria_file", "criteria_file"
    )
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml(text)
    assert key in str(caught.value) and "blank" in str(caught.value)
    assert caught.value.line == text.count("\n")
    with pytest.raises(SupervisorSpecError, match="blank"):
        SupervisorSpec(**{key: ""})  # type: ignore[arg-type]
