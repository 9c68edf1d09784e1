"""The per-node state machine: one step for a node Tessera is changing.

``step`` dispatches on the persisted phase; which phase may follow which is
``state.TRANSITIONS``, which ``NodeState.to`` enforces and docs/rollout.md
draws. One step may take several edges (Cordoned → Draining → Applying →
Verifying when nothing is left to evict); only the last phase is written.

A step looks at the persisted state and the fresh observation only (never at
what the previous pass *meant* to do), so re-running it after a crash at any
point repeats nothing unsafe. Releasing a node is in ``releasing``.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from tessera.api.v1alpha1.common import RolloutSpec
from tessera.domain.rollout import actions as act
from tessera.domain.rollout import gates, scope, targets
from tessera.domain.rollout.capacity import Room
from tessera.domain.rollout.dra import restart as dra_restart
from tessera.domain.rollout.draining import drain_pass
from tessera.domain.rollout.outcome import RolloutOutcome, RolloutProblem
from tessera.domain.rollout.releasing import release
from tessera.domain.rollout.state import NodeState, Phase, ReportPhase, ts
from tessera.domain.rollout.views import GEOMETRY_PENDING, DesiredNode, NodeView, PdbView, PodView

UNTOUCHED = (Phase.CORDONED, Phase.DRAINING, Phase.BLOCKED)


@dataclass(frozen=True)
class StepContext:
    owner: str
    policy: RolloutSpec
    now: datetime
    pods: Mapping[str, Sequence[PodView]]
    pdbs: Sequence[PdbView]
    pdb_budget: MutableMapping[str, int]
    room: Room | None = None
    """The cluster's accelerator room for the capacity check; None: not checked."""

    @property
    def drain_timeout(self) -> timedelta:
        return gates.duration(self.policy.drain.timeout)

    @property
    def verify_timeout(self) -> timedelta:
        return gates.duration(self.policy.verify_timeout)

    def leaving(self, node: NodeView, s: NodeState) -> list[PodView]:
        """The pods that must leave ``node`` before its change (``scope``)."""
        return scope.leaving(node, scope.of(s), self.pods.get(node.name, ()), self.policy.drain)


READS_PODS = (Phase.CORDONED, Phase.DRAINING, Phase.BLOCKED, Phase.APPLYING)


def reads_pods(node: NodeView, s: NodeState, d: DesiredNode | None) -> bool:
    """Whether stepping this node may read its pods: drains and the recount before a change.

    A node verifying, failed or being released does not, unless its layout is
    still to be requested (a pass stopped between the state and the labels) or
    the spec moved on under it (``retarget``): both recount first.
    """
    retargets = d is not None and not d.invalid and d.target != s.goal
    unrequested = s.phase == Phase.VERIFYING and bool(targets.labels_to_write(s.target, node))
    return s.phase in READS_PODS or retargets or unrequested


def untouched(s: NodeState) -> bool:
    """The device has not been asked to change yet, so backing out is always safe."""
    return s.phase in UNTOUCHED or (s.phase == Phase.APPLYING and s.rollback_of is None)


def unasked(node: NodeView, s: NodeState) -> bool:
    """Nothing asked ``node``'s device to change yet: untouched, or verifying a layout whose
    labels were never written (a pass stopped before them; the step drains first)."""
    if s.phase == Phase.VERIFYING:
        return bool(targets.labels_to_write(s.target, node))
    return untouched(s)


def step(ctx: StepContext, node: NodeView, s: NodeState, d: DesiredNode) -> RolloutOutcome:
    if d.invalid and untouched(s):
        return release(
            node, s, ctx.now, f"back out: layout {d.target} is invalid here: {d.invalid}"
        )
    if not d.invalid and d.target != s.goal and s.phase != Phase.UNCORDONING:
        if targets.at_target(node, d):
            return backed_out(node, s, d, ctx.now)
        s = retarget(s, d, ctx.now, node)
    match s.phase:
        case Phase.CORDONED:
            return cordoned(ctx, node, s)
        case Phase.DRAINING | Phase.BLOCKED:
            return draining(ctx, node, s)
        case Phase.APPLYING:
            return applying(ctx, node, s)
        case Phase.VERIFYING:
            return verifying(ctx, node, s)
        case Phase.FAILED:
            return failed(ctx, node, s)
        case _:
            # Uncordoning is entered only from a verified layout (backing out never
            # carries rollback_of), so finishing it settles a rollback's record too.
            return release(node, s, ctx.now, f"layout {s.target.id} verified", settle=True)


def backed_out(node: NodeView, s: NodeState, d: DesiredNode, now: datetime) -> RolloutOutcome:
    """The spec went back to what the node still runs: it leaves the rollout at once.

    Nothing is left to drain or apply, so no further pod is evicted; the node
    is released like a verified one (a cordon someone else set stays), and,
    being at its target, it holds no disruption slot any more.
    """
    why = f"back out: {node.name} already runs {d.target}, the target changed from {s.goal}"
    return release(node, replace(s, rollback_of=None), now, why, settle=True)


