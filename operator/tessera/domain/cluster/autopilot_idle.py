"""The autopilot's recheck: are the GPUs its choice changes still idle, before any pod leaves?

The autopilot chooses idle GPUs (``cluster.autopilot.step``) and records the choice; the
rollout reaches each node later, one budget at a time. A pod may land on a chosen GPU in
between, and the per-GPU rollout would then drain it. So while a choice is in effect every
pass rechecks (``recheck``) each node whose change would make a pod leave:

- a node **not started** yet: it is held (``hold``), Pending, and does not start;
- a node this rollout **started** whose device is not asked to change yet (Cordoned, or a
  later phase before its layout is requested, ``machine.unasked``): a pod the pod cache
  did not hold when the node was cordoned (bound just before the cordon, or bound by name,
  past the scheduler) would be drained by the next step; the node is **backed out** instead
  (its cordon and taint lifted, its record cleared) and waits like a node not started.

A node whose device is asked to change already is not rechecked: nothing is drained from it
under a choice that kept it idle until then. The autopilot's pass turns what was found into
its ``Busy`` outcome (``cluster.autopilot.step``):

- the GPU a pod now holds is known (the GPU node agent's record covers the node's pods):
  the choice for that GPU index is **withdrawn** (``cluster.autopilot.withdrawal``) when
  no node of the pool runs it yet — the index goes back to the layout every node that has
  it runs there, so nothing rolls for it — and the loop decides again from there; when some
  node already runs it, the busy node waits;
- which GPU is not known (the record is stale for a pod that came after it was read, or
  names no GPU for it, or the node's layout is not known): the node waits until the record
  says; nothing is evicted.

Autopilot never evicts: a node held or backed out here takes no eviction this pass. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tessera.api.v1alpha1.common import DrainSpec
from tessera.domain.rollout import machine, scope
from tessera.domain.rollout.views import DesiredNode, Layout, NodeView, PodView


@dataclass(frozen=True, slots=True)
class Busy:
    """A node the choice would change while pods hold what changes."""

    node: str
    gpus: tuple[int, ...]  # the changed GPUs a pod holds; () when which is not known
    pods: tuple[str, ...]  # namespace/name of the pods that would have to leave
    why: str  # for a person: what holds what
    started: bool = False  # the rollout started the node (it is backed out, not held)


def recheck(
    owner: str,
    desired: Mapping[str, DesiredNode],
    nodes: Sequence[NodeView],
    pods: Sequence[PodView],
    drain: DrainSpec,
) -> tuple[Busy, ...]:
    """The nodes of the pool on which a pod would have to leave for the change: those not
    started yet, and those this rollout started whose device is not asked to change yet
    (``machine.unasked``; the scope they were started with, grown by what the target changes now)."""
    on: dict[str, list[PodView]] = {}
    for pod in pods:
        on.setdefault(pod.node, []).append(pod)
    found: list[Busy] = []
    for node in sorted(nodes, key=lambda n: n.name):
        d = desired.get(node.name)
        if d is None or d.layout is None or node.layout == d.layout:
            continue
        s = node.state
        started = s is not None and s.owner == owner and not s.rolled_back
        if started and s is not None and not machine.unasked(node, s):
            continue
        mine = on.get(node.name, [])
        where = _started_scope(node, d) if started else scope.decide(node, d, mine, drain)
        leaving = scope.leaving(node, where, mine, drain)
        if leaving:
            found.append(_busy(node, where, leaving, started))
    return tuple(found)


def _started_scope(node: NodeView, d: DesiredNode) -> scope.Scope:
    """What the next step drains on a started node: its recorded scope, grown by the GPUs
    the target changes now (a retarget keeps both, ``machine.retarget``)."""
    assert node.state is not None
    was = scope.of(node.state)
    if was.gpus is None or node.layout is None or d.layout is None:
        return was
    if len(node.layout) != len(d.layout):
        return scope.Scope(None, f"the layout {node.name} runs now is not known")
    return scope.Scope(tuple(sorted({*was.gpus, *scope.changed(node.layout, d.layout)})))


def _busy(node: NodeView, where: scope.Scope, leaving: Sequence[PodView], started: bool) -> Busy:
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
        why = f"GPU {where_} holds {named} since the choice"
        return Busy(node.name, gpus, refs, why, started)
    what = where.whole or "the GPU node agent's record does not place them"
    why = f"{node.name} holds {named} on GPUs the choice changes ({what})"
    return Busy(node.name, (), refs, why, started)


def hold(busy: Sequence[Busy]) -> dict[str, str]:
    """The rollout's hold: node -> why it does not start, or is backed out before any pod
    leaves it (``rollout.plan(hold=)``)."""
    return {
        b.node: f"{'backed out' if b.started else 'not started'}: {b.why}; "
        "the autopilot changes idle GPUs only"
        for b in busy
    }


def withdrawable(
    busy: Sequence[Busy], nodes: Sequence[NodeView], members: Sequence[str]
) -> dict[int, tuple[tuple[str, int], ...]]:
    """GPU index -> the layout it goes back to, for each busy GPU no member runs the choice
    on yet: every member that has the index runs the same layout there (the one before the
    choice). Members may differ in GPU count; while any member's layout is not known, what
    it runs is not known either, and nothing is withdrawn (the busy nodes wait)."""
    layouts: dict[str, Layout | None] = {n.name: n.layout for n in nodes if n.name in members}
    known = [lay for lay in layouts.values() if lay is not None]
    if len(known) != len(layouts):
        return {}
    out: dict[int, tuple[tuple[str, int], ...]] = {}
    for b in busy:
        before = layouts.get(b.node)
        if before is None:
            continue
        for i in b.gpus:
            if i < len(before) and {lay[i] for lay in known if i < len(lay)} == {before[i]}:
                out[i] = before[i]
    return out
