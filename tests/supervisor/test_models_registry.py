"""A bare judge ``model`` name resolved from a models registry (``models`` inline or a
``models_file``), through litellm against the testkit's OpenAI-compatible server; a bare name
that cannot be resolved is a validation warning."""

from __future__ import annotations

import os
import subprocess
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

from pathlib import Path
from typing import Any

import pytest

from tinyagents import Agent, RunStatus, Runtime, SupervisorSpec, tool
from tinyagents.supervisor import ModelEntry, SupervisorSpecError
from tinyagents.supervisor.validate import validate_file
from tinyagents.testkit import EventWaiter, OpenAICompatServer, ScriptedModel, reply, tool_call

DATA = Path(__file__).resolve().parent.parent / "data" / "supervisor"


def waiting_tool(waiter: EventWaiter) -> Any:
    """A tool that returns once the supervisor acted (so the run is still going when the
    judge answers)."""

    @tool
    async def work() -> str:
        """Do some work."""
        await waiter.event("supervisor.action")
        return "worked"

    return work


def test_a_bare_name_resolves_through_the_models_file_next_to_the_spec() -> None:
    spec = SupervisorSpec.from_yaml(DATA / "good_models_registry.yaml")
    assert spec.judge_target() == ModelEntry(
        model="openai/gpt-4o-mini", api_base="http://127.0.0.1:8080/v1", api_key_env="JUDGE_KEY"
    )
    assert validate_file(DATA / "good_models_registry.yaml") == []


def test_inline_models_win_over_the_file_and_the_specs_own_endpoint_wins(tmp_path: Path) -> None:
    (tmp_path / "models.yaml").write_text("judge: openai/from-file\nsmall: openai/small\n")
    (tmp_path / "spec.yaml").write_text(
        "model: judge\nmodels_file: models.yaml\napi_base: http://own/v1\n"
        "models:\n  judge: {model: openai/inline, api_base: http://inline/v1}\n"
    )
    spec = SupervisorSpec.from_yaml(tmp_path / "spec.yaml")
    assert spec.judge_target() == ModelEntry(model="openai/inline", api_base="http://own/v1")
    assert spec.registry()["small"] == ModelEntry(model="openai/small")
    # A name with a provider prefix is a litellm string, never looked up.
    assert SupervisorSpec(model="openai/x", models={"openai/x": "openai/y"}).judge_target() == (
        ModelEntry(model="openai/x")
    )


def test_an_unresolved_bare_name_is_a_warning_naming_what_the_registry_has() -> None:
    [finding] = validate_file(DATA / "warn_unresolved_model.yaml")
    assert (finding.severity, finding.line) == ("warning", 2)
    assert "'judgee' is a bare name that is not in the models registry" in finding.message
    assert "['judge', 'small']" in finding.message


def test_a_broken_models_file_is_an_error_and_a_missing_one_a_warning(tmp_path: Path) -> None:
    [finding] = validate_file(DATA / "bad_models_file.yaml")
    assert finding.severity == "error" and "unknown key 'judge.api_bse'" in finding.message
    assert "bad_models.yaml" in finding.message and "line 4" in finding.message
    with pytest.raises(SupervisorSpecError, match="api_bse"):
        SupervisorSpec.from_yaml(DATA / "bad_models_file.yaml").judge_target()
    (tmp_path / "spec.yaml").write_text("model: judge\nmodels_file: nowhere.yaml\n")
    [missing] = validate_file(tmp_path / "spec.yaml")
    assert (missing.severity, missing.line) == ("warning", 2)
    assert "does not exist" in missing.message
    with pytest.raises(SupervisorSpecError, match="cannot read models_file"):
        Runtime(supervisor=SupervisorSpec.from_yaml(tmp_path / "spec.yaml"))
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "spec.yaml").write_text("model: judge\nmodels_file: a-folder\n")
    [folder] = validate_file(tmp_path / "spec.yaml")
    assert "'a-folder' is not a regular file" in folder.message


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_models_or_criteria_file_that_is_no_regular_file_is_refused_not_read(
    tmp_path: Path,
) -> None:
    # its size is 0, so the size check passed, and reading a pipe no one writes waited for
    # ever: Runtime(supervisor=spec) hung (and a run's watch would have hung its event loop)
    os.mkfifo(tmp_path / "models.yaml")
    os.mkfifo(tmp_path / "policy.md")
    (tmp_path / "a.yaml").write_text("model: judge\nmodels_file: models.yaml\n")
    (tmp_path / "b.yaml").write_text("model: openai/judge\ncriteria_file: policy.md\n")
    for name in ("a.yaml", "b.yaml"):
        with pytest.raises(SupervisorSpecError, match="not a regular file"):
            Runtime(supervisor=SupervisorSpec.from_yaml(tmp_path / name))


