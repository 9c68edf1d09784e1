"""What a pass persists: a node's phase before and after each write of its record.

``phase_spy`` sees the calls to ``state.check``, so it cannot see a phase changed
without one (a ``NodeState`` built directly, ``replace(s, phase=...)``). These
helpers look at what is written instead, and ``ONE_WRITE`` says which changes
one write may make.

One write is not always one edge: a single pass may take several and persist
only the last (Cordoned → Draining → Applying → Verifying when nothing is left
to evict; Verifying → Applying → Draining → Blocked when a retarget finds pods).
The phases a pass goes *through* are only Draining and Applying: every other
phase is written before it is left (Cordoned before the drain, Verifying with
the labels, Failed and Blocked for the pool to see, Uncordoning before anything
is lifted). So a write may change ``before`` into ``after`` only along the table
with nothing but Draining and Applying in between; rewriting the same phase
(new bookkeeping) is no change.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rollout_world import World

from tessera.domain.rollout import actions as act
from tessera.domain.rollout.state import TRANSITIONS, Edge, Phase
from tessera.domain.rollout.views import NodeView

PASSED_THROUGH = frozenset({Phase.DRAINING, Phase.APPLYING})


def _one_write() -> frozenset[Edge]:
    out: set[Edge] = {(p, p) for p in Phase}
    for start in TRANSITIONS:
        frontier = set(TRANSITIONS[start])
        seen: set[Phase | None] = set()
        while frontier:
            p = frontier.pop()
            out.add((start, p))
            if p in PASSED_THROUGH and p not in seen:
                seen.add(p)
                frontier |= TRANSITIONS[p]
    return frozenset(out)


ONE_WRITE = _one_write()


def phase(view: NodeView) -> Phase | None:
    assert not view.state_error, f"{view.name}: {view.state_error}"
    return view.state.phase if view.state is not None else None


def applied(world: World, a: act.Action) -> Edge | None:
    """Apply ``a``; for a write of the record, the phase on the node before and after it."""
    if not isinstance(a, act.SetNodeState | act.ClearNodeState):
        world.apply(a)
        return None
    before = phase(world.view(a.node))
    world.apply(a)
    return before, phase(world.view(a.node))


def planned(nodes: Sequence[NodeView], actions: Iterable[act.Action]) -> list[Edge]:
    """The changes ``actions`` make to the records of ``nodes``, write by write, in order."""
    now = {n.name: n.state.phase if n.state else None for n in nodes if not n.state_error}
    out: list[Edge] = []
    for a in actions:
        if isinstance(a, act.SetNodeState | act.ClearNodeState):
            assert a.node in now, f"{a.node}: written over a record that did not decode"
            after = a.state.phase if isinstance(a, act.SetNodeState) else None
            out.append((now[a.node], after))
            now[a.node] = after
    return out


def not_one_write(changes: Iterable[Edge]) -> list[str]:
    """The changes no single write may make, readable (empty when all are fine)."""
    return sorted(
        {f"{a or '(none)'} -> {b or '(none)'}" for a, b in changes if (a, b) not in ONE_WRITE}
    )
