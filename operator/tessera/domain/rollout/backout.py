"""Deletion: finish or back out every node a pool holds, so no Tessera cordon is left behind.

The controller calls ``backout`` from the object's finalizer on every pass and
removes the finalizer once ``done`` is true. Nodes whose device change is
under way are allowed to finish (or time out) first; every other node is
released at once. A node whose state is unreadable is cleared but never
uncordoned, because nobody knows any more whether Tessera cordoned it; it is
reported so a person can decide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tessera.api.v1alpha1.common import RolloutSpec
from tessera.domain.rollout import actions as act
from tessera.domain.rollout import gates
from tessera.domain.rollout.releasing import back_out
from tessera.domain.rollout.views import GEOMETRY_PENDING, NodeView, queued_taint


@dataclass(frozen=True)
class Backout:
    actions: tuple[act.Action, ...]
    done: bool
    waiting: tuple[str, ...]
    """Why ``done`` is false: nodes still finishing, one sentence each."""
    warnings: tuple[str, ...]


def backout(pool: str, policy: RolloutSpec, nodes: Sequence[NodeView], now: datetime) -> Backout:
    """``nodes``: every node carrying this owner's state, Tessera's taint or its queue mark."""
    verify_timeout = gates.duration(policy.verify_timeout)
    out: list[act.Action] = []
    waiting: list[str] = []
    warnings: list[str] = []
    for node in sorted(nodes, key=lambda n: n.name):
        s = node.state
        why = f"{pool} is being deleted"
        if node.queued_by(pool):
            out.append(act.RemoveTaint(node.name, queued_taint(pool), why))
        if node.state_error:
            if node.has_taint(GEOMETRY_PENDING):
                out.append(act.RemoveTaint(node.name, GEOMETRY_PENDING, why))
            out.append(act.ClearNodeState(node.name, f"{why}; unreadable state removed"))
            if node.unschedulable:
                warnings.append(f"{node.name} left cordoned: its original state was unreadable")
            continue
        if s is not None and s.owner != pool:
            if not s.rolled_back:
                continue
            s = None
        if s is None:
            if node.has_taint(GEOMETRY_PENDING):
                out.append(act.RemoveTaint(node.name, GEOMETRY_PENDING, why))
            continue
        o = back_out(node, s, now, verify_timeout, why)
        if o.waiting:
            waiting.append(o.why)
        out.extend(o.emit(s))
    return Backout(tuple(out), not out and not waiting, tuple(waiting), tuple(warnings))
