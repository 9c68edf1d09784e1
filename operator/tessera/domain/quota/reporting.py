"""A TenantQuota's status: usage, limits, capacity, and the verdict behind its conditions.

Computed in one place from the same observations the plan came from, so the
status describes exactly what this reconcile saw. Usage comes from the
ResourceQuotas' ``status.used``, which the API server's quota admission and
the quota controller maintain; Tessera does not count pods itself.

``Overcommitted`` compares what all tenants together promise with what the
cluster's pools advertise. A tenant promises its ``total`` where it has one,
else ``hard`` times its namespaces. An extended resource nothing advertises
has capacity 0; DRA devices of a class count what the ResourceSlices offer it
(``devices.capacity``). Object counts (``count/...``) and DRA classes whose
selector Tessera cannot read have no capacity: they are neither compared nor
listed in ``status.capacity``, never shown as a made-up 0. Overcommitment is allowed (quotas are ceilings, not reservations), so it is
reported beside ``Ready``, never as a failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tessera.api.v1alpha1.tenantquota import NamespaceQuota, TenantQuotaSpec, TenantQuotaStatus
from tessera.domain.base.conditions import Status, Verdict
from tessera.domain.quota import ledger as _ledger
from tessera.domain.quota.ledger import CapacityLedger
from tessera.domain.quota.membership import Membership
from tessera.domain.quota.names import is_extended
from tessera.domain.quota.objects import SeenQuota
from tessera.domain.quota.planning import QuotaPlan
from tessera.domain.quota.quantities import counts

OVERCOMMITTED = "Overcommitted"
ROWS = 100  # status.perNamespace is bounded; the rest are summed but not listed


def commitment(spec: TenantQuotaSpec, namespaces: int) -> dict[str, int]:
    """What one tenant promises, per resource."""
    hard = counts(spec.hard, what="spec.hard")
    promised = {r: n * namespaces for r, n in hard.items()}
    promised.update(counts(spec.total or {}, what="spec.total"))
    return promised


def capacity_of(resource: str, capacity: Mapping[str, int]) -> int | None:
    """The capacity ``resource`` is compared with; None when nobody can say."""
    if resource in capacity:
        return capacity[resource]
    return 0 if is_extended(resource) else None


def overcommitted(
    tenant: str,
    commitments: Mapping[str, Mapping[str, int]],
    capacity: Mapping[str, int],
    ledger: CapacityLedger | None = None,
) -> tuple[str, Status, str, str]:
    """The Overcommitted condition of ``tenant``, given every tenant's commitment; the
    message names each resource, what is promised and available, and the pools offering it
    (``ledger``, whose totals ``capacity`` holds for the resources Tessera can count)."""
    resources = {r for c in commitments.values() for r in c}
    available = {r: capacity_of(r, capacity) for r in resources}
    pools = {r: ledger.where(r) for r in resources} if ledger is not None else {}
    over = _ledger.overcommitments(tenant, commitments, available, pools)
    if over:
        return (OVERCOMMITTED, "True", "TotalsExceedCapacity", "; ".join(o.message for o in over))
    return (OVERCOMMITTED, "False", "WithinCapacity", "the tenants' totals fit the capacity")


def verdict(
    tenant: str, plan: QuotaPlan, membership: Membership, overcommit: tuple[str, Status, str, str]
) -> Verdict:
    """Stalled on a conflict; Reconciling while waves, confirmations, moves or handovers wait."""
    extra = (overcommit,)
    conflicts = membership.conflicts_of(tenant)
    if conflicts:
        message = "; ".join(c.message for c in conflicts)
        return Verdict("stalled", "Conflict", message, extra)
    if plan.wave1 or plan.wave2:
        steps = len(plan.wave1) + len(plan.wave2)
        return Verdict("progressing", "ApplyingQuotas", f"{steps} quota writes pending", extra)
    if plan.unconfirmed:
        waiting = ", ".join(plan.unconfirmed)
        message = f"waiting for the quota controller to enforce new limits in {waiting}"
        return Verdict("progressing", "AwaitingQuotaController", message, extra)
    if plan.waiting:
        busy = ", ".join(plan.waiting)
        message = f"waiting for admission in {busy} to settle before moving headroom"
        return Verdict("progressing", "AwaitingAdmission", message, extra)
    if plan.held:
        message = f"keeping quotas in {', '.join(plan.held)} until their new tenant's quota exists"
        return Verdict("progressing", "HandingOver", message, extra)
    if plan.over_total:
        message = (
            f"usage of {', '.join(plan.over_total)} exceeds the total; nothing new is admitted "
            "until pods finish"
        )
        return Verdict("progressing", "UsageOverTotal", message, extra)
    namespaces = len(plan.targets)
    return Verdict("ready", "QuotasApplied", f"quotas in force in {namespaces} namespaces", extra)


def combined(quotas: Verdict, queues: Verdict | None, *, both: bool = False) -> Verdict:
    """The TenantQuota's verdict when Kueue enforces (``queues``): the worse of the two states
    (the queues' on a tie), both messages when ``both`` enforce and both are ready; ``extra``
    (Overcommitted) is always the quotas'."""
    if queues is None:
        return quotas
    rank = {"stalled": 0, "progressing": 1, "ready": 2}
    if rank[quotas.state] < rank[queues.state]:
        return quotas
    if both and quotas.state == queues.state == "ready":
        return Verdict("ready", queues.reason, f"{quotas.message}; {queues.message}", quotas.extra)
    return Verdict(queues.state, queues.reason, queues.message, quotas.extra)


def status(
    spec: TenantQuotaSpec,
    plan: QuotaPlan,
    seen: Iterable[SeenQuota],
    capacity: Mapping[str, int],
    *,
    tenant: str,
    generation: int,
    conditions: Iterable[Mapping[str, object]] = (),
    contested: Iterable[str] = (),
) -> TenantQuotaStatus:
    """The whole status stanza; ``conditions`` come from ``conditions_for(verdict(...))``.

    ``contested`` (``Membership.contested_of``) are the namespaces the tenant selects but
    shares with another tenant: they count in ``namespaces`` (what the selector matches, so
    a tenant in Conflict never reads "0 namespaces") and are listed, but get no row.
    """
    members = sorted(plan.targets)
    shared = sorted(set(contested) - set(members))
    mine = {q.namespace: q for q in seen if q.tenant == tenant and q.namespace in plan.targets}
    used: dict[str, int] = {}
    for quota in mine.values():
        for resource, n in quota.used.items():
            used[resource] = used.get(resource, 0) + n
    resources = sorted(spec.hard.keys() | (spec.total or {}).keys())
    rows = [
        NamespaceQuota(namespace=ns, hard=_text(mine[ns].hard), used=_text(mine[ns].used))
        if ns in mine
        else NamespaceQuota(namespace=ns)
        for ns in members[:ROWS]
    ]
    return TenantQuotaStatus.model_validate(
        {
            "observedGeneration": generation,
            "namespaces": len(members) + len(shared),
            "contested": shared[:ROWS],
            "used": _text(used),
            "total": _text(counts(spec.total or {}, what="spec.total")),
            "capacity": {
                r: str(known) for r in resources if (known := capacity_of(r, capacity)) is not None
            },
            "perNamespace": [r.model_dump(by_alias=True) for r in rows],
            "conditions": list(conditions),
        }
    )


def _text(values: Mapping[str, int]) -> dict[str, str]:
    return {k: str(v) for k, v in sorted(values.items())}
