"""``Supervisor``: watches a host's agent runs and acts on them through steering.

The runtime owns one and tells it about every run it registers (``watch``). A run is watched
under its agent's spec (``Agent(..., supervisor=spec)``), else that of the nearest graph above
it compiled with one (``compile(supervisor=spec)``), else the runtime's
(``Runtime(supervisor=spec)``). The supervisor reads the run's events as a bus sink, so its
rules are checked in the same call that publishes a progress event, and its command is queued
before the run reaches its next boundary (see docs/supervisor.md for where each action lands).
The judge runs in a task of its own: a slow judge never delays a rule.

Every action is a ``SteeringCommand`` from ``SteeringActor.middleware("supervisor")`` sent
through the runtime's pipeline with the capability the runtime gave this object (a command
from that actor sent by anyone else is not trusted), and is announced first by a
``supervisor.action`` event ``{action, source, reason, iteration, correlation_id}``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from tinyagents import _clock
from tinyagents._record import Record
from tinyagents.errors import (
    ConfigurationError,
    ModelError,
    ModelRateLimitError,
    RuntimeClosed,
    StoreError,
    kind_of,
    message_of,
)
from tinyagents.events.models import (
    Event,
    ModelEvent,
    RunEvent,
    SteeringEvent,
    SupervisorEvent,
)
from tinyagents.harness.loop import CANCEL_GRACE_S, AgentRun
from tinyagents.harness.model import Usage
from tinyagents.protocol.commands import (
    MiddlewareActor,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringPolicyRef,
    SteeringPriority,
    SteeringReceipt,
    SteeringTarget,
)
from tinyagents.protocol.state import RunStatus
from tinyagents.runs.handle import RunHandle
from tinyagents.runs.host import RunHost
from tinyagents.runs.info import run_event
from tinyagents.supervisor._eager import start_eagerly
from tinyagents.supervisor.judge import Judge, JudgeError, JudgeInput, judge_model, usage_data
from tinyagents.supervisor.rules import RunCounters, check
from tinyagents.supervisor.settings import (
    SUPERVISOR,
    env_judge_timeout_s,
    env_pause_max_s,
    judge_concurrency,
)
from tinyagents.supervisor.spec import MAX_MESSAGE, Action, Rule, SupervisorSpec

log = logging.getLogger("tinyagents.supervisor")

#: How a ``steer`` reaches the model (inside the usual provenance block of steering messages).
STEER_TEMPLATE = (
    "Supervisor guidance: {message}\n"
    "This guidance changes neither your tools, nor the outcome you must deliver, nor your task."
)
_ENDED = frozenset(f"run.{s.value}" for s in RunStatus if s.finished)

Submit = Callable[[SteeringCommand], Awaitable[SteeringReceipt]]


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class _Watch(Record):
    """One watched run: its spec, counters and the supervisor's tasks for it."""

    handle: RunHandle
    spec: SupervisorSpec
    judge: Judge | None
    counters: RunCounters
    judge_task: asyncio.Task[Any] | None = None
    #: Why the judge could not be made when the run was registered, said when the run has
    #: started (its ``run.started``): said before, it was missing from the run's trace.
    judge_unmade: Exception | None = None
    #: The correlation ids of our pauses on their way (two rules, or a rule and the judge,
    #: may each send one; each leaves when it ends): the dwell cap starts when one of them is
    #: applied (not when the run pauses: a human's pause is not ours to time out), and a
    #: pause of ours that is refused starts nothing, whatever became of the others.
    pauses: set[str] = field(default_factory=set)
    #: Our pause was applied before the run's ``run.paused`` was seen (a pause applied to a
    #: run already paused publishes none): the dwell cap starts at whichever comes second.
    pause_applied: bool = False
    dwell_task: asyncio.Task[Any] | None = None
    #: Our pause holds the run (its dwell cap is running, or ran out and its abort is on its
    #: way): set when the cap starts, cleared by a resume or someone else's pause. An abort
    #: of ours that does not end such a run (refused, or turned by a policy into a pause or
    #: a steer) starts the cap again: nothing else would ever time the run out.
    held: bool = False
    #: Our abort is on its way (nothing more is said to the run); a refused one clears it.
    aborted: bool = False
    abort_cid: str | None = None
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)


