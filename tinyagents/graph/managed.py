"""The managed loop: a graph run inside a ``Runtime``, one superstep at a time.

At each boundary between supersteps it takes the steering commands that are due and lowers
them (``lowering.py``); then it steps the run (``GraphRun.next``) and emits what the
step did (``run_events.py``). What happens inside a step for a managed run — each task's
entry in the run tree — is the run's ``TaskHooks`` (``task_entries.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyagents.errors import RunCancelled
from tinyagents.graph._context import reset_scope, set_scope

if TYPE_CHECKING:
    from tinyagents.graph.executor import GraphRun
    from tinyagents.graph.lowering import GraphSteering
    from tinyagents.graph.run_events import GraphEvents
    from tinyagents.graph.types import GraphResult


async def drive(run: GraphRun, steering: GraphSteering, events: GraphEvents) -> GraphResult:
    """Run ``run`` to its end, steered: a failing node, or a command that ends the run (a
    cancel), gives a ``"failed"`` result with ``.error`` (as ``GraphRun.outcome``)."""
    token = set_scope(run.unsaved_scope()) if run.checkpointer is None else None
    try:
        # the commands that waited for the run, before its first step (none for a run that
        # could not read or save its thread: it fails at once)
        if run.failure is None:
            if steering.restored is not None:  # continued, held by its operator's pause
                await steering.hold_restored(run)
            await steering.boundary(run)
        while True:
            step = await run.advance()
            if isinstance(step.error, RunCancelled) and run.cancelling:  # immediate cancel
                stopped = step.error
                step.error = await steering.settle_cancel(run, stopped)
                if step.error is not stopped:  # the tasks it left behind, if any
                    for note in getattr(stopped, "__notes__", ()):
                        step.error.add_note(note)
                assert step.result is not None
                step.result.error = step.error
            if run.stream is not None:  # attached at any time (handle.stream())
                run.stream.step(run, step)
            result = step.result
            if result is None:  # "applied"
                events.stepped(run, step.tasks)
                if not run.breaks_after(step.tasks):
                    await steering.boundary(run)  # between supersteps
                continue
            if result.status != "interrupted" or not result.interrupts:
                return result  # completed, failed, or stopped at a breakpoint
            events.interrupted(run, result)
            while True:
                if not await steering.at_rest(run):
                    return result
                # it goes on, if at all, as the thread continued would (LangGraph's resume
                # reads it back): with no value that no checkpoint keeps (``UntrackedValue``),
                # and the commands that move it on see the state so; a wake that moves it
                # on nowhere reads nothing back, and keeps them
                dropped = run.forget_untracked()
                try:
                    await steering.boundary(run)  # the commands that woke it: answers, ...
                finally:
                    if not steering.stirred:  # (a run cancel too: its result holds them)
                        run.keep_untracked(dropped)
                if steering.stirred:
                    break
                # only paused and let go of (a pause of its own, or one passed down): it never
                # went on from its interrupts, and rests on them again (no step, no question
                # announced again)
            # woken by a command, it goes on as the thread continued with that command would:
            # past the breakpoint of its first step (LangGraph's resuming run)
            events.resumed(run)
            run.continues = True
    except Exception as exc:  # lowering ended the run (a cancel), or a step failed to save
        result = run.result("failed")
        result.error = exc
        return result
    finally:
        if token is not None:
            reset_scope(token)


__all__ = ["drive"]
