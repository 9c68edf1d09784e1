"""How the capacity ledger becomes Kueue quotas: pool → tenants → namespaces, in whole units.

Per resource, pools are taken in name order; each pool's count is split equally among the
tenants that still have some of their promise left (``allocation.water_fill``: capped by what
each has left, odd units to the first tenants by name). What a tenant gets of a pool is then
split equally among its namespaces, capped by ``hard``. Every split is of whole units, so no
sum ever exceeds what it splits: Σ tenants ≤ the pool, Σ namespaces = the tenant's share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tessera.domain.quota.allocation import water_fill
from tessera.domain.quota.ledger import NO_POOL, CapacityLedger

Shares = dict[str, dict[str, dict[str, int]]]  # tenant → pool → resource → units


def tenants(commitments: Mapping[str, Mapping[str, int]], ledger: CapacityLedger) -> Shares:
    """Each tenant's part of every pool (the pool ``""``, nodes in no pool, is never shared)."""
    out: Shares = {t: {} for t in commitments}
    resources = sorted({r for c in commitments.values() for r in c})
    order = sorted(commitments)
    for resource in resources:
        left: dict[str, int | None] = {t: commitments[t].get(resource, 0) for t in order}
        for pool, row in sorted(ledger.pools.items()):
            if pool == NO_POOL or not row.get(resource):
                continue
            given = water_fill(row[resource], left, order)
            for tenant, n in given.items():
                before = left[tenant]
                assert before is not None  # every room is a promise, never unlimited
                left[tenant] = before - n
                if n:
                    out[tenant].setdefault(pool, {})[resource] = n
    return out


@dataclass(frozen=True, slots=True)
class Quota:
    nominal: int
    borrowing: int  # what the namespace may borrow from its cohort, on top of ``nominal``


def namespaces(
    share: Mapping[str, Mapping[str, int]],
    members: Iterable[str],
    hard: Mapping[str, int],
) -> dict[str, dict[str, dict[str, Quota]]]:
    """Namespace → pool → resource → its quota, from one tenant's ``share`` (``tenants``)."""
    order = sorted(members)
    out: dict[str, dict[str, dict[str, Quota]]] = {ns: {} for ns in order}
    for pool, row in sorted(share.items()):
        for resource, units in sorted(row.items()):
            cap = hard.get(resource)
            nominal = water_fill(units, dict.fromkeys(order, cap), order)
            ceiling = units if cap is None else min(cap, units)
            for ns in order:
                quota = Quota(nominal[ns], max(0, ceiling - nominal[ns]))
                out[ns].setdefault(pool, {})[resource] = quota
    return out
