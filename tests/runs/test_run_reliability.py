"""The run tree and registry on bad or extreme input: deep trees, duplicate ids, cycles."""

from __future__ import annotations

import pytest

from tinyagents.errors import ConfigurationError
from tinyagents.runs import RunHandle, RunInfo, RunRegistry, RunTree, RunTreeNode

DEEP = 5_000


class _NoSubmit:
    async def submit(self, cmd: object) -> object:  # pragma: no cover - never called here
        raise AssertionError("not used")


def handle(run_id: str, parent: str | None = None) -> RunHandle:
    return RunHandle(RunInfo(run_id=run_id, parent_run_id=parent), submitter=_NoSubmit())  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def chain() -> RunRegistry:
    """r0 ── r1 ── r2 ── ... ── r4999"""
    reg = RunRegistry()
    reg.register(handle("r0"))
    for i in range(1, DEEP):
        reg.register(handle(f"r{i}", f"r{i - 1}"))
    return reg


def test_a_duplicate_run_id_is_a_typed_error_naming_the_run() -> None:
    reg = RunRegistry()
    reg.register(handle("r-7"))
    with pytest.raises(ConfigurationError, match="'r-7'") as raised:
        reg.register(handle("r-7"))
    assert "already registered" in str(raised.value)
    assert len(reg) == 1 and reg.get("r-7") is not None


def test_subtree_of_a_very_deep_chain(chain: RunRegistry) -> None:
    node = chain.tree.subtree("r0")
    assert node is not None
    ids = [n.info.run_id for n in node.walk()]
    assert ids == [f"r{i}" for i in range(DEEP)]
    assert chain.get(f"r{DEEP - 1}").info.depth == DEEP - 1  # type: ignore[union-attr]


def test_snapshot_of_a_very_deep_chain(chain: RunRegistry) -> None:
    node = chain.tree.subtree("r0")
    assert node is not None
    snap = node.snapshot()
    depth = 0
    while snap["children"]:
        assert snap["run_id"] == f"r{depth}"
        (snap,) = snap["children"]
        depth += 1
    assert (depth, snap["run_id"]) == (DEEP - 1, f"r{DEEP - 1}")


def test_queries_on_a_very_deep_chain(chain: RunRegistry) -> None:
    tree = chain.tree
    assert len(tree.descendants("r0")) == DEEP - 1
    assert len(tree.ancestors(f"r{DEEP - 1}")) == DEEP - 1
    assert tree.is_descendant(f"r{DEEP - 1}", of="r0")


def test_walk_and_snapshot_keep_sibling_order() -> None:
    leaf = RunTreeNode(info=RunInfo(run_id="a1"))
    node = RunTreeNode(
        info=RunInfo(run_id="root"),
        children=[
            RunTreeNode(info=RunInfo(run_id="a"), children=[leaf]),
            RunTreeNode(info=RunInfo(run_id="b")),
        ],
    )
    assert [n.info.run_id for n in node.walk()] == ["root", "a", "a1", "b"]
    snap = node.snapshot()
    assert [c["run_id"] for c in snap["children"]] == ["a", "b"]
    assert snap["children"][0]["children"][0]["run_id"] == "a1"
    assert snap["children"][1]["children"] == []


def test_a_parent_cycle_does_not_hang_the_tree() -> None:
    # Registered before their parents existed, two runs can name each other as parent.
    tree = RunTree()
    tree.add(RunInfo(run_id="x", parent_run_id="y"))
    tree.add(RunInfo(run_id="y", parent_run_id="x"))
    assert [a.run_id for a in tree.ancestors("x")] == ["y"]
    assert [d.run_id for d in tree.descendants("x")] == ["y"]
    node = tree.subtree("x")
    assert node is not None
    assert [n.info.run_id for n in node.walk()] == ["x", "y"]
