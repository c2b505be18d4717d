"""``RunRegistry``: every run of one runtime, by id, by thread and by tenant.

Finished runs do not stay forever. When every run of a tree has finished, the tree enters the
*retention window*: the most recently finished ``retain_finished`` runs (counted in whole
trees) stay, and with ``retain_finished_s`` none stays longer than that many seconds after its
tree finished. Older trees are released: their handles and tree nodes are dropped (the
runtime drops their steering books too). A tree that still has a live run is never released,
and neither is a run something still waits on (the ``busy`` set the runtime passes in).
"""

from __future__ import annotations

import builtins
import itertools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from tinyagents._record import Record, record
from tinyagents.errors import ConfigurationError, ThreadBusy
from tinyagents.protocol.commands import SteeringActor, sender_tenant
from tinyagents.protocol.ids import shown_repr
from tinyagents.protocol.state import RunStatus
from tinyagents.runs.handle import RunHandle
from tinyagents.runs.info import RunInfo, lookup_id
from tinyagents.runs.tree import RunTree

#: The run ids something still waits on (open commands, deferred commands), asked lazily.
Busy = Callable[[], set[str]]


@record(slots=True, eq=False, repr=False)
class _Finished(Record):
    """A tree all of whose runs have finished, waiting in the retention window."""

    at: float  # monotonic time its last run finished
    runs: int  # how many runs it held then


