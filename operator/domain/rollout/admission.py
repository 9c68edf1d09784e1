"""Which waiting nodes may start now: the gates, the budget, the pre-flight check.

A node starts only if the rollout is not paused, the maintenance window is
open, the plan is approved (``approval: Manual``), its drain is not known to
be impossible (a pod kubectl would refuse to evict: better to report it than
to leave a node cordoned for nothing, the pre-flight idea of k/k PR #45233),
and a disruption slot is free. A node that is already unschedulable takes no
new slot (it is already counted as unavailable) and will be left cordoned at
the end, since Tessera did not cordon it; but Tessera's taint goes on it as on
any node it changes, so it starts only while fewer than ``maxUnavailable``
nodes carry Tessera's marks: several nodes cordoned by others are changed one
budget at a time, never all at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from . import actions as act
from . import capacity, gates, selection, targets
from .machine import Context
from .outcome import Outcome, Problem, stuck
from .state import IllegalTransition, NodeState, Phase, ReportPhase, check
from .views import GEOMETRY_PENDING, DesiredNode, NodeView, PodView


def disrupted(nodes: Sequence[NodeView], desired: Mapping[str, DesiredNode]) -> dict[str, str]:
    """Nodes that count against maxUnavailable, each with why, in the words status shows.

    A node counts while it is mid-change, NotReady, carries Tessera's taint, or
    is cordoned. A cordon someone else set stops counting once Tessera is done
    with the node (it runs its target, or settled a rollback): it stays
    cordoned, but Tessera's rollout no longer disrupts it.
    """
    out: dict[str, str] = {}
    for n in nodes:
        busy = n.state is not None and not n.state.rolled_back
        d = desired.get(n.name)
        if d is None and not busy:
            continue
        if busy or n.state_error:
            out[n.name] = "being changed"
        elif not n.ready:
            out[n.name] = "NotReady"
        elif n.has_taint(GEOMETRY_PENDING):
            out[n.name] = "tainted"
        elif n.unschedulable and not done(n, d):
            out[n.name] = "cordoned by someone else"
    return out


def marked(nodes: Sequence[NodeView], taken: Mapping[str, str]) -> dict[str, str]:
    """The nodes of ``taken`` that carry Tessera's own marks (a rollout in flight, its
    taint): what an outside observer counts as held by Tessera."""
    tainted = {n.name for n in nodes if n.has_taint(GEOMETRY_PENDING)}
    return {n: why for n, why in taken.items() if why == "being changed" or n in tainted}


def done(node: NodeView, d: DesiredNode | None) -> bool:
    """Tessera has nothing left to do on this node: it runs its target or settled a rollback."""
    settled = node.state is not None and node.state.rolled_back
    return d is not None and not d.invalid and (settled or targets.at_target(node, d))


def in_use(taken: Mapping[str, str], limit: int) -> str:
    """``2 of 2 in use: gpu-1 being changed, gpu-4 cordoned by someone else``."""
    names = sorted(taken)
    shown = ", ".join(f"{n} {taken[n]}" for n in names[:5])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"{len(taken)} of {limit} in use: {shown}{more}" if taken else f"0 of {limit} in use"


def gate(
    ctx: Context, desired: Mapping[str, DesiredNode], approved: str | None
) -> tuple[str, str] | None:
    """(reason, message) when no new node may start for a pool-wide reason."""
    policy = ctx.policy
    if policy.paused:
        return "RollingOut", "paused (spec.rollout.paused); nodes in flight finish"
    inside, why = gates.in_window(policy.window, ctx.now)
    if not inside:
        return "WaitingForWindow", why
    digest = targets.plan_hash(ctx.owner, desired)
    if policy.approval == "Manual" and approved != digest:
        return "WaitingForApproval", (
            f"plan {digest} needs approval: annotate the object with tessera.io/approve-plan={digest}"
        )
    return None


def admit(
    ctx: Context,
    desired: Mapping[str, DesiredNode],
    nodes: Sequence[NodeView],
    candidates: Sequence[tuple[NodeView, DesiredNode]],
    approved: str | None,
    *,
    freed: Set[str] = frozenset(),
) -> tuple[tuple[str, str] | None, list[Outcome], str]:
    """One Outcome per candidate: Cordoned for those admitted, Pending (with why) for the rest.

    ``freed``: nodes this pass releases before any admission runs; their slots are free.
    A node whose evicted pods would find no room elsewhere (``capacity``) is not
    started; the first such reason is returned as the pool's gate when no other
    gate is closed, so the pool says ``InsufficientCapacity`` while nothing else moves.
    The third value is that shortfall, also while another gate (approval, window, pause)
    is closed: what opening it would meet, for ``tessera plan`` to say before approval.
    """
    if not candidates:
        return None, [], ""
    closed = gate(ctx, desired, approved)
    taken = {n: why for n, why in disrupted(nodes, desired).items() if n not in freed}
    slots = _Slots(ctx, taken, marked(nodes, taken), room_for(ctx, nodes, taken, freed))
    slots.limit = gates.budget(ctx.policy.max_unavailable, len(desired))
    slots.free = slots.would = slots.limit - len(taken)
    pods = {
        n.name: selection.selected(ctx.pods.get(n.name, ()), ctx.policy.drain)
        for n, _ in candidates
    }
    order = sorted(
        candidates,
        key=lambda c: (
            not (c[0].unschedulable and c[0].name in taken),
            len(pods[c[0].name]),
            c[0].name,
        ),
    )
    outcomes = [slots.decide(node, d, pods[node.name], closed) for node, d in order]
    starved = slots.starved
    return closed or starved, outcomes, starved[1] if starved else ""


class _Slots:
    """The disruption slots of one admission pass, spent candidate by candidate."""

    def __init__(
        self,
        ctx: Context,
        taken: dict[str, str],
        held: dict[str, str],
        ledger: capacity.Ledger | None,
    ) -> None:
        self.ctx, self.taken, self.held, self.ledger = ctx, taken, held, ledger
        self.limit = self.free = 0
        self.would = 0  # the slots an open gate would offer (the preview while it is closed)
        self.starved: tuple[str, str] | None = None

    def decide(
        self,
        node: NodeView,
        d: DesiredNode,
        chosen: Sequence[PodView],
        closed: tuple[str, str] | None,
    ) -> Outcome:
        """Start ``node`` (taking a slot unless it is already cordoned) or say why it waits."""
        taken, ledger = self.taken, self.ledger
        try:  # before any slot is spent: a record no start may follow stops this node only
            check(node.state.phase if node.state else None, Phase.CORDONED, node.name)
        except IllegalTransition as err:
            return stuck(node.name, err)
        wait = _waiting(self.ctx, node, chosen)
        starts = (node.unschedulable and node.name in taken) or self.free > 0
        if wait.problem is not None:  # a pod kubectl would refuse to evict: never started
            return wait
        if closed is not None:
            wait.why = closed[1]
            if ledger and self.would > 0 and node.ready:  # what approval would meet, nothing starts
                if short := ledger.fit(node.name, chosen):
                    self.starved = self.starved or (capacity.REASON, short)
                else:
                    self.would -= 1
        elif not node.ready:
            wait.why = f"{node.name} is NotReady"
        elif node.unschedulable and node.name in taken and len(self.held) >= self.limit:
            wait.why = (
                f"already unschedulable; waiting for a disruption slot: "
                f"{in_use(self.held, self.limit)}"
            )
        elif (short := ledger.fit(node.name, chosen) if ledger and starts else "") != "":
            wait.why = f"not started: {short}"
            self.starved = self.starved or (capacity.REASON, short)
        elif node.unschedulable and node.name in taken:
            slot = "already unschedulable, takes no new slot and stays cordoned afterwards"
            self.held[node.name] = "being changed"
            return start(self.ctx, node, d, slot, wait)
        elif self.free <= 0:
            wait.why = f"waiting for a disruption slot: {in_use(taken, self.limit)}"
        else:
            slot = f"{self.free} of {self.limit} disruption slots free"
            self.free -= 1
            taken[node.name] = self.held[node.name] = "being changed"
            return start(self.ctx, node, d, slot, wait)
        return wait


def _waiting(ctx: Context, node: NodeView, chosen: Sequence[PodView]) -> Outcome:
    """The Pending outcome of ``node``: its pods, the PDBs that allow no disruption now, and
    the pod kubectl would refuse to evict (then the node is not started at all)."""
    pdbs = {
        g.ref for p in chosen for g in selection.guarding(p, ctx.pdbs) if g.disruptions_allowed <= 0
    }
    wait = Outcome(
        node=node.name,
        phase=ReportPhase.PENDING,
        why="",
        pods_left=len(chosen),
        blocking_pdbs=pdbs,
    )
    hard = [h for p in chosen if (h := selection.hard_blocker(p, ctx.policy.drain, ctx.pdbs))]
    if hard:
        wait.why = f"not started, the drain could not finish: {'; '.join(hard)}"
        wait.problem = Problem("DrainBlocked", wait.why)
    return wait


def room_for(
    ctx: Context, nodes: Sequence[NodeView], taken: Mapping[str, str], freed: Set[str]
) -> capacity.Ledger | None:
    """The room outside this pool's disrupted nodes, after the pods of its draining nodes.

    A node this pass releases (``freed``) counts as open unless it stays cordoned.
    """
    if ctx.room is None:
        return None
    reopened = {n.name for n in nodes if n.name in freed and n.state and not n.state.orig}
    ledger = capacity.Ledger(ctx.room, set(taken), reopened)
    for name, why in sorted(taken.items()):
        if why == "being changed":
            ledger.settle(name, selection.selected(ctx.pods.get(name, ()), ctx.policy.drain))
    return ledger


def start(ctx: Context, node: NodeView, d: DesiredNode, slot: str, wait: Outcome) -> Outcome:
    """Reserve the node (state written *before* the cordon, with the original schedulability)."""
    why = f"cordon {node.name}: layout {d.target} differs; {slot}"
    check(node.state.phase if node.state else None, Phase.CORDONED, node.name)  # or settled
    state = NodeState(
        phase=Phase.CORDONED,
        owner=ctx.owner,
        target=targets.target_of(d),
        orig=node.unschedulable,
        since=ctx.now,
        last_good=targets.snapshot(d, node),
    )
    acts: list[act.Action] = []
    if not node.has_taint(GEOMETRY_PENDING):
        acts.append(act.AddTaint(node.name, GEOMETRY_PENDING, why))
    if not node.unschedulable:
        acts.append(act.Cordon(node.name, why))
    return Outcome(
        node=node.name,
        phase=ReportPhase.CORDONED,
        why=why,
        state=state,
        actions=acts,
        pods_left=wait.pods_left,
        blocking_pdbs=wait.blocking_pdbs,
    )
