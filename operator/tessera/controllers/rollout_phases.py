"""``tessera_rollout_nodes`` and ``tessera_rollout_budget_nodes`` for each object's rollout:
its nodes by phase, and the nodes counted against its ``maxUnavailable`` by why."""

from __future__ import annotations

from collections import Counter

from tessera.domain import rollout
from tessera.domain.rollout.budget import Holder
from tessera.observability import metrics

GAUGES = {  # tessera_rollout_nodes' phase label -> the Plan's count of it
    "Updated": "updated",
    "InProgress": "in_progress",
    "Pending": "pending",
    "Blocked": "blocked",
    "Failed": "failed",
}


def export(kind: str, name: str, plan: rollout.Plan | None) -> None:
    """Both gauges for one object; ``None``: none of its nodes is rolling.

    The budget's ``reason`` label takes the few values of ``budget.Holder`` (never a node's
    name): ``Rollout`` (this object's own rollout), ``OtherRollout``, ``Cordoned``,
    ``Tainted``, ``NotReady`` (the others, whose nodes hold the budget until they act).
    """
    for phase, count in GAUGES.items():
        value = getattr(plan.counts, count) if plan is not None else 0
        metrics.NODES_BY_PHASE.labels(kind, name, phase).set(value)
    held = Counter(u.holder for u in plan.unavailable) if plan is not None else Counter()
    for reason in Holder:
        metrics.BUDGET_NODES.labels(kind, name, reason.value).set(held[reason])


def forget(kind: str, name: str) -> None:
    """Drop the object's series once it is gone (a deleted pool must not linger in Prometheus)."""
    series = [(metrics.NODES_BY_PHASE, phase) for phase in GAUGES]
    series += [(metrics.BUDGET_NODES, reason.value) for reason in Holder]
    for gauge, label in series:
        try:
            gauge.remove(kind, name, label)
        except KeyError:
            continue  # never exported by this replica