class RunRegistry:
    def __init__(
        self, *, retain_finished: int = 1000, retain_finished_s: float | None = None
    ) -> None:
        if not _count(retain_finished) or retain_finished < 0:
            raise ConfigurationError(
                f"retain_finished must be a whole number >= 0, got {shown_repr(retain_finished)}"
            )
        if retain_finished_s is not None and (
            isinstance(retain_finished_s, bool)
            or not isinstance(retain_finished_s, (int, float))
            or not retain_finished_s >= 0  # NaN too
        ):
            raise ConfigurationError(
                f"retain_finished_s must be a number of seconds >= 0 or None, "
                f"got {shown_repr(retain_finished_s)}"
            )
        self.tree = RunTree()
        self.retain_finished = retain_finished
        self.retain_finished_s = retain_finished_s
        self._handles: dict[str, RunHandle] = {}
        #: The runs kept of each thread, each with its registration number (the order of
        #: ``_open``); shrinks as they are released.
        self._threads: dict[str, dict[str, int]] = {}
        self._registered = itertools.count()
        #: The unfinished runs of each thread, oldest registered first: a turn's start looks
        #: at these alone (``for_thread``), not at every finished run kept on the thread.
        #: A run leaves as it finishes (``finished``), comes back if reopened (``reopen``).
        self._open: dict[str, dict[str, RunHandle]] = {}
        #: A session turn's hold on its thread, by (tenant, thread): the holding run's info
        #: (free again once it has finished: a turn reopened by steering holds it again).
        self._held: dict[tuple[str, str], RunInfo] = {}
        #: Runs of a thread that took it and are not registered yet, by (tenant, thread).
        self._starting: dict[tuple[str, str], set[str]] = {}
        #: The graph runs among them (a graph thread has one writer: ``take_thread``).
        self._graphs_starting: dict[tuple[str, str], set[str]] = {}
        self._listeners: list[Callable[[RunHandle], None]] = []
        #: Unfinished runs per root (a dict of ids as a set: a dict of strings is not tracked
        #: by the cyclic collector, a set always is, and a runtime may hold thousands of
        #: live trees): a tree enters the window when its dict empties.
        self._live: dict[str, dict[str, None]] = {}
        #: Finished trees by root, oldest first, and how many runs they hold together.
        self._finished: OrderedDict[str, _Finished] = OrderedDict()
        self._retained = 0

    def register(self, handle: RunHandle) -> None:
        info = handle.info
        if info.run_id in self._handles:
            raise ConfigurationError(
                f"run {info.run_id!r} is already registered in this runtime; "
                "give each run its own run_id (or leave it unset for a fresh one)"
            )
        if info.parent_run_id is not None:
            parent = self.tree.get(info.parent_run_id)
            if parent is not None:
                check_parent_tenant(info.run_id, info.tenant_id, parent)
                info.root_run_id = parent.root_run_id
                info.depth = parent.depth + 1
        self.tree.add(info)
        self._handles[info.run_id] = handle
        if info.thread_id is not None:
            self._threads.setdefault(info.thread_id, {})[info.run_id] = next(self._registered)
            if not info.status.finished:
                self._open.setdefault(info.thread_id, {})[info.run_id] = handle
            self._started(info)
        if not info.status.finished:
            self._live.setdefault(info.root_run_id, {})[info.run_id] = None
            self._unqueue(info.root_run_id)  # a new run in a finished tree: live again
        for listener in self._listeners:
            listener(handle)

    def on_register(self, listener: Callable[[RunHandle], None]) -> None:
        self._listeners.append(listener)

    def handles(self) -> builtins.list[RunHandle]:
        return builtins.list(self._handles.values())

    def get(self, run_id: str) -> RunHandle | None:
        """The handle of run ``run_id`` while this registry holds it, else None. A ``run_id``
        that is no text is an ``ArgumentError`` (as ``Runtime.forget``'s): ``5`` found no run
        and ``[1]`` was a bare ``TypeError``."""
        if not isinstance(run_id, str):
            lookup_id(run_id)  # raises: no run id is anything but text
        return self._handles.get(run_id)

    def supervisor_spec_above(self, handle: RunHandle) -> Any:
        """The supervisor spec of the nearest run above ``handle`` whose driver gives one
        (``RunDriver.supervisor_spec``: a graph compiled with ``supervisor=...``), or None: it
        watches the agent runs started inside that run (in sub-graphs too) and their
        sub-agents."""
        parent_id = handle.info.parent_run_id
        while parent_id is not None:
            parent = self._handles.get(parent_id)
            if parent is None:
                return None
            spec = parent.driver.supervisor_spec()
            if spec is not None:
                return spec
            parent_id = parent.info.parent_run_id
        return None

    def supervisor_spec_for(self, handle: RunHandle) -> Any:
        """The supervisor spec that watches ``handle``'s run short of the runtime's own: its
        own (an agent given ``supervisor=``), else the nearest above it
        (``supervisor_spec_above``); None for a run no supervisor watches (a graph run: its
        driver's ``watched_by``) or one given none (the runtime's spec then watches it, if it
        has one). One lookup for the runtime (whether to make its supervisor) and the
        supervisor (which spec to watch by): two copies of it could tell them apart."""
        watched, own = handle.driver.watched_by()
        if not watched:
            return None
        return own if own is not None else self.supervisor_spec_above(handle)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._handles

    def __len__(self) -> int:
        return len(self._handles)

    def for_thread(self, thread_id: str, tenant_id: str | None = None) -> RunHandle | None:
        """The newest run on the thread that has not finished, if any (of ``tenant_id``'s
        runs only, when given: thread ids are the tenants' own, two may use the same one)."""
        open_runs = self._open.get(thread_id)
        if open_runs:
            for handle in reversed(open_runs.values()):
                if not handle.status.finished and (
                    tenant_id is None or handle.info.tenant_id == tenant_id
                ):
                    return handle
        return None

    def reopen(self, handle: RunHandle) -> None:
        """Run ``handle``, finished, takes another turn (END_OF_TURN steering, a graph
        run continued under its id): it is running again, and its thread's writer if it
        is the newest unfinished run of it."""
        handle.reopen()
        thread_id = handle.info.thread_id
        if thread_id is None or handle.run_id not in self._handles:
            return
        open_runs = self._open.setdefault(thread_id, {})
        open_runs[handle.run_id] = handle
        order = self._threads[thread_id]
        if len(open_runs) > 1:  # back in its place: the order the runs were registered in
            self._open[thread_id] = dict(sorted(open_runs.items(), key=lambda i: order[i[0]]))

    def take_thread(self, info: RunInfo, *, hold: bool, started: bool = False) -> None:
        """Run ``info`` (of a thread) is starting: ``ThreadBusy`` if a session's turn holds
        its thread (of its tenant: thread ids are each tenant's own). ``hold`` (a session's
        turn): it holds the thread itself, so ``ThreadBusy`` too if any other run of the thread
        has not finished, or is starting. Taken before the start awaits anything, so of two
        starts at once exactly one gets the thread; ``let_go_of_thread`` if the start fails.
        ``started``: a registered run taking it again (reopened for another turn). A graph
        run (``kind="graph"``) is the single writer of its thread: ``ThreadBusy`` too if
        another graph run of the thread has not finished, or is starting, as a graph run of
        another runtime on a durable store is refused (``RunHost.hold_thread``)."""
        thread_id = info.thread_id
        assert thread_id is not None
        key = (info.tenant_id, thread_id)
        holder = self._held.get(key)
        if holder is not None and holder.run_id != info.run_id and not holder.status.finished:
            raise ThreadBusy(thread_id, held_by=holder.run_id)
        if info.kind == "graph":
            graph_writer = self._graph_writer(key, info.run_id)
            if graph_writer is not None:
                raise ThreadBusy(thread_id, held_by=graph_writer)
        starting = self._starting.get(key)
        if hold:
            if starting:
                raise ThreadBusy(thread_id, held_by=min(starting))
            writer = self.for_thread(thread_id, info.tenant_id)
            if writer is not None:
                raise ThreadBusy(thread_id, held_by=writer.run_id)
            self._held[key] = info
        if not started:
            self._starting.setdefault(key, set()).add(info.run_id)
            if info.kind == "graph":
                self._graphs_starting.setdefault(key, set()).add(info.run_id)

    def let_go_of_thread(self, info: RunInfo) -> None:
        """The start of run ``info`` failed: what it took of its thread is free again."""
        self._started(info)
        key = (info.tenant_id, info.thread_id or "")
        holder = self._held.get(key)
        if holder is not None and holder.run_id == info.run_id:
            del self._held[key]

    def _graph_writer(self, key: tuple[str, str], run_id: str) -> str | None:
        """The id of a graph run other than ``run_id`` writing thread ``key`` (unfinished and
        not ended at rest on an interrupt, or starting), if any. A run waiting on its
        interrupt (``wait_on_interrupt=True``) is a writer: a command may resume it."""
        starting = self._graphs_starting.get(key)
        if starting:
            others = starting - {run_id}
            if others:
                return min(others)
        for handle in (self._open.get(key[1]) or {}).values():
            info = handle.info
            if (
                info.kind == "graph"
                and info.run_id != run_id
                and info.tenant_id == key[0]
                and not handle.status.finished
                and not (handle.status is RunStatus.INTERRUPTED and handle.done)
            ):  # one that ended at rest on an interrupt writes nothing; one waiting there may
                return info.run_id
        return None

    def _started(self, info: RunInfo) -> None:
        key = (info.tenant_id, info.thread_id or "")
        graphs = self._graphs_starting.get(key)
        if graphs is not None:
            graphs.discard(info.run_id)
            if not graphs:
                del self._graphs_starting[key]
        starting = self._starting.get(key)
        if starting is not None:
            starting.discard(info.run_id)
            if not starting:
                del self._starting[key]

    def thread_tenant(self, actor: SteeringActor) -> str | None:
        """The tenant among whose runs a thread command sent by ``actor`` resolves (thread
        ids are each tenant's own: two may use the same one): a human's own; for an actor
        that acts from a run (a parent agent, a graph supervisor, a run's middleware), that
        run's tenant; None for a runtime-level one, or an actor whose run is not in the tree.
        The router and the Redis control plane look a thread's run up by it alike."""
        tenant = sender_tenant(actor)
        if tenant is None:
            run_id = getattr(actor, "run_id", None)
            info = self.tree.get(run_id) if run_id is not None else None
            if info is not None:
                return info.tenant_id
        return tenant

    def list(self, tenant_id: str | None = None) -> list[RunInfo]:
        """The runs in memory, of ``tenant_id`` (text; another type is an ``ArgumentError``,
        where it listed none) or of every tenant."""
        if tenant_id is not None and not isinstance(tenant_id, str):
            lookup_id(tenant_id, "tenant_id", "a tenant id")
        infos = [h.info for h in self._handles.values()]
        return infos if tenant_id is None else [i for i in infos if i.tenant_id == tenant_id]

    def snapshot(self, tenant_id: str | None = None) -> builtins.list[dict[str, Any]]:
        return [info.snapshot() for info in self.list(tenant_id)]

    # ------------------------------------------------------------------ retention

    @property
    def retained(self) -> int:
        """How many runs the finished trees in the retention window hold."""
        return self._retained

    def finished(self, handle: RunHandle, now: float) -> None:
        """``handle``'s run has finished: if it was its tree's last live run, the tree enters
        the retention window (as its newest entry)."""
        info = handle.info
        if info.thread_id is not None:
            self._close_on_thread(info)
        root = info.root_run_id
        live = self._live.get(root)
        if live is None:
            # A run of a finished tree took another turn (END_OF_TURN steering) and ended
            # again. Swept from the window meanwhile, its tree was never released: back in.
            if (
                root in self.tree
                and root not in self._finished
                and all(i.status.finished for i in self._subtree(root))
            ):
                self._enter_window(root, now)
            return
        live.pop(info.run_id, None)
        if live:
            return
        del self._live[root]
        if root in self.tree:
            self._unqueue(root)
            self._enter_window(root, now)

    def _close_on_thread(self, info: RunInfo) -> None:
        """Run ``info`` finished or was released: no longer one of its thread's open runs."""
        open_runs = self._open.get(info.thread_id or "")
        if open_runs is not None and open_runs.pop(info.run_id, None) is not None:
            if not open_runs:
                del self._open[info.thread_id or ""]

    def _enter_window(self, root: str, now: float) -> None:
        runs = 1 + len(self.tree.descendants(root))
        self._finished[root] = _Finished(now, runs)
        self._retained += runs

    def release_due(self, now: float, busy: Busy) -> builtins.list[RunInfo]:
        """Release the finished trees past the retention window; returns the runs released."""
        released: builtins.list[RunInfo] = []
        held: set[str] | None = None
        for _ in range(len(self._finished)):
            root, entry = next(iter(self._finished.items()))
            too_old = self.retain_finished_s is not None and now - entry.at > self.retain_finished_s
            if self._retained <= self.retain_finished and not too_old:
                break
            self._unqueue(root)
            infos = self._subtree(root)
            if held is None:
                held = busy()
            if not all(i.status.finished for i in infos):
                continue  # a run was reopened: the tree re-enters the window when it ends
            if any(i.run_id in held for i in infos):
                # Something still waits on a run of it: try again after the newer trees.
                self._finished[root] = entry
                self._retained += entry.runs
                continue
            self._release(infos)
            released.extend(infos)
        return released

    def forget(self, run_id: str, busy: Busy) -> builtins.list[RunInfo]:
        """Release a finished run and its subtree now (a no-op for an unknown id)."""
        if run_id not in self._handles:
            return []
        infos = self._subtree(run_id)
        running = [i.run_id for i in infos if not i.status.finished]
        if running:
            raise ConfigurationError(
                f"cannot forget run {run_id}: {', '.join(running[:5])} "
                f"{'is' if len(running) == 1 else 'are'} still running; "
                "wait for its result (or cancel it) first"
            )
        held = busy()
        waited = [i.run_id for i in infos if i.run_id in held]
        if waited:
            raise ConfigurationError(
                f"cannot forget run {run_id}: commands are still open for {', '.join(waited[:5])}"
            )
        self._unqueue(run_id)
        entry = self._finished.get(infos[0].root_run_id)
        if entry is not None:  # a subtree of a finished tree still in the window
            entry.runs -= len(infos)
            self._retained -= len(infos)
        self._release(infos)
        return infos

    def _subtree(self, run_id: str) -> builtins.list[RunInfo]:
        info = self.tree.get(run_id)
        return [] if info is None else [info, *self.tree.descendants(run_id)]

    def _unqueue(self, root: str) -> None:
        entry = self._finished.pop(root, None)
        if entry is not None:
            self._retained -= entry.runs

    def _release(self, infos: builtins.list[RunInfo]) -> None:
        self.tree.remove(i.run_id for i in infos)
        for info in infos:
            self._handles.pop(info.run_id, None)
            if info.thread_id is not None:
                runs = self._threads.get(info.thread_id)
                if runs is not None and runs.pop(info.run_id, None) is not None and not runs:
                    del self._threads[info.thread_id]
                self._close_on_thread(info)
                key = (info.tenant_id, info.thread_id)
                holder = self._held.get(key)
                if holder is not None and holder.run_id == info.run_id:
                    del self._held[key]


