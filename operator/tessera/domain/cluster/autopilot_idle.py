"""The autopilot's recheck at node start: are the GPUs its choice changes still idle?

The autopilot chooses idle GPUs (``cluster.autopilot.step``) and records the choice; the
rollout reaches each node later, one budget at a time. A pod may land on a chosen GPU in
between, and the per-GPU rollout would then drain it. So while a choice is in effect the
rollout starts a node only when no pod would have to leave it (``recheck``): a node that
would evict is held (``hold``), and the autopilot's pass turns what was found into its
``Busy`` outcome (``cluster.autopilot.step``):

- the GPU a pod now holds is known (the GPU node agent's record covers the node's pods):
  the choice for that GPU index is **withdrawn** when no node of the pool runs it yet —
  the index goes back to the layout every node runs there, so nothing rolls for it — and
  the loop decides again from there; when some node already runs it, the busy node waits;
- which GPU is not known (the record is stale for a pod that came after it was read, or
  names no GPU for it): the node waits until the record says; nothing is evicted.

Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tessera.api.v1alpha1.common import DrainSpec
from tessera.domain.rollout import scope
from tessera.domain.rollout.views import DesiredNode, Layout, NodeView, PodView


@dataclass(frozen=True, slots=True)
class Busy:
    """A node the choice would change while pods hold what changes."""

    node: str
    gpus: tuple[int, ...]  # the changed GPUs a pod holds; () when which is not known
    pods: tuple[str, ...]  # namespace/name of the pods that would have to leave
    why: str  # for a person: what holds what


def recheck(
    owner: str,
    desired: Mapping[str, DesiredNode],
    nodes: Sequence[NodeView],
    pods: Sequence[PodView],
    drain: DrainSpec,
) -> tuple[Busy, ...]:
    """The nodes of the pool not yet started for their change on which a pod would have to
    leave. A node this rollout holds already (cordoned and tainted) is not rechecked:
    nothing new lands on it."""
    on: dict[str, list[PodView]] = {}
    for pod in pods:
        on.setdefault(pod.node, []).append(pod)
    found: list[Busy] = []
    for node in sorted(nodes, key=lambda n: n.name):
        d = desired.get(node.name)
        if d is None or d.layout is None or node.layout == d.layout:
            continue
        s = node.state
        if s is not None and s.owner == owner and not s.rolled_back:
            continue
        mine = on.get(node.name, [])
        where = scope.decide(node, d, mine, drain)
        leaving = scope.leaving(node, where, mine, drain)
        if leaving:
            found.append(_busy(node, where, leaving))
    return tuple(found)


def _busy(node: NodeView, where: scope.Scope, leaving: Sequence[PodView]) -> Busy:
    refs = tuple(p.ref for p in leaving)
    named = ", ".join(refs[:3]) + (", ..." if len(refs) > 3 else "")
    held: set[int] = set()
    known = where.gpus is not None and node.holders is not None
    for pod in leaving:
        gpus = node.holders.gpus_of(pod.ref) if known and node.holders else None
        if not gpus or where.gpus is None:
            known = False
            break
        held |= set(gpus) & set(where.gpus)
    if known and held:
        gpus = tuple(sorted(held))
        where_ = ", ".join(f"{node.name}/{i}" for i in gpus)
        return Busy(node.name, gpus, refs, f"GPU {where_} holds {named} since the choice")
    what = where.whole or "the GPU node agent's record does not place them"
    return Busy(
        node.name, (), refs, f"{node.name} holds {named} on GPUs the choice changes ({what})"
    )


def hold(busy: Sequence[Busy]) -> dict[str, str]:
    """The rollout's hold: node -> why it does not start (``rollout.plan(hold=)``)."""
    return {b.node: f"not started: {b.why}; the autopilot changes idle GPUs only" for b in busy}


def withdrawable(
    busy: Sequence[Busy], nodes: Sequence[NodeView], members: Sequence[str]
) -> dict[int, tuple[tuple[str, int], ...]]:
    """GPU index -> the layout it goes back to, for each busy GPU no member runs the choice
    on yet: every member runs the same layout there (the one before the choice)."""
    layouts: dict[str, Layout | None] = {n.name: n.layout for n in nodes if n.name in members}
    out: dict[int, tuple[tuple[str, int], ...]] = {}
    for b in busy:
        before = layouts.get(b.node)
        if before is None:
            continue
        for i in b.gpus:
            runs = {
                lay[i] if lay is not None and i < len(lay) else None for lay in layouts.values()
            }
            if runs == {before[i]}:
                out[i] = before[i]
    return out