def retarget(s: NodeState, d: DesiredNode, now: datetime, node: NodeView) -> NodeState:
    """The spec moved on mid-flight: keep the cordon and the drain, aim at the new layout.

    A node whose device is untouched keeps its GPU scope, grown by the GPUs the new layout
    changes as well (the pods already gone stay gone); one whose device may be mid-change
    (verifying, failed) is drained whole, since what each GPU runs is no longer known.
    """
    gpus, whole = None, "the target changed while the layout was changing"
    if untouched(s) and s.gpus is not None:
        if node.layout is not None and d.layout is not None and len(d.layout) == len(node.layout):
            gpus, whole = tuple(sorted({*s.gpus, *scope.changed(node.layout, d.layout)})), ""
        else:
            whole = "the target changed, and the layout the node runs is not known"
    elif s.gpus is None:
        whole = s.whole
    new = replace(
        s, target=targets.target_of(d), rollback_of=None, rolled_back=False, gpus=gpus, whole=whole
    )
    if s.phase in (Phase.VERIFYING, Phase.FAILED):
        return new.to(Phase.APPLYING, now, f"target changed from {s.target.id} to {d.target}")
    return new


def hold(node: NodeView, s: NodeState, why: str) -> tuple[NodeState, list[act.Action]]:
    """Keep the node out of scheduling while Tessera works on it.

    If someone uncordoned the node under us, re-cordon it (as MCO does), and
    if it was *their* cordon we had inherited, it is now ours to lift later.
    """
    out: list[act.Action] = []
    if not node.has_taint(GEOMETRY_PENDING):
        out.append(act.AddTaint(node.name, GEOMETRY_PENDING, why))
    if not node.unschedulable:
        if s.orig:
            s = replace(s, orig=False)
        out.append(act.Cordon(node.name, why))
    return s, out


def holding(node: NodeView, s: NodeState, why: str, acts: list[act.Action]) -> RolloutOutcome:
    """The node waits in its phase: for a cordon or taint being (re)written, or for its agent."""
    return RolloutOutcome(
        node=node.name, phase=ReportPhase.of(s.phase), why=why, state=s, actions=acts, waiting=True
    )


def cordoned(ctx: StepContext, node: NodeView, s: NodeState) -> RolloutOutcome:
    s2, acts = hold(node, s, f"cordon {node.name} for layout {s.target.id}")
    if acts:
        return holding(node, s2, "cordon before drain", acts)
    start = replace(s.to(Phase.DRAINING, ctx.now), drain_started=ctx.now)
    return draining(ctx, node, start)


def draining(ctx: StepContext, node: NodeView, s: NodeState) -> RolloutOutcome:
    s2, acts = hold(node, s, f"re-cordon {node.name}: it was uncordoned during the drain")
    if acts:
        return holding(node, s2, "re-cordon before evicting", acts)
    started = s.drain_started or s.since
    timed_out = ctx.now - started > ctx.drain_timeout
    dp = drain_pass(
        s,
        pods=ctx.leaving(node, s),
        pdbs=list(ctx.pdbs),
        pdb_budget=ctx.pdb_budget,
        drain=ctx.policy.drain,
        now=ctx.now,
        timed_out=timed_out,
    )
    if dp.actions:  # persist bookkeeping only with new attempts: no write just to prune
        s = replace(s, evictions=dp.evictions)
    if dp.done:
        # The node was seen cordoned before its pods were listed, so this list is
        # already the recount ``applying`` asks for: change the layout in this pass.
        return applying(ctx, node, replace(s.to(Phase.APPLYING, ctx.now), evictions={}))
    blocked = bool(dp.hard) or (timed_out and (s.phase == Phase.BLOCKED or not dp.actions))
    left, problem = len(dp.remaining), None
    why = f"draining {node.name}: {left} pod(s) left{_stay(ctx, node, s)}"
    if blocked:
        msg = dp.blocker() + (f" (drain started {ts(started)})" if timed_out else "")
        if s.phase == Phase.BLOCKED:
            s = replace(s, message=msg)
        else:
            s = s.to(Phase.BLOCKED, ctx.now, msg)
        why, problem = f"drain blocked: {msg}", RolloutProblem("DrainBlocked", msg, ts(s.since))
    elif s.phase == Phase.BLOCKED:
        s = s.to(Phase.DRAINING, ctx.now)
    return RolloutOutcome(
        node=node.name,
        phase=ReportPhase.of(s.phase),
        why=why,
        state=s,
        actions=dp.actions,
        problem=problem,
        pods_left=left,
        blocking_pdbs=dp.blocking_pdbs,
        held=tuple(dp.held),
    )