def _count(value: object) -> bool:
    """Whether ``value`` is a whole number (an int, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def parent_run_id(parent: object) -> str | None:
    """The run id a ``parent=`` argument names: a ``RunHandle``'s, or the id given as text
    (None: no parent). Anything else is a ``ConfigurationError``: an int was read as a
    handle, and failed as an ``AttributeError`` on its ``run_id``."""
    if parent is None or isinstance(parent, str):
        return parent
    if isinstance(parent, RunHandle):
        return parent.run_id
    raise ConfigurationError(
        f"parent= takes a RunHandle or a run id (text), got {type(parent).__name__} "
        f"{parent!r:.80}: the handle rt.start returned, or its run_id"
    )


def check_parent_open(parent: RunInfo) -> None:
    """Refuse a child of ``parent`` once it has ended: nothing would wait for the child, which
    would run on unseen (and its usage roll up into a run that is over)."""
    if parent.status.finished:
        raise ConfigurationError(
            f"parent run {parent.run_id} has ended ({parent.status.value}): a child run "
            "can only start under a run that has not finished"
        )


def check_parent_tenant(run_id: str, tenant_id: str, parent: RunInfo) -> None:
    """Refuse a run of ``tenant_id`` below ``parent`` of another tenant: tenants never share
    a tree (a human of the child's tenant could steer — cancel, narrow — work the parent's
    tenant started)."""
    if tenant_id != parent.tenant_id:
        raise ConfigurationError(
            f"run {run_id!r} of tenant {tenant_id!r} cannot be a child of run "
            f"{parent.run_id!r} of tenant {parent.tenant_id!r}: a sub-run belongs to its "
            "parent's tenant (leave tenant_id unset to inherit it)"
        )
