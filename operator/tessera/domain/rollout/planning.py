"""``plan``: one reconcile's decisions for a pool, from an observation to ordered actions.

Observe → plan → apply, as in cluster-api: the controller hands in a snapshot
and the current time, applies the returned actions in order, and calls again.
In-flight nodes are stepped first; new nodes are admitted only through the
gates (paused, window, approval) and only while the disruption budget, which
counts every unavailable member of the pool whoever made it so (``budget``:
mid-change, NotReady, cordoned, tainted by Tessera or another controller), has
room for them (``starting``). Idle nodes are never tainted: before the gates
open nothing is written to a node.

The actions come in two stages. The first steps the nodes in flight; the
second admits new nodes, then tidies idle ones (their pending taint, a
settled record), the admitted first because they start a rollout. A slot that a
first-stage release frees is handed out in the second stage of the same pass,
which is safe because the executor starts a stage only once every write of
the one before has landed: if an uncordon fails, nothing new is cordoned.
Within a stage, different nodes' actions are independent of each other and
may run concurrently; one node's actions run in order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tessera.api.v1alpha1.common import (
    NodeCounts,
    NodeProblem,
    NodeScope,
    RolloutPlan,
    RolloutSpec,
)
from tessera.domain.base.conditions import Verdict
from tessera.domain.dra.naming import DRIVER
from tessera.domain.rollout import actions as act
from tessera.domain.rollout import (
    capacity,
    queueing,
    releasing,
    reporting,
    scope,
    starting,
    targets,
)
from tessera.domain.rollout.budget import Unavailable
from tessera.domain.rollout.draining import Held
from tessera.domain.rollout.machine import StepContext, step, unasked, untouched
from tessera.domain.rollout.outcome import RolloutOutcome, stuck
from tessera.domain.rollout.releasing import back_out, release
from tessera.domain.rollout.reporting import NodeReport
from tessera.domain.rollout.state import IllegalTransition, NodeState, ReportPhase, check, ts
from tessera.domain.rollout.views import GEOMETRY_PENDING, DesiredNode, NodeView, PdbView, PodView

DRAIN_REQUEUE_S, GATE_REQUEUE_S = 10.0, 60.0
BUSY = (*reporting.IN_PROGRESS, ReportPhase.BLOCKED)
"""Phases that bring the pool back after ``DRAIN_REQUEUE_S``."""


Stage = tuple[act.Action, ...]


@dataclass(frozen=True)
class Plan:
    stages: tuple[Stage, ...]
    """Run in order, each only after every write of the one before has landed."""
    hash: str
    counts: NodeCounts
    problems: tuple[NodeProblem, ...]
    summary: RolloutPlan
    verdict: Verdict
    nodes: tuple[NodeReport, ...]
    requeue_after: float | None
    """Seconds until the controller should look again, ``None`` once converged."""
    short_of_room: str = ""
    """Why a node that could start waits: its pods would have nowhere to run (``capacity``)."""
    unavailable: tuple[Unavailable, ...] = ()
    """The members counted against ``maxUnavailable`` once this pass's writes land, and why
    (``budget``): what ``tessera_rollout_budget_nodes`` counts."""
    scopes: tuple[NodeScope, ...] = ()
    """``status.scopes``: per node in flight, the GPUs its change repartitions or why the
    whole node goes (``reporting.scopes``)."""

    @property
    def actions(self) -> Stage:
        """Every action, in an order that is also safe to run one by one."""
        return tuple(a for stage in self.stages for a in stage)


def in_flight(s: NodeState) -> bool:
    return not s.rolled_back


@dataclass
class _Pass:
    """What one pass accumulates while it walks the nodes."""

    actions: list[act.Action] = field(default_factory=list)
    reports: list[NodeReport] = field(default_factory=list)
    problems: list[NodeProblem] = field(default_factory=list)
    candidates: list[tuple[NodeView, DesiredNode]] = field(default_factory=list)
    to_evict: int = 0
    blocking: set[str] = field(default_factory=set)
    released: dict[str, RolloutOutcome] = field(default_factory=dict)
    tidy: dict[str, list[act.Action]] = field(default_factory=dict)

    def report(
        self,
        node: str,
        d: DesiredNode | None,
        phase: ReportPhase,
        msg: str = "",
        held: tuple[Held, ...] = (),
        *,
        no_driver: bool = False,
        state: NodeState | None = None,
    ) -> None:
        if d is not None:
            where = scope.of(state) if state is not None else None
            self.reports.append(NodeReport(node, phase, d.target, msg, held, no_driver, where))

    def problem(
        self, node: str, phase: ReportPhase, reason: str, msg: str, since: str = ""
    ) -> None:
        self.problems.append(
            NodeProblem(node=node, phase=phase.value, reason=reason, message=msg, since=since)
        )

    def take(self, o: RolloutOutcome, before: NodeState | None, d: DesiredNode | None) -> None:
        self.actions.extend(o.emit(before))
        self.report(o.node, d, o.phase, o.why, o.held, state=o.state)
        if o.problem is not None:
            self.problem(o.node, o.phase, o.problem.reason, o.problem.message, o.problem.since)
        self.blocking |= o.blocking_pdbs
        if o.releases:
            self.released[o.node] = o


def plan(
    pool: str,
    policy: RolloutSpec,
    desired: Mapping[str, DesiredNode],
    nodes: Sequence[NodeView],
    pods: Sequence[PodView],
    pdbs: Sequence[PdbView],
    now: datetime,
    approved_hash: str | None = None,
    room: capacity.Room | None = None,
    *,
    bystanders: Sequence[NodeView] = (),
    queue: bool = False,
    hold: Mapping[str, str] | None = None,
) -> Plan:
    """Decide this pass. ``pool`` is the owner id written on nodes (``NodePoolGeometry/x``).

    ``nodes`` must include every node of the pool *and* every node that still
    carries this owner's state or Tessera's taint (a node that left the pool is
    released). ``desired`` maps pool node names to their target. ``room``: every
    node of the cluster and its pods' accelerator requests, for the check that a
    drain's pods have somewhere to go (``capacity``); without it nothing is checked.
    ``bystanders``: members of the pool, not in ``desired`` nor ``nodes``, that this plan
    changes nothing on (a SharingPolicy's nodes that need no rollout): an unavailable one
    holds the budget all the same. ``queue``: mark the members waiting for their turn
    ``PreferNoSchedule`` while the rollout is under way (``queueing``). ``hold``: nodes that
    must not start this pass, with why (the autopilot's recheck, ``cluster.autopilot_idle``):
    they wait, Pending, and take no slot; one already started whose device is not asked to
    change yet is backed out instead (released, evicting nothing), and waits so from then on.
    """
    by_node: dict[str, list[PodView]] = defaultdict(list)
    for pod in pods:
        by_node[pod.node].append(pod)
    budget = {p.ref: p.disruptions_allowed for p in pdbs}
    ctx = StepContext(pool, policy, now, by_node, pdbs, budget, room)
    acc = _Pass()
    for node in sorted(nodes, key=lambda n: n.name):
        try:
            visit(ctx, acc, node, desired.get(node.name), (hold or {}).get(node.name))
        except IllegalTransition as err:  # this node stops; the others go on (state.py)
            acc.take(stuck(node.name, err), None, desired.get(node.name))
    stepping, acc.actions = tuple(acc.actions), []
    released = {
        n.name: releasing.after(n, acc.released[n.name]) for n in nodes if n.name in acc.released
    }
    admitted = starting.admit(
        ctx,
        desired,
        nodes,
        acc.candidates,
        approved_hash,
        released=released,
        bystanders=bystanders,
        hold=hold,
    )
    gate = admitted.gate
    for o in admitted.outcomes:
        acc.take(o, None, desired[o.node])
        acc.to_evict += o.pods_left
        if o.phase == ReportPhase.CORDONED:
            acc.tidy.pop(o.node, None)  # starting writes its own taint
    for tidy in acc.tidy.values():
        acc.actions.extend(tidy)
    if queue:
        acc.actions.extend(_queue(ctx, desired, nodes, admitted, approved_hash))
    stages = tuple(stage for stage in (stepping, tuple(acc.actions)) if stage)
    problems = reporting.bounded(acc.problems)
    digest = targets.plan_hash(pool, desired)
    busy = any(r.phase in BUSY for r in acc.reports)
    requeue = DRAIN_REQUEUE_S if busy or stages else GATE_REQUEUE_S if gate else None
    return Plan(
        stages=stages,
        hash=digest,
        counts=reporting.counts(acc.reports),
        problems=problems,
        summary=RolloutPlan(
            hash=digest,
            nodes_to_change=sum(1 for r in acc.reports if r.phase != ReportPhase.UPDATED),
            pods_to_evict=acc.to_evict,
            blocking_pdbs=sorted(acc.blocking),
        ),
        verdict=reporting.verdict(acc.reports, problems, gate),
        nodes=tuple(acc.reports),
        requeue_after=requeue,
        short_of_room=admitted.short,
        unavailable=admitted.taken,
        scopes=reporting.scopes(acc.reports),
    )


def _queue(
    ctx: StepContext,
    desired: Mapping[str, DesiredNode],
    nodes: Sequence[NodeView],
    admitted: starting.Starts,
    approved: str | None,
) -> list[act.Action]:
    """Queue the members that wait for a slot while a node of the pool is in flight or starts
    and no pool-wide gate (pause, window, approval) is closed."""
    outcomes = admitted.outcomes
    waiting = {o.node for o in outcomes if o.phase == ReportPhase.PENDING and o.problem is None}
    flying = any(
        n.state is not None and n.state.owner == ctx.owner and in_flight(n.state) for n in nodes
    ) or any(o.phase == ReportPhase.CORDONED for o in outcomes)
    under_way = flying and starting.gate(ctx, desired, approved) is None
    return queueing.tidy(ctx.owner, nodes, waiting, under_way)


def visit(
    ctx: StepContext, acc: _Pass, node: NodeView, d: DesiredNode | None, held: str | None = None
) -> None:
    """Step an in-flight node, or classify an idle one (updated, invalid, failed, candidate).
    ``held``: why the node must not go on (``plan(hold=)``): started and untouched, it is
    backed out."""
    s = node.state
    if node.state_error:
        msg = f"rollout state unreadable ({node.state_error}); fix or remove the annotation"
        acc.problem(node.name, ReportPhase.FAILED, "NodeFailed", msg)
        acc.report(node.name, d, ReportPhase.FAILED, msg)
        return
    if s is not None and s.owner != ctx.owner:
        if in_flight(s):
            acc.report(
                node.name, d, ReportPhase.PENDING, f"{node.name} is being changed by {s.owner}"
            )
            return
        s = None
    if s is not None and in_flight(s):
        if d is None:
            why = f"{node.name} left pool {ctx.owner}"
            acc.take(back_out(node, s, ctx.now, ctx.verify_timeout, why), s, d)
            return
        if held is not None and unasked(node, s):
            acc.take(release(node, s, ctx.now, held), s, d)
            return
        o = step(ctx, node, s, d)
        released = o.phase in (ReportPhase.PENDING, ReportPhase.UPDATED)
        if not released and (
            untouched(s) or o.phase in (ReportPhase.DRAINING, ReportPhase.BLOCKED)
        ):
            acc.to_evict += len(ctx.leaving(node, s))
        acc.take(o, s, d)
        return
    acc.tidy[node.name] = idle(node, s, d, ctx.owner)
    if d is None:
        return
    if d.invalid:
        msg = f"the layout is impossible on this node: {d.invalid}"
        acc.problem(node.name, ReportPhase.PENDING, "InvalidGeometryForModel", msg)
        acc.report(node.name, d, ReportPhase.PENDING, msg)
    elif s is not None and s.goal == d.target:
        acc.problem(node.name, ReportPhase.FAILED, "NodeFailed", s.message, ts(s.since))
        acc.report(node.name, d, ReportPhase.FAILED, s.message)
    elif targets.verified(target := targets.target_of(d), node):
        acc.report(node.name, d, ReportPhase.UPDATED)
    elif targets.waiting_for_driver(target, node):  # not drift: nothing to check it against
        msg = f"layout {d.target} requested; {node.name} publishes no complete pool of {DRIVER}"
        acc.report(node.name, d, ReportPhase.UPDATED, msg, no_driver=True)
    elif targets.agent_unheard(target, node):  # its first verdict could answer our request
        msg = (
            f"not started: the vGPU Device Manager on {node.name} has not reported yet "
            f"({target.watch} unset)"
        )
        acc.report(node.name, d, ReportPhase.PENDING, msg)
    elif not targets.driver_present(target, node):  # its new devices could never be verified
        msg = (
            f"not started: layout {d.target} differs, but {node.name} has no complete "
            f"ResourceSlice pool of {DRIVER} and no ready pod of DaemonSet {target.plugin}"
        )
        acc.report(node.name, d, ReportPhase.PENDING, msg, no_driver=True)
    else:
        acc.candidates.append((node, d))


def idle(node: NodeView, s: NodeState | None, d: DesiredNode | None, pool: str) -> list[act.Action]:
    """Writes for a node no rollout holds: lift this pool's leftover taint, drop a settled record.

    An idle node is never tainted. Tessera's taint keeps pods off a node only
    while the budgeted rollout holds it (``starting`` writes it with the cordon):
    a taint on a node waiting for its turn, for an approval, a window or an
    unpaused spec would take it out of scheduling outside the budget. A taint
    some other pool holds is that pool's to lift.
    """
    acts: list[act.Action] = []
    if node.has_taint(GEOMETRY_PENDING) and (d is None or node.held_by(pool)):
        why = (
            f"{node.name} is not in pool {pool}" if d is None else f"no rollout of {pool} holds it"
        )
        acts.append(act.RemoveTaint(node.name, GEOMETRY_PENDING, why))
    if s is not None and (
        d is None or (not d.invalid and targets.verified(targets.target_of(d), node))
    ):
        why = f"{node.name} is not in pool {pool}" if d is None else f"layout {d.target} is live"
        check(s.phase, None, node.name)  # a settled record (a finished rollback)
        acts.append(act.ClearNodeState(node.name, why))
    return acts
