"""Check a supervisor spec before anything runs: ``tinyagents validate FILE.yaml``.

    findings = validate_file("supervisor.yaml")
    if any(f.severity == "error" for f in findings): ...

Errors (the spec cannot be used): malformed YAML, unknown keys, unknown actions or rule kinds,
``every_n_iterations`` not an integer >= 1, a ``criteria_file`` outside its steering directory
or one that cannot be read (not UTF-8, too big).
Warnings (it loads, but probably not as meant): a ``criteria_file`` that does not exist, a
bare judge model name the models registry (``models``, ``models_file``) does not resolve, a
``models_file`` that does not exist, a judge model (or the registry entry it names) whose
``provider/`` prefix is not one of litellm's (``nosuch/x``), a judge setting (``criteria``, ``every_n_iterations``,
``on_judge_error``, ``judge_timeout_s``, ``api_base``, ``api_key_env``, ``models``...) without
a judge ``model``, an empty ``watches``, a rule given twice; for a compiled graph (``validate_graph``),
a ``tool_repeated`` rule counting a tool no agent the spec watches there has, and each agent
node whose ``aborted`` outcome is not routed. A ``models_file`` that cannot be
read as a registry is an error.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tinyagents.protocol.ids import shown_id, shown_name
from tinyagents.supervisor.findings import Finding
from tinyagents.supervisor.graphs import graph_findings, tool_findings
from tinyagents.supervisor.spec import (
    SupervisorSpec,
    SupervisorSpecError,
    describe_error,
    is_file,
    line_of,
    meant_errors,
    named,
    not_a_file,
    parse_yaml,
    read_source,
    shown_path,
    spec_mapping,
    yaml_loc,
)

if TYPE_CHECKING:
    from tinyagents.graph.core import GraphCore


def validate_file(source: str | Path) -> list[Finding]:
    """Every problem of the spec in ``source`` (a YAML file or YAML text), errors first."""
    try:
        text, base_dir, name = read_source(source)
        data, lines = parse_yaml(text, name)
    except SupervisorSpecError as exc:
        return [Finding("error", exc.problem, exc.line)]
    try:
        data, prefix = spec_mapping(data, lines, None)
    except SupervisorSpecError as exc:
        return [Finding("error", exc.problem, exc.line)]
    try:
        spec = SupervisorSpec.model_validate(data, context={"base_dir": base_dir})
    except SupervisorSpecError as exc:
        refused = exc.refused
        if refused is None:  # a check of the spec: a criteria_file outside its directory
            return [Finding("error", exc.problem, lines.get((*prefix, "criteria_file")))]
        return [
            Finding(
                "error",
                describe_error(err),
                line_of((*prefix, *yaml_loc(err["loc"])), lines),
            )
            for err in meant_errors(refused.errors(), data)
        ]
    return _warnings(spec, lambda *path: lines.get((*prefix, *path)))


def validate_graph(graph: GraphCore, spec: SupervisorSpec | None = None) -> list[Finding]:
    """The warnings for a compiled graph under ``spec`` (default: its
    ``compile(supervisor=...)`` spec): the spec's own, then each agent node whose ``aborted``
    outcome is not routed. Graphs have no YAML form, so this is the Python API only."""
    spec = spec if spec is not None else getattr(graph, "supervisor", None)
    if spec is not None:
        return [
            *_warnings(spec, lambda *path: None),
            *tool_findings(graph, spec.rules),
            *graph_findings(graph, can_abort=spec.can_abort()),
        ]
    if not _has_spec(graph):
        return [
            Finding(
                "warning",
                f"graph {graph.name!r} has no supervisor: pass compile(supervisor=spec) or "
                "validate_graph(graph, spec)",
            )
        ]
    return graph_findings(graph, can_abort=False)  # its sub-graphs' specs watch their nodes


def _has_spec(graph: GraphCore) -> bool:
    """Whether a sub-graph of ``graph`` (at any depth) was compiled with a supervisor."""
    return any(
        getattr(node.subgraph, "supervisor", None) is not None or _has_spec(node.subgraph)
        for node in graph.nodes.values()
        if node.subgraph is not None
    )


#: The YAML line of a key path of the spec (``at("model")``, ``at("rules", 2)``), if known.
LineOf = Callable[..., int | None]


def _warnings(spec: SupervisorSpec, at: LineOf) -> list[Finding]:
    found: list[Finding] = []
    path = spec.criteria_path()
    if path is not None and not is_file(path):
        found.append(
            Finding(
                "warning",
                f"criteria_file {named(spec.criteria_file)} {_missing(path)} ({shown_path(path)}); "
                "the judge "
                "cannot start without it",
                at("criteria_file"),
            )
        )
    elif path is not None:
        try:  # what Runtime(supervisor=spec) reads at once, and refuses if it cannot
            spec.criteria_text()
        except SupervisorSpecError as exc:
            found.append(Finding("error", exc.problem, at("criteria_file")))
    found.extend(_model_warnings(spec, at))
    first: dict[object, int] = {}
    for index, rule in enumerate(spec.rules):
        seen = first.setdefault(rule, index)  # frozen models: equal fields, equal rules
        if seen != index:
            found.append(
                Finding(
                    "warning",
                    f"rules.{index} repeats rules.{seen}: it is one rule, which acts once, "
                    "so the copy adds nothing; give it once",
                    at("rules", index),
                )
            )
    if spec.model is None:
        for key in _JUDGE_SETTINGS:
            if key in spec.model_fields_set:
                found.append(
                    Finding(
                        "warning",
                        f"{key!r} configures the judge, but there is no judge 'model': only "
                        "the rules run",
                        at(key),
                    )
                )
    if not spec.watches:
        found.append(
            Finding(
                "warning",
                "'watches' is empty: the supervisor watches no runs, so its rules and judge "
                "never act; leave it out to watch agent runs",
                at("watches"),
            )
        )
    elif not spec.rules and spec.model is None:
        found.append(
            Finding("warning", "no rules and no judge 'model': this supervisor does nothing")
        )
    return found


#: The keys that only the judge reads: without a judge ``model`` they do nothing.
_JUDGE_SETTINGS = (
    "criteria",
    "criteria_file",
    "every_n_iterations",
    "on_judge_error",
    "judge_timeout_s",
    "api_base",
    "api_key_env",
    "models",
    "models_file",
)


def _missing(path: Path) -> str:
    """Why ``path`` (not a regular file) cannot be read as one."""
    try:
        return "is not a regular file" if path.exists() else "does not exist"
    except OSError as exc:  # a name the OS refuses
        return f"cannot be read ({exc.strerror})"


def _model_warnings(spec: SupervisorSpec, at: LineOf) -> list[Finding]:
    try:
        path = spec.models_path()
    except SupervisorSpecError as exc:
        return [Finding("error", exc.problem, at("models_file"))]
    if path is not None and not is_file(path):
        return [
            Finding(
                "warning",
                f"models_file {named(spec.models_file)} {_missing(path)} ({shown_path(path)}); "
                "bare model names "
                "cannot be resolved through it",
                at("models_file"),
            )
        ]
    try:
        registry = spec.registry()
    except SupervisorSpecError as exc:
        return [Finding("error", str(exc), at("models_file"))]
    if isinstance(spec.model, str) and "/" not in spec.model and spec.model not in registry:
        names = shown_id(f"[{', '.join(map(named, sorted(registry)))}]")
        known = f" (it names {names})" if registry else ""
        return [
            Finding(
                "warning",
                f"judge model {named(spec.model)} is a bare name that is not in the models registry"
                f"{known}: add it under 'models' (or to models_file), or write it as litellm "
                "does, e.g. 'openai/gpt-4o-mini'",
                at("model"),
            )
        ]
    return _provider_warnings(spec, registry, at)


def _provider_warnings(spec: SupervisorSpec, registry: dict[str, Any], at: LineOf) -> list[Finding]:
    """A warning for a judge model whose ``provider/`` prefix is not one of litellm's (its
    first call would fail with "LLM Provider NOT provided"); none when litellm's list cannot
    be read."""
    if not isinstance(spec.model, str):
        return []
    entry = registry.get(spec.model) if "/" not in spec.model else None
    target = spec.model if entry is None else entry.model
    if not isinstance(target, str) or "/" not in target:
        return []
    provider = target.split("/", 1)[0]
    known = litellm_providers()
    if known is None or provider in known:
        return []
    via = "" if entry is None else f" (model {named(spec.model)} names {named(target)})"
    return [
        Finding(
            "warning",
            f"judge model {named(target)}{via}: {named(provider)} is not one of "
            "litellm's providers, so its first call will fail; write it as litellm does, "
            "e.g. 'openai/gpt-4o-mini' (an OpenAI-compatible server: 'openai/<model>' with "
            "api_base)",
            at("model"),
        )
    ]


@cache
def litellm_providers() -> frozenset[str] | None:
    """The providers litellm knows (``litellm.provider_list``: its ``LlmProviders``' values),
    read from its installed source: importing litellm takes seconds, and ``validate`` reads
    no network. None when litellm is not installed or its source does not read as expected."""
    try:
        found = importlib.util.find_spec("litellm")  # (finds it, does not import it)
        places = list(found.submodule_search_locations or ()) if found is not None else []
        if not places:
            return None
        tree = ast.parse((Path(places[0]) / "types" / "utils.py").read_text("utf-8"))
    except (ImportError, OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "LlmProviders":
            names = frozenset(
                item.value.value
                for item in node.body
                if isinstance(item, ast.Assign)
                and isinstance(item.value, ast.Constant)
                and isinstance(item.value.value, str)
            )
            return names or None
    return None


def validate_command(source: str, out: TextIO) -> int:
    """``tinyagents validate FILE.yaml``: print each finding; 1 if any is an error. A file
    name holding a character that is not printable is printed as its ``repr``."""
    path = Path(source)
    shown = shown_name(source)  # a terminal escape in the file's name is printed escaped
    if not is_file(path):
        print(f"{shown}: error: {not_a_file(path)}", file=out)
        return 1
    findings = validate_file(path)
    source = shown
    for finding in findings:
        print(finding.render(source), file=out)
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    if errors:
        print(
            f"{source}: {errors} error(s), {warnings} warning(s); fix the errors (see "
            "docs/supervisor.md for every key) and run 'tinyagents validate' again",
            file=out,
        )
        return 1
    print(f"{source}: ok ({warnings} warning(s))", file=out)
    return 0