async def test_the_judge_reaches_the_registered_model_at_its_api_base(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REGISTRY_JUDGE_KEY", "sk-registry")
    async with OpenAICompatServer(['{"passed": false, "reason": "off topic"}']) as server:
        spec = SupervisorSpec(
            model="judge",
            models={
                "judge": ModelEntry(
                    model="openai/registered-judge",
                    api_base=server.base_url,
                    api_key_env="REGISTRY_JUDGE_KEY",
                )
            },
            criteria="Stay on topic.",
            on_violation="abort",
        )
        model = ScriptedModel([tool_call("work"), reply("done")])
        waiter = EventWaiter()
        async with Runtime(supervisor=spec, sinks=[waiter]) as rt:
            agent = Agent("a", model, tools=[waiting_tool(waiter)])
            result = await (await rt.start(agent, "go")).result()

    assert result.status is RunStatus.ABORTED and result.error == "off topic"
    [request] = server.requests
    assert request["model"] == "registered-judge"


@pytest.mark.parametrize(
    ("entry", "line", "words"),
    [
        ("    model: ' '\n", 4, "models.judge.model: must not be blank"),
        ("    model: openai/x\n    api_bse: http://h\n", 5, "unknown key 'models.judge.api_bse'"),
        ("    - openai/x\n", 3, "models.judge: Input should be a valid string"),
    ],
)
def test_a_mistake_in_an_inline_entry_is_reported_as_a_models_file_one(
    entry: str, line: int, words: str
) -> None:
    # the error of the string branch was reported for an entry written as a mapping:
    # "models.judge.str: Input should be a valid string"
    text = f"model: judge\nmodels:\n  judge:\n{entry}"
    with pytest.raises(SupervisorSpecError) as caught:
        SupervisorSpec.from_yaml(text)
    assert caught.value.line == line and words in str(caught.value), str(caught.value)
    assert ".str" not in str(caught.value) and "ModelEntry" not in str(caught.value)
    findings = validate_file(text)
    assert [(f.line, words in f.message) for f in findings] == [(line, True)], findings


def test_an_unknown_litellm_provider_prefix_is_a_warning(tmp_path: Path) -> None:
    """``model: nosuch/x`` loaded without a word and failed at the judge's first call
    ("LLM Provider NOT provided"): the prefix is checked against litellm's provider list,
    read from its installed source (no network, litellm not imported)."""
    for model, line in (("nosuch/x", 1), ("judge", 1)):
        spec = tmp_path / "spec.yaml"
        spec.write_text(f"model: {model}\nmodels:\n  judge: nosuch/y\n")
        [finding] = validate_file(spec)
        assert (finding.severity, finding.line) == ("warning", line), finding
        assert "'nosuch'" in finding.message and "litellm" in finding.message, finding
    for known in ("openai/gpt-4o-mini", "anthropic/claude", "ollama/llama3", "hosted_vllm/m"):
        spec.write_text(f"model: {known}\n")
        assert validate_file(spec) == [], known
    spec.write_text("model: nosuch/x\n")
    code = (
        "import sys; from tinyagents.supervisor.validate import validate_file; "
        f"print(len(validate_file({str(spec)!r})), 'litellm' in sys.modules)"
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.split() == ["1", "False"], (out.stdout, out.stderr)