def applying(ctx: StepContext, node: NodeView, s: NodeState) -> RolloutOutcome:
    s2, acts = hold(node, s, f"re-cordon {node.name} before changing its layout")
    if acts:
        return holding(node, s2, "re-cordon before applying", acts)
    if ctx.leaving(node, s):
        again = replace(
            s.to(Phase.DRAINING, ctx.now, "pods appeared after the drain"), drain_started=ctx.now
        )
        return draining(ctx, node, again)
    patch = targets.labels_to_write(s.target, node)
    verb = "roll back to" if s.rollback_of else "apply"
    why = f"{verb} layout {s.target.id} on {node.name}: drained, recount found no pods"
    acts = [act.SetNodeLabels(node.name, patch, why)] if patch else []
    return RolloutOutcome(
        node=node.name,
        phase=ReportPhase.VERIFYING,
        why=why,
        state=replace(s.to(Phase.VERIFYING, ctx.now), restarted=None),
        actions=acts,
    )


def verifying(ctx: StepContext, node: NodeView, s: NodeState) -> RolloutOutcome:
    patch = targets.labels_to_write(s.target, node)
    if patch:
        if ctx.leaving(node, s):
            # The labels were never written (the pass that decided them stopped
            # short) and pods are back: no layout is requested under a pod.
            why = "pods appeared before the layout was requested"
            again = replace(s.to(Phase.DRAINING, ctx.now, why), drain_started=ctx.now)
            return draining(ctx, node, again)
        why = f"request layout {s.target.id} on {node.name} again: its labels differ"
        return RolloutOutcome(
            node=node.name,
            phase=ReportPhase.VERIFYING,
            why=why,
            state=replace(s, restarted=None),  # the plugin restarts after this change too
            actions=[act.SetNodeLabels(node.name, patch, why)],
        )
    agent = targets.agent_state(s.target, node)
    if agent == targets.FAILED:
        return fail(ctx, s, node, f"agent reported failed for layout {s.target.id}")
    restart = dra_restart.step(node, s) if agent == targets.SUCCESS else dra_restart.Restart(s)
    timed_out = ctx.now - s.since > ctx.verify_timeout
    if (restart.actions or restart.state != s) and not timed_out:  # a restart never outlasts it
        why = restart.pending or f"waiting for layout {s.target.id}"
        acts = list(restart.actions)
        return RolloutOutcome(
            node=node.name, phase=ReportPhase.VERIFYING, why=why, state=restart.state, actions=acts
        )
    if not restart.pending and targets.verified(s.target, node):
        return release(node, s, ctx.now, f"layout {s.target.id} verified", settle=True)
    missing = (
        targets.alloc_diff(s.target, node)
        or (agent == targets.SUCCESS and _dra_missing(restart.pending, s, node))
        or f"agent state is {agent or 'unset'}"
    )
    if timed_out:
        text = f"layout {s.target.id} not verified within {ctx.policy.verify_timeout}: {missing}"
        return fail(ctx, s, node, text)
    s2, acts = hold(node, s, f"re-cordon {node.name} while its layout changes")
    return holding(node, s2, f"waiting: {missing}", acts)


def _stay(ctx: StepContext, node: NodeView, s: NodeState) -> str:
    """``, 10 stay on GPUs 4-7`` while a per-GPU drain leaves pods running."""
    if s.gpus is None:
        return f" (whole node: {s.whole})" if s.whole else ""
    every = scope.leaving(node, scope.Scope(None), ctx.pods.get(node.name, ()), ctx.policy.drain)
    stay = len(every) - len(ctx.leaving(node, s))
    return f"; GPUs {scope.gpu_list(s.gpus)} change, {stay} pod(s) stay"


def _dra_missing(pending: str, s: NodeState, node: NodeView) -> str:
    """What a DRA node still lacks: its restarted plugin, and the devices it should publish."""
    devices = targets.devices_diff(s.target, node)
    return "; ".join(x for x in (pending, devices) if x)


def fail(ctx: StepContext, s: NodeState, node: NodeView, message: str) -> RolloutOutcome:
    nxt = s.to(Phase.FAILED, ctx.now, message)
    return RolloutOutcome(
        node=node.name,
        phase=ReportPhase.FAILED,
        why=message,
        state=nxt,
        problem=RolloutProblem("NodeFailed", message, ts(ctx.now)),
    )


def failed(ctx: StepContext, node: NodeView, s: NodeState) -> RolloutOutcome:
    good = s.last_good
    if ctx.policy.on_failure == "Rollback" and good is not None and s.rollback_of is None:
        why = f"roll back {node.name} to {good.id}: {s.message}"
        nxt = replace(s.to(Phase.APPLYING, ctx.now), target=good, rollback_of=s.target.id)
        return RolloutOutcome(node=node.name, phase=ReportPhase.APPLYING, why=why, state=nxt)
    hint = ""
    if s.rollback_of:
        hint = f" (rolling back from {s.rollback_of} failed too)"
    elif ctx.policy.on_failure == "Rollback":
        hint = " (no earlier layout to roll back to)"
    msg = s.message + hint
    return RolloutOutcome(
        node=node.name,
        phase=ReportPhase.FAILED,
        why=msg,
        state=s,
        problem=RolloutProblem("NodeFailed", msg, ts(s.since)),
    )