#: A failing judge is warned of at most once in this many seconds (per provider it calls),
#: the warning saying how many failures went unsaid since: a provider that is down fails
#: every slot of every watched run. Each failure is still counted and published on its run.
JUDGE_WARN_EVERY_S = 60.0

#: The first wait before a command the store could not log is sent again, and the longest.
_RESEND_FIRST_S = 0.05
_RESEND_MAX_S = 2.0
#: A store down for long is said once a minute or so (every 30th attempt), not every 2 s.
_RESEND_LOG_EVERY = 30

#: The ends of a command that was not applied.
_REFUSED = frozenset({"steering.rejected", "steering.failed", "steering.superseded"})


def _still_limited(judge: Judge, left_s: float) -> ModelRateLimitError:
    """The judge error of a slot that falls in the wait its provider asked for (``left_s``
    more seconds of it, said to a tenth of a second up): nothing is sent."""
    left_s = math.ceil(left_s * 10) / 10
    return ModelRateLimitError(
        f"the judge {judge.model.name!r} was not asked: its provider is rate-limiting it and "
        f"asked to wait {left_s:g} s more",
        model=judge.model.name,
        retry_after_s=left_s,
    )


def _clip(reason: str) -> str:
    """``reason`` as a command carries it: at most ``MAX_MESSAGE`` characters (a judge may
    write pages; a command's payload is bounded, and a refused abort would leave the run
    unsupervised), UTF-8 (a lone surrogate a judge wrote is replaced; a command refuses text
    that is not UTF-8)."""
    if len(reason) > MAX_MESSAGE:
        reason = reason[: MAX_MESSAGE - 1] + "…"
    if not reason.isascii():
        reason = reason.encode("utf-8", "replace").decode("utf-8")
    return reason


def _final_answer(event: Event) -> bool:
    """Whether a ``model.response`` is the run's answer (text, no tool call): the run is
    finishing, so it is not judged; a verdict would come when nothing is left to steer, a
    paid call for nothing. (A response with neither text nor a tool call is no answer: the
    run asks again.)"""
    return isinstance(event, ModelEvent) and not event.tool_calls and event.text_summary is not None


def _ours(cmd: SteeringCommand | None) -> bool:
    """Whether ``cmd`` is a pause the supervisor sent (in this process or, restored from the
    log, an earlier one)."""
    return cmd is not None and cmd.kind is SteeringKind.PAUSE and _our_actor(cmd.actor)


