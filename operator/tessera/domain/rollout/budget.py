"""Who holds a pool's disruption budget: every unavailable member, whoever made it so.

``maxUnavailable`` reads as a Deployment's: every member of the pool that is out of
scheduling counts against it — a node Tessera's rollout holds, a cordon someone else set
(also once Tessera is done with the node: it is still out of scheduling), another
controller's NoSchedule or NoExecute taint, a node gone NotReady — including the members
that need no change at all. A node that left the pool counts while a rollout still holds it.

Three kinds of taint are not counted as a taint of their own:

- the ones the node lifecycle controller mirrors the node's conditions into: its
  ``unschedulable`` taint says what ``spec.unschedulable`` says (the cordon counts by itself,
  and the taint outlives Tessera's own uncordon for a moment), its ``not-ready`` and
  ``unreachable`` taints count as NotReady (they outlive the node's return for a moment, and
  pods cannot land there until they go);
- Tessera's own ``tessera.io/geometry-pending``, which counts as a rollout's;
- a taint every member of the pool carries (same key and effect): that is the pool's
  dedication (``nvidia.com/gpu=present:NoSchedule`` on a GPU node pool), which its
  workloads tolerate, not an outage. Were it one, every member would be out already, and
  no start could add to the count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from enum import StrEnum

from tessera.domain.rollout.views import GEOMETRY_PENDING, UNSCHEDULABLE_TAINT, NodeView

NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
_NOT_A_TAINT = NOT_READY_TAINTS | {UNSCHEDULABLE_TAINT, GEOMETRY_PENDING.key}
_HARD = ("NoSchedule", "NoExecute")


class Holder(StrEnum):
    """Why a node counts against the budget, as ``tessera_rollout_budget_nodes{reason}`` says."""

    ROLLOUT = "Rollout"
    """This object's own rollout holds it (its record, its taint, an unreadable record)."""
    OTHER_ROLLOUT = "OtherRollout"
    """Another Tessera object's rollout holds it."""
    NOT_READY = "NotReady"
    CORDONED = "Cordoned"
    """Cordoned by someone else: Tessera's own cordon comes with its record."""
    TAINTED = "Tainted"
    """Another controller's (or a person's) NoSchedule or NoExecute taint."""


@dataclass(frozen=True)
class Unavailable:
    """One node counted against the budget."""

    node: str
    why: str
    """In the words status shows: ``being changed``, ``cordoned by someone else``, ``NotReady``."""
    holder: Holder
    marked: bool
    """It carries Tessera's marks (a rollout in flight, an unreadable record, Tessera's
    taint): what an outside observer counts as held by Tessera."""

    @property
    def by_others(self) -> bool:
        """Not this object's doing: it frees the budget only when someone else acts (or the
        node comes back)."""
        return self.holder is not Holder.ROLLOUT


def unavailable(owner: str, nodes: Sequence[NodeView], members: Set[str]) -> dict[str, Unavailable]:
    """Every node of ``nodes`` that counts against ``owner``'s budget, by name.

    ``members``: the names of the pool's nodes; another node of ``nodes`` counts only while
    a rollout holds it.
    """
    dedicated = dedications(n for n in nodes if n.name in members)
    out: dict[str, Unavailable] = {}
    for n in nodes:
        found = classify(owner, n, n.name in members, dedicated)
        if found is not None:
            out[n.name] = found
    return out


def dedications(members: Iterable[NodeView]) -> frozenset[tuple[str, str]]:
    """The (key, effect) of the NoSchedule and NoExecute taints every member carries."""
    common: set[tuple[str, str]] | None = None
    for n in members:
        hard = {(t.key, t.effect) for t in n.taints if t.effect in _HARD}
        common = hard if common is None else common & hard
    return frozenset(common or ())


def classify(
    owner: str, n: NodeView, member: bool, dedicated: Set[tuple[str, str]] = frozenset()
) -> Unavailable | None:
    """Why ``n`` counts against ``owner``'s budget, or None when it is available."""
    s = n.state
    busy = s is not None and not s.rolled_back
    marked = busy or bool(n.state_error) or n.has_taint(GEOMETRY_PENDING)

    def held(why: str, holder: Holder) -> Unavailable:
        return Unavailable(n.name, why, holder, marked)

    if s is not None and busy:
        if s.owner == owner:
            return held("being changed", Holder.ROLLOUT)
        return held(f"being changed by {s.owner}", Holder.OTHER_ROLLOUT)
    if not member:
        return None
    if n.state_error:
        return held("rollout state unreadable", Holder.ROLLOUT)
    if not n.ready or any(t.key in NOT_READY_TAINTS for t in n.taints):
        return held("NotReady", Holder.NOT_READY)
    if n.has_taint(GEOMETRY_PENDING):
        if n.held_by(owner):  # a leftover of its own, lifted this pass
            return held("tainted", Holder.ROLLOUT)
        return held("tainted by another rollout", Holder.OTHER_ROLLOUT)
    if n.unschedulable:
        return held("cordoned by someone else", Holder.CORDONED)
    foreign = sorted(
        f"{t.key}:{t.effect}"
        for t in n.taints
        if t.effect in _HARD and t.key not in _NOT_A_TAINT and (t.key, t.effect) not in dedicated
    )
    if foreign:
        return held(f"tainted {foreign[0]}", Holder.TAINTED)
    return None


def in_use(taken: Iterable[Unavailable], limit: int) -> str:
    """``2 of 2 in use: gpu-1 being changed, gpu-4 cordoned by someone else``."""
    shown = sorted(taken, key=lambda u: u.node)
    if not shown:
        return f"0 of {limit} in use"
    return f"{len(shown)} of {limit} in use: {named(shown)}"


def named(taken: Sequence[Unavailable], most: int = 5) -> str:
    """``gpu-4 cordoned by someone else, gpu-7 NotReady and 3 more``."""
    text = ", ".join(f"{u.node} {u.why}" for u in taken[:most])
    return text + (f" and {len(taken) - most} more" if len(taken) > most else "")
