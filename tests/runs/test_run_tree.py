"""Run tree queries, the registry (tenants, threads, snapshots), limits and usage."""

from __future__ import annotations

import json

import pytest

from tinyagents.errors import ConfigurationError
from tinyagents.runs import RunHandle, RunInfo, RunLimits, RunRegistry, RunStatus, RunTree, RunUsage
from tinyagents.testkit import EPOCH, FakeClock, use_clock


class _NoSubmit:
    async def submit(self, cmd: object) -> object:  # pragma: no cover - never called here
        raise AssertionError("not used")


def handle(run_id: str, parent: str | None = None, **info: object) -> RunHandle:
    return RunHandle(RunInfo(run_id=run_id, parent_run_id=parent, **info), submitter=_NoSubmit())  # type: ignore[arg-type]


@pytest.fixture
def registry() -> RunRegistry:
    """root ─┬─ a ─┬─ a1 ── a1x      (tenant acme)
    │     └─ a2
    └─ b
    g                             (tenant globex)"""
    reg = RunRegistry()
    for run_id, parent in [
        ("root", None),
        ("a", "root"),
        ("b", "root"),
        ("a1", "a"),
        ("a2", "a"),
        ("a1x", "a1"),
        ("g", None),
    ]:
        reg.register(handle(run_id, parent, tenant_id="acme" if run_id != "g" else "globex"))
    return reg


def ids(infos: list[RunInfo]) -> list[str]:
    return [i.run_id for i in infos]


def test_ancestors_parent_first(registry: RunRegistry) -> None:
    tree = registry.tree
    assert ids(tree.ancestors("a1x")) == ["a1", "a", "root"]
    assert tree.ancestors("root") == []
    assert tree.ancestors("nobody") == []


def test_descendants_breadth_first(registry: RunRegistry) -> None:
    tree = registry.tree
    assert ids(tree.descendants("root")) == ["a", "b", "a1", "a2", "a1x"]
    assert ids(tree.descendants("a1")) == ["a1x"]
    assert tree.descendants("b") == []


def test_depth_siblings_children_and_descent(registry: RunRegistry) -> None:
    tree = registry.tree
    assert [tree.depth(r) for r in ["root", "a", "a1", "a1x"]] == [0, 1, 2, 3]
    assert [registry.get(r).info.depth for r in ["root", "a", "a1", "a1x"]] == [0, 1, 2, 3]  # type: ignore[union-attr]
    assert {registry.get(r).info.root_run_id for r in ["a", "b", "a1x"]} == {"root"}  # type: ignore[union-attr]
    assert ids(tree.siblings("a1")) == ["a2"]
    assert ids(tree.siblings("a")) == ["b"]
    assert tree.siblings("root") == []
    assert ids(tree.children("a")) == ["a1", "a2"]
    assert tree.is_descendant("a1x", of="root")
    assert tree.is_descendant("a1x", of="a")
    assert not tree.is_descendant("a", of="a1x")
    assert not tree.is_descendant("a2", of="a1")
    assert not tree.is_descendant("root", of="root")
    assert "a1" in tree and "zz" not in tree


def test_subtree_walk_and_json_snapshot(registry: RunRegistry) -> None:
    node = registry.tree.subtree("a")
    assert node is not None
    assert [n.info.run_id for n in node.walk()] == ["a", "a1", "a1x", "a2"]
    snap = json.loads(json.dumps(node.snapshot()))
    assert snap["run_id"] == "a"
    assert [c["run_id"] for c in snap["children"]] == ["a1", "a2"]
    assert snap["children"][0]["children"][0]["run_id"] == "a1x"
    assert registry.tree.subtree("nobody") is None


def test_registry_lists_and_snapshots_by_tenant(registry: RunRegistry) -> None:
    assert ids(registry.list()) == ["root", "a", "b", "a1", "a2", "a1x", "g"]
    assert ids(registry.list(tenant_id="globex")) == ["g"]
    assert registry.list(tenant_id="initech") == []
    snaps = registry.snapshot(tenant_id="acme")
    assert [s["run_id"] for s in snaps] == ["root", "a", "b", "a1", "a2", "a1x"]
    assert json.loads(json.dumps(snaps)) == snaps
    assert len(registry) == 7 and "a" in registry and registry.get("zz") is None