def _given_up() -> bool:
    """Whether the running task was cancelled and went on (its code swallowed it)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _retrieved(task: asyncio.Task[Any]) -> None:
    """Read the outcome of a task whose awaiter may be gone."""
    if not task.cancelled():
        task.exception()


def rule_policy_id(rule: Rule) -> str:
    """The ``policy_ref.policy_id`` of a command a rule sent: the rule by what it says
    (``supervisor:{"count":3,"tool":"search","when":"tool_repeated",...}``), not by its place
    in the spec, which a spec changed between two incarnations of a run would give another
    rule."""
    said = json.dumps(rule.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return f"{SUPERVISOR}:{said}"


def _our_actor(actor: SteeringActor) -> bool:
    """Whether ``actor`` is the supervisor's: the router applies a command from it only when
    it carried the runtime's capability (this process's, or an earlier one's, whose logged
    commands a restarted run gets back)."""
    return isinstance(actor, MiddlewareActor) and actor.name == SUPERVISOR and actor.run_id is None


class Supervisor:
    """Watches the agent runs of ``host`` and acts on them with ``submit`` (which carries the
    runtime's trust). ``spec`` applies to runs whose agent has none. ``pause_max_s`` and
    ``judge_timeout_s`` are the environment's (``settings``), read here unless given."""

    def __init__(
        self,
        spec: SupervisorSpec | None,
        *,
        host: RunHost,
        submit: Submit,
        max_concurrent_judges: int | None = None,
        pause_max_s: float | None = None,
        judge_timeout_s: float | None = None,
    ) -> None:
        if spec is not None and not isinstance(spec, SupervisorSpec):
            raise ConfigurationError(
                f"Runtime(supervisor=...) takes a SupervisorSpec, got {kind_of(spec)}; "
                "load one with SupervisorSpec.from_yaml(<file or YAML text>) or build one with "
                "SupervisorSpec(rules=[...], ...)"
            )
        if spec is not None:
            spec.criteria_text()  # a runtime's unreadable criteria file is refused at once
            spec.judge_target()  # and so is its unreadable models file
        #: The environment's defaults, read (and refused) now unless given (a runtime reads
        #: them when it is made): read later, a bad one raised inside the bus sink that starts
        #: a pause's dwell cap, and the run stayed paused.
        self.pause_max_s = env_pause_max_s() if pause_max_s is None else pause_max_s
        self.judge_timeout_s = env_judge_timeout_s() if judge_timeout_s is None else judge_timeout_s
        self.max_concurrent_judges = judge_concurrency(max_concurrent_judges)
        #: The judge calls under way, all runs together, are at most ``max_concurrent_judges``:
        #: the others wait their turn, first come first served (a run has at most one verdict
        #: in flight, waiting or asked, so no run holds the queue against the others). One
        #: semaphore per event loop, made on it (``_slots``): a semaphore is bound to the
        #: first loop a call waited on, and a call that waited on the next loop to use the
        #: supervisor (a host of its own run by two ``asyncio.run``) raised in its task.
        self._judge_slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self.spec = spec
        self.host = host
        self._submit = submit
        #: Watched runs, dropped when a run ends.
        self._watches: dict[str, _Watch] = {}
        self._listening = False
        #: Counters for operators: actions taken, judge calls that failed or were skipped.
        self.actions = 0
        self.judge_failures = 0
        self.judge_skipped = 0
        #: What the judge's calls cost, all runs together: the tokens (and USD, when litellm
        #: knows the price) of every answer, verdict or not. Never part of a run's usage.
        self.judge_usage = Usage()
        #: By judge (``Judge.key``): until when (``_clock.monotonic()``) its provider asked
        #: not to be called (a 429's or a 503's ``Retry-After``), for every run it judges.
        self._judge_waits: dict[Hashable, float] = {}
        #: By judge: when a failure of it was last warned of, and the failures since.
        self._judge_warned: dict[Hashable, tuple[float, int]] = {}

    # ------------------------------------------------------------------ watching

    def watch(self, handle: RunHandle) -> bool:
        """Watch ``handle`` if it is an agent run with a spec (its agent's or the runtime's);
        True if it is watched. Called by the runtime for every run it registers."""
        return self._watch(handle, another_turn=False)

    def _watch(self, handle: RunHandle, *, another_turn: bool) -> bool:
        driver = handle.driver
        if not isinstance(driver, AgentRun):
            return False
        spec = self.host.runs.supervisor_spec_for(handle)
        if spec is None:
            spec = self.spec
        if not isinstance(spec, SupervisorSpec) or "agents" not in spec.watches:
            return False
        if not self._listening:
            self.host.bus.add_sink(self._on_event)
            self._listening = True
        tools = (
            handle.info.tools if handle.info.tools is not None else frozenset(driver.agent.tools)
        )
        try:
            judge, failed = self._judge_for(spec), None
        except Exception as exc:  # its criteria file went missing, a model it cannot make:
            # a judge error (on_judge_error says what then), never a run registered but
            # left undriven because watching it raised
            judge, failed = None, exc
        w = self._watches[handle.run_id] = _Watch(
            handle=handle,
            spec=spec,
            judge=judge,
            counters=RunCounters(declared=frozenset(tools)),
        )
        if failed is not None and another_turn:
            self._judge_failed(w, failed, iteration=0)  # the run is under way: said now
        elif failed is not None:
            # registered, not yet started: said (and acted on) at its run.started, so the
            # judge error and the action it leads to are in the run's trace, after its start
            w.judge_unmade = failed
        if not another_turn:
            self._fired_before(w, [*driver.earlier, *handle.inbox.queue.pending()])
        if driver.paused and _ours(driver.pauses.last):
            # started again after a crash, held by a pause of the supervisor's (restored from
            # the log): its dwell cap starts when the run says it is paused, as for a new one
            w.pause_applied = True
        return True

    def _fired_before(self, w: _Watch, earlier: list[SteeringCommand]) -> None:
        """Mark fired the rules that sent one of ``earlier``: the commands an earlier
        incarnation of the run applied, or logged and left on their way (a run started again
        under its id after a crash gets both back from the steering log). A rule fires once
        per run, not once per process: counted again from zero, it would act again on the
        trigger it acted on before the restart."""
        sent = {
            cmd.policy_ref.policy_id
            for cmd in earlier
            if cmd.policy_ref is not None and _our_actor(cmd.actor)
        }
        if not sent:
            return  # nearly every run
        for index, rule in enumerate(w.spec.rules):
            if rule_policy_id(rule) in sent:
                w.counters.fired.add(index)

    def watched(self) -> list[str]:
        return list(self._watches)

    def _judge_for(self, spec: SupervisorSpec) -> Judge | None:
        # One per run (nothing to release later): the criteria file is read when it starts.
        model = judge_model(spec)
        if model is None:
            return None
        return Judge(
            model,
            criteria=spec.criteria_text(),
            timeout_s=spec.effective_judge_timeout_s(self.judge_timeout_s),
        )

    # ------------------------------------------------------------------ events

    def _on_event(self, event: Event) -> None:
        if isinstance(event, SupervisorEvent) or event.run_id is None:
            return  # its own events never trip a rule
        w = self._watches.get(event.run_id)
        if w is None:
            if event.type == "run.resumed" and isinstance(event, RunEvent):
                self._rewatch(event)  # a completed run given another turn
            return
        if isinstance(event, SteeringEvent):  # commands never trip a rule; ours are followed
            self._own_command(w, event)
            return
        if isinstance(event, RunEvent):
            self._run_changed(w, event)
            return
        if not w.counters.record(event):
            return
        rules = w.spec.rules
        for index, rule in enumerate(rules):
            if index in w.counters.fired:
                continue
            reason = check(rule, w.counters, w.handle.info, event)
            if reason is None:
                continue
            # and each copy of it: a rule given twice (``tinyagents validate`` warns) is one
            # rule, acting once, as the one policy id its commands carry says
            w.counters.fired.update(i for i in range(index, len(rules)) if rules[i] == rule)
            self._emit(w, "supervisor.rule_fired", rule=rule.when, data={"reason": reason})
            self._act(
                w,
                rule.then or w.spec.on_violation,
                rule.when,
                reason,
                policy_id=rule_policy_id(rule),
            )
        if event.type == "model.response" and not _final_answer(event):
            self._maybe_judge(w)

    def _rewatch(self, event: RunEvent) -> None:
        """A completed run an END_OF_TURN message gave another turn is watched again (its
        watch ended with the run; the new turn's counters start from zero)."""
        if not event.detail.get("another_turn") or event.run_id is None:
            return
        handle = self.host.runs.get(event.run_id)
        if handle is not None:
            self._watch(handle, another_turn=True)

    def _own_command(self, w: _Watch, event: SteeringEvent) -> None:
        """Follow the supervisor's own pause and abort to their end."""
        cid, kind = event.correlation_id, event.type
        if kind == "steering.superseded" and event.kind is SteeringKind.RESUME:
            self._resume_overtaken(w, event)
        elif kind in _REFUSED:
            self._not_coming(w, cid)
        elif cid == w.abort_cid and event.kind is not SteeringKind.CANCEL:
            # a policy turned our abort into another command (same correlation id, another
            # kind): the run is not ending, so it is still ours to supervise
            self._not_coming(w, cid)
        elif kind != "steering.applied" or event.kind is not SteeringKind.PAUSE:
            return
        elif event.affected.get("from_above") is not None:
            # the hold of a paused run above, passed down (``tinyagents.harness.pausing``): no
            # pause of this run's own, so it takes nothing over. A pause of ours that holds
            # the run still does, and is timed out (when the hold ends, it holds it alone)
            return
        elif cid not in w.pauses and not _our_actor(event.actor):
            # someone else's pause (a human's, an operator's): whoever paused the run now
            # holds it, and a human's pause is never timed out, even on top of ours
            self._stop_dwell(w)
        else:
            # ours: sent here, or logged by a supervisor that crashed before the pause was
            # applied (or before its "applied" was written): the restarted run gets it from
            # the log and applies it now, and the dwell cap is still ours to start
            w.pauses.discard(cid)
            if (
                event.affected.get("paused") is False
                and event.affected.get("paused_by") != "above"
                and w.dwell_task is None
            ):
                # the run was paused already, by someone else's pause of it: theirs holds it
                # (one held only by a paused run above is held by ours now, once that ends)
                return
            if w.handle.info.status is RunStatus.PAUSED:
                self._start_dwell(w)
            else:  # applied before the run says it paused: start when it does
                w.pause_applied = True

    def _resume_overtaken(self, w: _Watch, event: SteeringEvent) -> None:
        """A resume (a human's) superseded by a newer pause of ours, which it was sent before:
        whoever paused the run before, it stays paused by our pause now, so the dwell cap
        times it (our pause may have landed on the run paused already, starting nothing)."""
        driver = w.handle.driver
        last = driver.pauses.last if isinstance(driver, AgentRun) else None
        if (
            _ours(last)
            and last is not None
            and event.superseded_by == last.correlation_id
            and w.handle.info.status is RunStatus.PAUSED
        ):
            self._start_dwell(w)

    def _start_dwell(self, w: _Watch) -> None:
        w.pause_applied, w.held = False, True
        if w.dwell_task is None:
            w.dwell_task = self._spawn(
                w, self._dwell(w, w.spec.effective_pause_max_s(self.pause_max_s))
            )

    def _stop_dwell(self, w: _Watch) -> None:
        w.pause_applied = w.held = False
        if w.dwell_task is not None:
            w.dwell_task.cancel()
            w.dwell_task = None

    def _run_changed(self, w: _Watch, event: RunEvent) -> None:
        if event.type == "run.started" and w.judge_unmade is not None:
            failed, w.judge_unmade = w.judge_unmade, None
            self._judge_failed(w, failed, iteration=0)
        elif event.type == "run.paused" and w.pause_applied:
            self._start_dwell(w)
        elif event.type == "run.resumed":
            self._stop_dwell(w)
        elif event.type in _ENDED:
            del self._watches[w.handle.run_id]
            for task in list(w.tasks):
                task.cancel()

    # ------------------------------------------------------------------ actions

    def _act(
        self,
        w: _Watch,
        action: Action,
        source: str,
        reason: str,
        *,
        iteration: int | None = None,
        policy_id: str | None = None,
    ) -> None:
        """Announce the action and queue its command now (see ``start_eagerly``).
        ``iteration``: the one the action is about (a verdict's, which may come back after
        the run moved on), else the run's current one. ``policy_id``: what the command's
        ``policy_ref`` names (a rule's ``rule_policy_id``; else ``supervisor:<source>``)."""
        if w.aborted:
            return  # the run is ending: nothing more to say to it
        reason = _clip(reason)  # a judge's long reason still fits a command's payload
        self.actions += 1
        if iteration is None:
            iteration = w.counters.iteration
        payload: dict[str, Any]
        if action == "pause":
            kind, payload = SteeringKind.PAUSE, {"reason": reason}
        elif action == "steer":
            message = reason if source in ("llm",) else w.spec.steer_message
            kind, payload = (
                SteeringKind.ADD_INSTRUCTION,
                {"text": STEER_TEMPLATE.format(message=message)},
            )
        else:
            kind, payload = SteeringKind.CANCEL, {"reason": reason, "abort": True}
        cmd = SteeringCommand(
            target=SteeringTarget.agent_run(w.handle.run_id),
            actor=SteeringActor.middleware(SUPERVISOR),
            kind=kind,
            payload=payload,
            priority=SteeringPriority.CRITICAL,
            policy_ref=SteeringPolicyRef(policy_id=policy_id or f"{SUPERVISOR}:{source}"),
        )
        self._emit(
            w,
            "supervisor.action",
            rule=source,
            action=action,
            data={
                "action": action,
                "source": source,
                "reason": reason,
                "iteration": iteration,
                # the command's steering.* events carry it: the action's outcome is found so
                "correlation_id": cmd.correlation_id,
            },
        )
        if kind is SteeringKind.PAUSE:
            w.pauses.add(cmd.correlation_id)
        elif kind is SteeringKind.CANCEL:
            w.aborted, w.abort_cid = True, cmd.correlation_id
        # Not one of the run's tasks: a command on its way (a durable store's write) is not
        # cancelled when the run ends; the router settles it (``target finished``).
        start_eagerly(
            self._send(w, cmd), lambda coro: self.host.spawn(coro, name="supervisor-send")
        )

    async def _send(self, w: _Watch, cmd: SteeringCommand) -> None:
        delay, attempt = _RESEND_FIRST_S, 0
        while True:
            attempt += 1
            try:
                receipt = await self._submit(cmd)
                break
            except RuntimeClosed:
                # The runtime began to close (a rule or a verdict landed while it waits for the
                # submits under way): its close cancels the run, so nothing is left to send, and
                # the error would only escape into the event bus or a task nobody awaits.
                log.info(
                    "the supervisor's %s for %s was not sent: the runtime is closing",
                    cmd.kind.value,
                    cmd.target.describe(),
                )
                return
            except StoreError as exc:
                # The store could not log it (a database locked by another process past its
                # busy timeout, a connection lost): the same command is sent again, which the
                # router takes as a retry of it, until it is logged or its run has ended.
                # Given up, a rule that fires once would never act.
                if w.handle.info.status.finished:
                    log.warning(
                        "the supervisor's %s for %s was not sent: its run ended before the "
                        "store could log it (%s)",
                        cmd.kind.value,
                        cmd.target.describe(),
                        exc,
                    )
                    self._not_coming(w, cmd.correlation_id)
                    return
                log.log(
                    logging.WARNING if attempt % _RESEND_LOG_EVERY == 1 else logging.DEBUG,
                    "the supervisor's %s for %s could not be logged (attempt %d: %s); sending "
                    "it again in %g s",
                    cmd.kind.value,
                    cmd.target.describe(),
                    attempt,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RESEND_MAX_S)
            except Exception:
                log.exception(
                    "the supervisor's %s for %s failed", cmd.kind.value, cmd.target.describe()
                )
                self._not_coming(w, cmd.correlation_id)
                return
        if not receipt.accepted:
            log.warning(
                "the supervisor's %s for %s was %s: %s",
                cmd.kind.value,
                cmd.target.describe(),
                receipt.status.value,
                receipt.reason,
            )

    def _not_coming(self, w: _Watch, correlation_id: str) -> None:
        """Our command ``correlation_id`` will not reach the run (refused, or never
        submitted, or turned by a policy into another command): a pause of ours leaves
        nothing to time out, and after an abort of ours the run may still be told, and is
        timed out again if our pause still holds it (the abort was the dwell cap's, say)."""
        if correlation_id in w.pauses:
            w.pauses.discard(correlation_id)
        elif correlation_id == w.abort_cid:
            w.aborted, w.abort_cid = False, None
            if w.held and w.handle.info.status is RunStatus.PAUSED:
                self._start_dwell(w)

    async def _dwell(self, w: _Watch, cap: float) -> None:
        await asyncio.sleep(cap)
        w.dwell_task = None
        if w.handle.info.status is not RunStatus.PAUSED:
            return
        reason = f"paused longer than the supervisor's dwell cap of {cap:g} s"
        self._emit(w, "supervisor.escalated", action="abort", data={"reason": reason})
        self._act(w, "abort", "pause_max_s", reason)

    # ------------------------------------------------------------------ judge

    def _maybe_judge(self, w: _Watch) -> None:
        iteration = w.counters.iteration
        if w.judge is None or iteration % w.spec.every_n_iterations:
            return
        if w.aborted:
            return  # our abort is on its way: no verdict could be acted on, none is paid for
        if self._rate_limited(w, w.judge, iteration):
            return
        if w.judge_task is not None and not w.judge_task.done():
            self.judge_skipped += 1  # at most one verdict in flight: this slot is skipped
            return
        info = w.handle.info
        data = JudgeInput(
            iteration=iteration,
            tokens_used=info.usage.total_tokens,
            token_budget=info.limits.max_tokens,
            tool_calls={name: w.counters.tool_calls[name] for name in sorted(w.counters.declared)},
            undeclared_tool_calls=w.counters.undeclared_calls,
        )
        w.judge_task = self._spawn(w, self._judge(w, w.judge, data))

    def _rate_limited(self, w: _Watch, judge: Judge, iteration: int) -> bool:
        """Whether the provider of ``judge`` asked to wait past now: then this slot is a judge
        error, sent nowhere."""
        waited = self._judge_waits.get(judge.key)
        if waited is None:
            return False
        left = waited - _clock.monotonic()
        if left <= 0:
            del self._judge_waits[judge.key]
            return False
        self._judge_failed(w, _still_limited(judge, left), iteration=iteration)
        return True

    async def _judge(self, w: _Watch, judge: Judge, data: JudgeInput) -> None:
        """Hold a slot for the judge's call (``_verdict``, in a task of its own) until it has
        ended, at most its timeout and a grace (``CANCEL_GRACE_S``): a judge whose code
        swallows the cancellation of its timeout (or of its run's end) held its call, and
        its slot, for good, and with the cap reached no run was judged again. Past the grace
        the call is cancelled once more and left behind (logged; its run's end cancels it
        again; should it answer, only its cost is kept), and the slot is a ``TimeoutError``
        judge error."""
        # At most max_concurrent_judges calls under way, all runs together; the others wait
        # here, in the order they came (the semaphore's waiters are served first come first).
        async with self._slots():
            if w.aborted or self._rate_limited(w, judge, data.iteration):
                # while it waited, our abort went out, or the provider (answering another
                # run) asked to wait: nothing is asked
                return
            await judge.ready()  # (litellm's first import is not part of the timeout)
            call = self._spawn(w, self._verdict(w, judge, data), what="supervisor-judge")
            call.add_done_callback(_retrieved)  # (its outcome, once no one awaits it)
            try:
                async with asyncio.timeout(judge.timeout_s + CANCEL_GRACE_S) as bound:
                    await asyncio.shield(call)
            except TimeoutError:
                if not bound.expired():
                    raise
                call.cancel()
                log.warning(
                    "the judge %r of run %s did not stop within %g s of its timeout (its "
                    "code swallows cancellation); its call is left behind",
                    judge.model.name,
                    w.handle.run_id,
                    CANCEL_GRACE_S,
                )
                self._judge_failed(w, TimeoutError(), iteration=data.iteration)
            finally:
                if not call.done():
                    call.cancel()  # the slot was cancelled (its run ended): so is its call

    async def _verdict(self, w: _Watch, judge: Judge, data: JudgeInput) -> None:
        """Ask ``judge`` and act on its answer, in the step it answered in."""
        try:
            verdict, usage = await judge.ask(data)
        except Exception as exc:
            if _given_up():  # its run ended, or its slot gave up on it: its cost is kept
                cost = exc.usage if isinstance(exc, (JudgeError, ModelError)) else None
                if isinstance(cost, Usage):
                    self.judge_usage += cost
                return
            self._judge_failed(w, exc, iteration=data.iteration)
            return
        self.judge_usage += usage
        if _given_up() or self._watches.get(w.handle.run_id) is not w:
            # the run ended (or began another turn), or the slot gave up on the call, and
            # the judge answered anyway (its code swallowed the cancellation): the run's
            # trace ended with it, or its judge error was said, so nothing more is said
            return
        said = _clip(verdict.reason)  # the event log keeps what a command would carry
        self._emit(
            w,
            "supervisor.judge_verdict",
            data={
                "passed": verdict.passed,
                "reason": said,
                "iteration": data.iteration,
                "usage": usage_data(usage),
            },
        )
        if not verdict.passed:
            reason = said if said.strip() else "the judge found the run violating its policy"
            self._act(w, w.spec.on_violation, "llm", reason, iteration=data.iteration)

    def _slots(self) -> asyncio.Semaphore:
        """The judge calls' semaphore of the running loop (made when another loop, or
        none, had it: calls of a loop that ended cannot be under way any more)."""
        loop = asyncio.get_running_loop()
        if self._judge_slots is None or self._judge_slots[0] is not loop:
            self._judge_slots = (loop, asyncio.Semaphore(self.max_concurrent_judges))
        return self._judge_slots[1]

    def _judge_failed(self, w: _Watch, exc: Exception, *, iteration: int) -> None:
        """Logged, counted, published; then the run goes on (fail-open) unless the spec
        says ``on_judge_error: pause|abort`` (fail-closed). Once the run's watch has ended
        (a judge that answered after its run ended), only counted, its cost and its
        provider's wait kept: the run's trace ended with the run."""
        self.judge_failures += 1
        error = type(exc).__name__
        data: dict[str, Any] = {"error": error, "iteration": iteration}
        why = error
        # it answered, at a cost: no verdict, or an answer its provider blocked (a
        # ModelError's usage: the prompt of a content-filtered answer was paid for)
        usage = exc.usage if isinstance(exc, (JudgeError, ModelError)) else None
        if isinstance(usage, Usage):
            self.judge_usage += usage
            data["usage"] = usage_data(usage)
        if isinstance(exc, ModelError) and exc.retry_after_s is not None:  # a rate limit
            data["retry_after_s"] = exc.retry_after_s
            why = f"{error}: retry after {exc.retry_after_s:g} s"
            if w.judge is not None:  # no call to it, from any run, before then
                until = _clock.monotonic() + exc.retry_after_s
                key = w.judge.key
                self._judge_waits[key] = max(until, self._judge_waits.get(key, until))
        if self._watches.get(w.handle.run_id) is not w:
            return
        if isinstance(exc, TimeoutError) and w.judge is not None:
            said = f"{error}: no answer within {w.judge.timeout_s:g} s"
        else:
            said = message_of(exc) or error
        self._warn(w, said)
        self._emit(w, "supervisor.judge_error", data=data)
        if w.spec.on_judge_error != "ignore":
            self._act(
                w,
                w.spec.on_judge_error,
                "judge_error",
                f"judge unavailable ({why})",
                iteration=iteration,
            )

    def _warn(self, w: _Watch, said: str) -> None:
        """Log a judge failure: a warning at most every ``JUDGE_WARN_EVERY_S`` per judge,
        saying how many came since the last one; the others at debug level."""
        key = w.judge.key if w.judge is not None else None  # (a judge that was not made)
        now = _clock.monotonic()
        warned = self._judge_warned.get(key)
        if warned is not None and now - warned[0] < JUDGE_WARN_EVERY_S:
            self._judge_warned[key] = (warned[0], warned[1] + 1)
            log.debug("judge failure on run %s: %s", w.handle.run_id, said)
            return
        unsaid = warned[1] if warned is not None else 0
        since = (
            f" ({unsaid} more judge failures since the last warning, not logged)" if unsaid else ""
        )
        log.warning("the supervisor's judge failed on run %s: %s%s", w.handle.run_id, said, since)
        self._judge_warned[key] = (now, 0)

    # ------------------------------------------------------------------ helpers

    def _spawn(self, w: _Watch, coro: Any, *, what: str = "supervisor") -> asyncio.Task[Any]:
        task = self.host.spawn(coro, name=f"{what}-{w.handle.run_id}")
        w.tasks.add(task)
        task.add_done_callback(w.tasks.discard)
        return task

    def _emit(self, w: _Watch, type_: str, **fields: Any) -> None:
        self.host.bus.publish(run_event(w.handle.info, SupervisorEvent, type=type_, **fields))
