"""Prometheus metrics Tessera exports on /metrics (docs/observability.md §Metrics).

Defined once here so every name, type and label set is in one place and the
table in docs/observability.md can be checked against it.
"""

from __future__ import annotations

from collections import Counter as Tally
from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

from tessera.domain import rollout
from tessera.domain.rollout.budget import Holder

RECONCILES = Counter(
    "tessera_reconciles_total", "Reconcile passes, by kind and outcome.", ["kind", "outcome"]
)
STATUS_WRITE_FAILURES = Counter(
    "tessera_status_write_failures_total",
    "Status writes the API server refused or never answered, by kind.",
    ["kind"],
)
RECONCILE_SECONDS = Histogram(
    "tessera_reconcile_duration_seconds", "Time of one reconcile pass.", ["kind"]
)
API_WRITES = Counter(
    "tessera_api_writes_total", "Mutating API requests Tessera sent, by verb.", ["verb"]
)
NODES_BY_PHASE = Gauge(
    "tessera_rollout_nodes", "Nodes of a pool by rollout phase.", ["kind", "pool", "phase"]
)
BUDGET_NODES = Gauge(
    "tessera_rollout_budget_nodes",
    "Nodes of a pool counted against maxUnavailable, by why.",
    ["kind", "pool", "reason"],
)
PHASE_SECONDS = Histogram(
    "tessera_rollout_phase_duration_seconds",
    "Time a node spent in a rollout phase.",
    ["phase"],
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
)
EVICTIONS = Counter(
    "tessera_evictions_total", "Evictions attempted, by result (evicted, blocked).", ["result"]
)
ROLLBACKS = Counter("tessera_rollbacks_total", "Rollbacks to the last good layout.", ["pool"])
SHARING_NODES = Gauge(
    "tessera_sharing_nodes", "Nodes of a SharingPolicy by state.", ["policy", "state"]
)
QUOTA = Gauge(
    "tessera_tenant_quota",
    "Tenant quota figures per resource (used, hard, total).",
    ["tenant", "resource", "figure"],
)
AUTOPILOT_DECISIONS = Counter(
    "tessera_autopilot_decisions_total",
    "Decisions of a pool's autopilot, by the profile served (or pending) and the outcome.",
    ["pool", "profile", "outcome"],
)
WRITER_LEASE = Gauge(
    "tessera_writer_lease_held",
    "1 while this replica holds the writer Lease (under peering), else 0.",
)


def count_write(verb: str) -> None:
    """A mutating API request was sent: the adapter's ``on_write`` in ``tessera run``."""
    API_WRITES.labels(verb).inc()


ROLLOUT_PHASES = {  # tessera_rollout_nodes' phase label -> the rollout Plan's count of it
    "Updated": "updated",
    "InProgress": "in_progress",
    "Pending": "pending",
    "Blocked": "blocked",
    "Failed": "failed",
}


def export_rollout(kind: str, name: str, plan: rollout.Plan | None) -> None:
    """``tessera_rollout_nodes`` and ``tessera_rollout_budget_nodes`` for one object's
    rollout; ``None``: none of its nodes is rolling.

    The budget's ``reason`` label takes the few values of ``budget.Holder`` (never a node's
    name): ``Rollout`` (this object's own rollout), ``OtherRollout``, ``Cordoned``,
    ``Tainted``, ``NotReady`` (the others, whose nodes hold the budget until they act).
    """
    for phase, count in ROLLOUT_PHASES.items():
        value = getattr(plan.counts, count) if plan is not None else 0
        NODES_BY_PHASE.labels(kind, name, phase).set(value)
    held = Tally(u.holder for u in plan.unavailable) if plan is not None else Tally()
    for reason in Holder:
        BUDGET_NODES.labels(kind, name, reason.value).set(held[reason])


def forget_rollout(kind: str, name: str) -> None:
    """Drop the object's rollout series once it is gone (a deleted pool must not linger)."""
    series = [(NODES_BY_PHASE, phase) for phase in ROLLOUT_PHASES]
    series += [(BUDGET_NODES, reason.value) for reason in Holder]
    for gauge, label in series:
        try:
            gauge.remove(kind, name, label)
        except KeyError:
            continue  # never exported by this replica


@dataclass(frozen=True)
class MetricInfo:
    """One metric as /metrics shows it (counters gain their ``_total`` suffix there)."""

    name: str
    type: str
    labels: tuple[str, ...]
    help: str


def catalog() -> list[MetricInfo]:
    """Every metric defined in this module, in definition order."""
    out = []
    for metric in globals().values():
        if isinstance(metric, MetricWrapperBase):
            kind = str(metric._type)
            name = metric._name + ("_total" if kind == "counter" else "")
            out.append(MetricInfo(name, kind, tuple(metric._labelnames), metric._documentation))
    return out
