"""Which waiting nodes may start now: the gates, the budget, the pre-flight check.

A node starts only if the rollout is not paused, the maintenance window is
open, the plan is approved (``approval: Manual``), its drain is not known to
be impossible (a pod kubectl would refuse to evict: better to report it than
to leave a node cordoned for nothing, the pre-flight idea of k/k PR #45233),
and the budget has room for it. The budget counts every unavailable member of
the pool, whoever made it so (``budget``): a cordon someone else set, another
controller's taint, a node gone NotReady, nodes that need no change and nodes
Tessera is done with. Two counts keep it:

- a node still available starts only while fewer than ``maxUnavailable``
  members are unavailable: Tessera never takes the pool beyond it;
- a node already unavailable (cordoned or tainted by someone else) costs no
  capacity to change, so it goes first and takes no new slot, even when others
  use up the whole budget; but Tessera's taint goes on it as on any node it
  changes, so it starts only while fewer than ``maxUnavailable`` nodes carry
  Tessera's marks: several such nodes are changed one budget at a time. A
  cordon someone else set stays once Tessera is done with the node, and it
  still counts.

When the budget is used up by others — nothing of this object's rollout holds
it, and a node waits for room — the pool says so (``HELD_BY_OTHERS``), naming
the nodes that hold it; their coming back is a Node change that wakes the pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tessera.domain.base.conditions import BUDGET_HELD_BY_OTHERS
from tessera.domain.rollout import actions as act
from tessera.domain.rollout import capacity, gates, scope, selection, targets
from tessera.domain.rollout.budget import Holder, Unavailable, in_use, named, unavailable
from tessera.domain.rollout.machine import StepContext
from tessera.domain.rollout.outcome import RolloutOutcome, RolloutProblem, stuck
from tessera.domain.rollout.state import IllegalTransition, NodeState, Phase, ReportPhase, check
from tessera.domain.rollout.views import GEOMETRY_PENDING, DesiredNode, NodeView, PodView

HELD_BY_OTHERS = BUDGET_HELD_BY_OTHERS


def gate(
    ctx: StepContext, desired: Mapping[str, DesiredNode], approved: str | None
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


@dataclass(frozen=True)
class Starts:
    """What one start pass decided."""

    gate: tuple[str, str] | None
    """(reason, message) when no node may start for a pool-wide reason: a closed gate, room
    short for the evicted pods (``InsufficientCapacity``), or a budget held by others."""
    outcomes: list[RolloutOutcome]
    """One per candidate: Cordoned for those admitted, Pending (with why) for the rest."""
    short: str
    """Room short for the pods of a node that could start, also while a gate is closed."""
    taken: tuple[Unavailable, ...] = ()
    """The members counted against the budget once this pass's writes land, by name."""


def admit(
    ctx: StepContext,
    desired: Mapping[str, DesiredNode],
    nodes: Sequence[NodeView],
    candidates: Sequence[tuple[NodeView, DesiredNode]],
    approved: str | None,
    *,
    released: Mapping[str, NodeView] | None = None,
    bystanders: Sequence[NodeView] = (),
    hold: Mapping[str, str] | None = None,
) -> Starts:
    """Decide which candidates start, and who holds the budget.

    ``released``: the nodes this pass releases before any node starts, as they are once
    released (``releasing.after``): their slots are free unless they stay unavailable.
    ``bystanders``: members of the pool this plan changes nothing on, beside ``nodes`` (a
    SharingPolicy's nodes that need no rollout): they count against the budget too, and
    a percentage is of every member. A node whose evicted pods would find no room elsewhere
    (``capacity``) is not started; the first such reason is returned as the pool's gate
    when no other gate is closed, so the pool says ``InsufficientCapacity`` while nothing
    else moves. ``short`` is that shortfall, also while another gate (approval, window,
    pause) is closed: what opening it would meet, for ``tessera plan`` to say before approval.
    ``hold``: candidates that do not start this pass whatever the gates, with why.
    """
    released = released or {}
    after = [released.get(n.name, n) for n in nodes] + list(bystanders)
    members = set(desired) | {n.name for n in bystanders}
    limit = gates.budget(ctx.policy.max_unavailable, len(members))
    taken = unavailable(ctx.owner, after, members)
    if not candidates:
        return Starts(None, [], "", _sorted(taken))
    closed = gate(ctx, desired, approved)
    slots = _Slots(ctx, taken, limit, room_for(ctx, nodes, taken, released), hold or {})
    scopes = {
        n.name: scope.decide(n, d, ctx.pods.get(n.name, ()), ctx.policy.drain)
        for n, d in candidates
    }
    pods = {
        n.name: scope.leaving(n, scopes[n.name], ctx.pods.get(n.name, ()), ctx.policy.drain)
        for n, _ in candidates
    }
    # already unavailable first (changing them costs no capacity), then fewest pods to move
    order = sorted(
        candidates, key=lambda c: (c[0].name not in taken, len(pods[c[0].name]), c[0].name)
    )
    outcomes = [
        slots.decide(node, d, pods[node.name], closed, scopes[node.name]) for node, d in order
    ]
    starved = slots.starved
    found = closed or starved or slots.held_by_others()
    return Starts(found, outcomes, starved[1] if starved else "", _sorted(slots.taken))


