"""``tessera_rollout_nodes``: how many nodes of each object's rollout are in each phase."""

from __future__ import annotations

from tessera.domain import rollout
from tessera.observability import metrics

GAUGES = {  # tessera_rollout_nodes' phase label -> the Plan's count of it
    "Updated": "updated",
    "InProgress": "in_progress",
    "Pending": "pending",
    "Blocked": "blocked",
    "Failed": "failed",
}


def export(kind: str, name: str, plan: rollout.Plan | None) -> None:
    """``tessera_rollout_nodes`` for one object; ``None``: none of its nodes is rolling."""
    for phase, count in GAUGES.items():
        value = getattr(plan.counts, count) if plan is not None else 0
        metrics.NODES_BY_PHASE.labels(kind, name, phase).set(value)


def forget(kind: str, name: str) -> None:
    """Drop the object's series once it is gone (a deleted pool must not linger in Prometheus)."""
    for phase in GAUGES:
        try:
            metrics.NODES_BY_PHASE.remove(kind, name, phase)
        except KeyError:
            continue  # never exported by this replica
