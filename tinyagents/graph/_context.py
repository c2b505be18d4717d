"""The running task, found through a ``ContextVar`` so ``interrupt()`` needs no argument.

Each task of a superstep runs in its own ``asyncio`` task (or inline, for a one-task step),
so the variable is always the scope of the node that called ``interrupt()``.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from tinyagents.errors import GraphError
from tinyagents.graph.interrupts import Interrupt


class NodeInterrupt(BaseException):
    """Raised by ``interrupt()`` to unwind the node.

    A ``BaseException`` on purpose: a node's ``except Exception`` must not swallow the pause,
    and a retry policy must not retry it.
    """

    def __init__(self, interrupts: list[Interrupt]) -> None:
        super().__init__(f"{len(interrupts)} interrupt(s)")
        self.interrupts = interrupts


class ParentCommand(BaseException):
    """Carries a ``Command(graph=Command.PARENT)`` out of a sub-graph to its parent task."""

    def __init__(self, command: Any) -> None:
        super().__init__("command for the parent graph")
        self.command = command


def stable_id(prefix: str, *parts: object) -> str:
    """A short deterministic id: the same parts give the same id in every process."""
    raw = "\x1f".join(map(str, parts)).encode()
    return f"{prefix}{hashlib.blake2b(raw, digest_size=8).hexdigest()}"


@dataclass(slots=True, kw_only=True)
class TaskScope:
    """What ``interrupt()`` needs to know about the task that is running."""

    task: Any  # tasks.Task: its id is computed only if an interrupt needs it
    ns: str
    resume: dict[str, Any]
    checkpointed: bool
    counter: int = 0

    def interrupt(self, value: Any) -> Any:
        index = self.counter
        self.counter += 1
        task = self.task
        interrupt_id = stable_id("i-", task.id, index)
        if interrupt_id in self.resume:
            return self.resume[interrupt_id]
        if not self.checkpointed:
            raise GraphError(
                f"interrupt() in node {task.node!r} needs a checkpointer to resume from: "
                "compile(checkpointer=MemoryCheckpointer()) or a SqliteCheckpointer"
            )
        raise NodeInterrupt(
            [
                Interrupt(
                    id=interrupt_id,
                    value=value,
                    task_id=task.id,
                    node=task.node,
                    ns=self.ns,
                    index=index,
                )
            ]
        )


class _Unsaved:
    """The scope of every node of a run without checkpointer: nothing to resume from."""

    __slots__ = ()

    def interrupt(self, value: Any) -> Any:
        raise GraphError(
            "interrupt() needs a checkpointer to resume from: "
            "compile(checkpointer=MemoryCheckpointer()) or a SqliteCheckpointer"
        )


UNSAVED: Any = _Unsaved()

_scope: ContextVar[TaskScope | None] = ContextVar("tinyagents_graph_task", default=None)


def current_scope() -> TaskScope:
    scope = _scope.get()
    if scope is None:
        raise GraphError("interrupt() can only be called inside a running graph node")
    return scope


def set_scope(scope: TaskScope | None) -> Any:
    return _scope.set(scope)


def reset_scope(token: Any) -> None:
    _scope.reset(token)