def _sorted(taken: Mapping[str, Unavailable]) -> tuple[Unavailable, ...]:
    return tuple(taken[n] for n in sorted(taken))


class _Slots:
    """The disruption budget of one start pass, spent candidate by candidate."""

    def __init__(
        self,
        ctx: StepContext,
        taken: dict[str, Unavailable],
        limit: int,
        ledger: capacity.Ledger | None,
        hold: Mapping[str, str],
    ) -> None:
        self.ctx, self.taken, self.limit, self.ledger = ctx, taken, limit, ledger
        self.hold = hold
        self.held = {n: u for n, u in taken.items() if u.marked}  # Tessera's marks
        self.would = limit - len(taken)  # the slots an open gate would offer (the preview)
        self.starved: tuple[str, str] | None = None
        self.waiting = False  # a node waits for a slot
        self.started = False

    def decide(
        self,
        node: NodeView,
        d: DesiredNode,
        chosen: Sequence[PodView],
        closed: tuple[str, str] | None,
        where: scope.Scope | None = None,
    ) -> RolloutOutcome:
        """Start ``node`` (taking a slot unless it is already unavailable) or say why it waits."""
        try:  # before any slot is spent: a record no start may follow stops this node only
            check(node.state.phase if node.state else None, Phase.CORDONED, node.name)
        except IllegalTransition as err:
            return stuck(node.name, err)
        wait = _waiting(self.ctx, node, chosen)
        already = self.taken.get(node.name)
        down = not node.ready or (already is not None and already.holder is Holder.NOT_READY)
        if wait.problem is not None:  # a pod kubectl would refuse to evict: never started
            return wait
        if node.name in self.hold:  # held by its caller (the autopilot's idle recheck)
            wait.why = self.hold[node.name]
            return wait
        if closed is not None:
            wait.why = closed[1]
            self._preview(node, chosen, already, down)
        elif down:  # also while its not-ready taint outlives the NotReady condition
            wait.why = f"{node.name} is NotReady"
        elif already is not None and len(self.held) >= self.limit:
            wait.why = (
                f"already unavailable ({already.why}); waiting for a disruption slot: "
                f"{in_use(self.held.values(), self.limit)}"
            )
            self.waiting = True
        elif already is None and len(self.taken) >= self.limit:
            wait.why = f"waiting for a disruption slot: {in_use(self.taken.values(), self.limit)}"
            self.waiting = True
        elif self.ledger and (short := self.ledger.fit(node.name, chosen)):
            wait.why = f"not started: {short}"
            self.starved = self.starved or (capacity.REASON, short)
        else:
            if already is not None:
                slot = f"already unavailable ({already.why}), takes no new slot"
                slot += " and stays cordoned afterwards" if node.unschedulable else ""
            else:
                slot = f"{self.limit - len(self.taken)} of {self.limit} disruption slots free"
            mine = Unavailable(node.name, "being changed", Holder.ROLLOUT, marked=True)
            self.taken[node.name] = self.held[node.name] = mine
            self.started = True
            return start(self.ctx, node, d, slot, wait, where or scope.Scope(None))
        return wait

    def _preview(
        self, node: NodeView, chosen: Sequence[PodView], already: Unavailable | None, down: bool
    ) -> None:
        """While a gate is closed nothing starts: what opening it would meet (room short)."""
        if self.ledger and not down and (self.would > 0 or already is not None):
            if short := self.ledger.fit(node.name, chosen):
                self.starved = self.starved or (capacity.REASON, short)
            elif already is None:
                self.would -= 1

    def held_by_others(self) -> tuple[str, str] | None:
        """``HELD_BY_OTHERS`` when a node waits for a slot, nothing started, and every node
        counted against the budget is someone else's: only they can give it back."""
        taken = _sorted(self.taken)
        if not self.waiting or self.started or not all(u.by_others for u in taken):
            return None
        return HELD_BY_OTHERS, (
            f"budget held by others: {named(taken)} ({len(taken)} of {self.limit} in use)"
        )