def test_a_child_of_another_tenants_run_is_refused(registry: RunRegistry) -> None:
    """Tenants never share a tree: a human of the child's tenant could have cancelled or
    narrowed work the parent's tenant started."""
    with pytest.raises(ConfigurationError, match="belongs to its parent's tenant"):
        registry.register(handle("intruder", "a", tenant_id="globex"))
    assert "intruder" not in registry and registry.tree.children("a") == [
        registry.get(r).info
        for r in ("a1", "a2")  # type: ignore[union-attr]
    ]


def test_registering_twice_is_refused(registry: RunRegistry) -> None:
    with pytest.raises(ConfigurationError, match="already registered"):
        registry.register(handle("a"))


def test_register_listeners_see_each_new_run() -> None:
    reg = RunRegistry()
    seen: list[str] = []
    reg.on_register(lambda h: seen.append(h.run_id))
    reg.register(handle("x"))
    reg.register(handle("y", "x"))
    assert seen == ["x", "y"]


def test_orphan_keeps_itself_as_root() -> None:
    reg = RunRegistry()
    reg.register(handle("orphan", "unknown-parent"))
    info = reg.get("orphan").info  # type: ignore[union-attr]
    assert (info.root_run_id, info.depth) == ("orphan", 0)


def test_thread_resolves_to_the_newest_unfinished_run() -> None:
    reg = RunRegistry()
    first, second = handle("t-a", thread_id="t"), handle("t-b", thread_id="t")
    reg.register(first)
    reg.register(second)
    assert reg.for_thread("t") is second
    second.info.status = RunStatus.COMPLETED
    assert reg.for_thread("t") is first
    first.info.status = RunStatus.INTERRUPTED  # an interrupted graph can still resume
    assert reg.for_thread("t") is first
    first.info.status = RunStatus.FAILED
    assert reg.for_thread("t") is None
    assert reg.for_thread("unknown") is None


def test_run_info_snapshot_is_json_safe_and_complete() -> None:
    info = RunInfo(
        run_id="r-1",
        tools=frozenset({"b", "a"}),
        models=("m-2", "m-1"),
        limits=RunLimits(max_model_calls=3),
        usage=RunUsage(model_calls=1, input_tokens=5, output_tokens=7),
        created_at=EPOCH,
    )
    snap = info.snapshot()
    assert json.loads(json.dumps(snap)) == snap
    assert snap["tools"] == ["a", "b"]
    assert snap["models"] == ["m-2", "m-1"]
    assert snap["limits"]["max_model_calls"] == 3
    assert snap["usage"]["model_calls"] == 1
    assert snap["status"] == "running"
    assert snap["root_run_id"] == "r-1"
    assert snap["created_at"] == "2025-01-01T00:00:00+00:00"


def test_finished_statuses() -> None:
    assert {s for s in RunStatus if s.finished} == {
        RunStatus.COMPLETED,
        RunStatus.CANCELLED,
        RunStatus.ABORTED,
        RunStatus.LIMIT_EXCEEDED,
        RunStatus.FAILED,
    }


def test_remaining_budget_counts_usage_and_time() -> None:
    clock = FakeClock()
    limits = RunLimits(max_model_calls=10, max_tool_calls=None, max_tokens=100, deadline_s=30)
    with use_clock(clock):
        info = RunInfo(run_id="r", limits=limits)
        info.usage = RunUsage(
            model_calls=4, input_tokens=60, output_tokens=50, started_at=clock.monotonic()
        )
        clock.advance(12)
        assert info.remaining() == {
            "max_model_calls": 6,
            "max_tool_calls": None,
            "max_tokens": 0,  # never negative
            "max_input_tokens": None,
            "max_output_tokens": None,
            "max_input_tokens_per_request": None,
            "max_cost": None,
            "deadline_s": 18.0,
        }
        clock.advance(100)
        assert info.remaining()["deadline_s"] == 0.0
    assert info.usage.total_tokens == 110


def test_limits_bounded_by_a_parents_remaining_budget() -> None:
    mine = RunLimits(max_model_calls=10, max_tokens=None, deadline_s=5)
    bounded = mine.bounded_by(
        {"max_model_calls": 4, "max_tool_calls": None, "max_tokens": 50, "deadline_s": 9}
    )
    assert (bounded.max_model_calls, bounded.max_tokens, bounded.deadline_s) == (4, 50, 5)
    assert mine.bounded_by({"max_model_calls": None}) is mine
    with pytest.raises(ValueError):
        RunLimits(max_model_calls=0)


def test_run_tree_alone() -> None:
    tree = RunTree()
    tree.add(RunInfo(run_id="p"))
    tree.add(RunInfo(run_id="c", parent_run_id="p"))
    assert tree.get("c") is not None and ids(tree.children("p")) == ["c"]
