"""Giving a node back: lift Tessera's taint and cordon, then forget the node.

The order is the whole point. ``Uncordoning`` is persisted first, then the
taint and the cordon go, and the state is cleared *last*; a crash anywhere in
between leaves a record that makes the next pass finish the job. The cordon is
lifted only when the persisted original state was schedulable: a node someone
else cordoned stays cordoned.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from tessera.domain.rollout import actions as act
from tessera.domain.rollout import targets
from tessera.domain.rollout.outcome import RolloutOutcome
from tessera.domain.rollout.state import NodeState, Phase, ReportPhase, check
from tessera.domain.rollout.views import GEOMETRY_PENDING, UNSCHEDULABLE_TAINT, NodeView


def release(
    node: NodeView, s: NodeState, now: datetime, why: str, *, settle: bool = False
) -> RolloutOutcome:
    """Finish with ``node``. With ``settle`` a finished rollback leaves a Failed record behind.

    That record (phase Failed, ``rolledBack``) stops the planner from retrying
    the layout that failed until the spec asks for a different one.
    """
    first = s if s.phase == Phase.UNCORDONING else s.to(Phase.UNCORDONING, now, why)
    acts: list[act.Action] = []
    if node.has_taint(GEOMETRY_PENDING):
        acts.append(act.RemoveTaint(node.name, GEOMETRY_PENDING, why))
    if node.unschedulable and not s.orig:
        acts.append(act.Uncordon(node.name, f"{why}; Tessera cordoned it"))
    final: act.Action
    if settle and s.rollback_of:
        text = f"layout {s.rollback_of} failed; rolled back to {s.target.id}"
        settled = replace(first.to(Phase.FAILED, now, text), rolled_back=True, evictions={})
        final = act.SetNodeState(node.name, settled, text)
        phase = ReportPhase.FAILED
    else:
        check(first.phase, None, node.name)
        final = act.ClearNodeState(node.name, why)
        phase = ReportPhase.UPDATED if settle else ReportPhase.PENDING
    return RolloutOutcome(
        node=node.name,
        phase=phase,
        why=why,
        state=first,
        actions=acts,
        final=final,
        releases=True,
    )


def after(node: NodeView, o: RolloutOutcome) -> NodeView:
    """``node`` once the release ``o`` has landed: no record in flight (a settled rollback's,
    or none), Tessera's taint gone, and uncordoned when ``o`` lifts the cordon (the taint the
    node lifecycle controller mirrors it into goes with it). A cordon someone else set stays:
    the node still counts against the budget (``budget``), whoever set it."""
    uncordoned = any(isinstance(a, act.Uncordon) for a in o.actions)
    lifted = {GEOMETRY_PENDING.key, *((UNSCHEDULABLE_TAINT,) if uncordoned else ())}
    return replace(
        node,
        state=o.final.state if isinstance(o.final, act.SetNodeState) else None,
        taints=tuple(t for t in node.taints if t.key not in lifted),
        unschedulable=node.unschedulable and not uncordoned,
    )


def finished(s: NodeState, node: NodeView, now: datetime, verify_timeout: timedelta) -> bool:
    """Whether a Verifying node has an answer (success, failure or timeout)."""
    return (
        targets.verified(s.target, node)
        or targets.agent_state(s.target, node) == targets.FAILED
        or now - s.since > verify_timeout
    )


def back_out(
    node: NodeView, s: NodeState, now: datetime, verify_timeout: timedelta, why: str
) -> RolloutOutcome:
    """Release a node whose pool is gone (or that left the pool).

    A node whose device change is under way is allowed to finish first (the
    agent is mid-flight; lifting the cordon now would let pods land on a GPU
    being repartitioned). Everything else is released at once: an untouched
    node was never changed, and a failed one must not stay cordoned by a
    Tessera object that no longer exists.
    """
    if s.phase == Phase.VERIFYING and not finished(s, node, now, verify_timeout):
        text = f"waiting for layout {s.target.id} to finish before releasing {node.name}"
        return RolloutOutcome(node=node.name, phase=ReportPhase.VERIFYING, why=text, waiting=True)
    return release(node, s, now, why)