def _waiting(ctx: StepContext, node: NodeView, chosen: Sequence[PodView]) -> RolloutOutcome:
    """The Pending outcome of ``node``: its pods, the PDBs that allow no disruption now, and
    the pod kubectl would refuse to evict (then the node is not started at all)."""
    pdbs = {
        g.ref for p in chosen for g in selection.guarding(p, ctx.pdbs) if g.disruptions_allowed <= 0
    }
    wait = RolloutOutcome(
        node=node.name,
        phase=ReportPhase.PENDING,
        why="",
        pods_left=len(chosen),
        blocking_pdbs=pdbs,
    )
    hard = [h for p in chosen if (h := selection.hard_blocker(p, ctx.policy.drain, ctx.pdbs))]
    if hard:
        wait.why = f"not started, the drain could not finish: {'; '.join(hard)}"
        wait.problem = RolloutProblem("DrainBlocked", wait.why)
    return wait


def room_for(
    ctx: StepContext,
    nodes: Sequence[NodeView],
    taken: Mapping[str, Unavailable],
    released: Mapping[str, NodeView],
) -> capacity.Ledger | None:
    """The room outside this pool's disrupted nodes, after the pods of its draining nodes.

    A node this pass releases (``released``) counts as open unless it stays unavailable; a
    node another controller's taint keeps out counts as open to the pods tolerating it.
    """
    if ctx.room is None:
        return None
    closed = {n for n, u in taken.items() if u.holder is not Holder.TAINTED}
    ledger = capacity.Ledger(ctx.room, closed, set(released) - set(taken))
    flying = {n.name for n in nodes if n.state_error or (n.state and not n.state.rolled_back)}
    for node in sorted(nodes, key=lambda n: n.name):
        if node.name in flying & set(taken):
            s = node.state
            pods = ctx.pods.get(node.name, ())
            gone = (
                ctx.leaving(node, s)
                if s is not None
                else selection.selected(pods, ctx.policy.drain)
            )
            ledger.settle(node.name, gone)
    return ledger


def start(
    ctx: StepContext,
    node: NodeView,
    d: DesiredNode,
    slot: str,
    wait: RolloutOutcome,
    where: scope.Scope,
) -> RolloutOutcome:
    """Reserve the node (state written *before* the cordon, with the original schedulability).

    The scope is decided here, once (``scope``), and kept on the record: the GPUs that
    change, or why the whole node is drained, said in the Events of the cordon and taint."""
    every = selection.selected(ctx.pods.get(node.name, ()), ctx.policy.drain)
    what = where.text(wait.pods_left, len(every) - wait.pods_left)
    why = f"cordon {node.name}: layout {d.target} differs; {slot}" + (f"; {what}" if what else "")
    check(node.state.phase if node.state else None, Phase.CORDONED, node.name)  # or settled
    state = NodeState(
        phase=Phase.CORDONED,
        owner=ctx.owner,
        target=targets.target_of(d),
        orig=node.unschedulable,
        since=ctx.now,
        last_good=targets.snapshot(d, node),
        gpus=where.gpus,
        whole=where.whole,
    )
    acts: list[act.Action] = []
    if not node.has_taint(GEOMETRY_PENDING):
        acts.append(act.AddTaint(node.name, GEOMETRY_PENDING, why))
    if not node.unschedulable:
        acts.append(act.Cordon(node.name, why))
    return RolloutOutcome(
        node=node.name,
        phase=ReportPhase.CORDONED,
        why=why,
        state=state,
        actions=acts,
        pods_left=wait.pods_left,
        blocking_pdbs=wait.blocking_pdbs,
    )
