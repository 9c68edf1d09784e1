"""Which tenant owns which namespace, and where two tenants' selectors overlap.

The controller resolves every TenantQuota's ``namespaceSelector`` against the
namespaces it sees (label matching lives in ``tessera.domain.base.selectors``) and
hands the result here, once per reconcile, for all tenants together: overlap is
a property of the whole set, not of one tenant.

A namespace selected by two or more tenants is *contested*. Neither tenant
creates, updates or deletes its quota there: whichever ResourceQuota already
exists stays exactly as it is (deleting it would lift the namespace's limit;
rewriting it would make the two tenants overwrite each other on every resync),
and a namespace with no Tessera quota yet gets none. The contested namespace
counts toward neither tenant's total, and each involved tenant reports
``Stalled/Conflict`` naming the other tenant and the namespaces until someone
relabels a namespace or narrows a selector. The tenants' other namespaces are
still reconciled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations

_LISTED = 5  # namespaces named in one message; the rest are counted


@dataclass(frozen=True)
class MembershipConflict:
    """Two tenants whose selectors both match ``namespaces``."""

    tenants: tuple[str, str]
    namespaces: tuple[str, ...]

    @property
    def message(self) -> str:
        first, second = self.tenants
        shown = ", ".join(self.namespaces[:_LISTED])
        more = len(self.namespaces) - _LISTED
        tail = f" and {more} more" if more > 0 else ""
        return (
            f"TenantQuotas {first} and {second} both select namespace(s) {shown}{tail}; "
            "neither changes quotas there until one selector stops matching"
        )


@dataclass(frozen=True)
class Membership:
    """The resolved map: each uncontested namespace's tenant, plus the conflicts."""

    owner: Mapping[str, str]
    conflicts: tuple[MembershipConflict, ...]

    def namespaces_of(self, tenant: str) -> tuple[str, ...]:
        """The namespaces ``tenant`` manages, sorted (contested ones excluded)."""
        return tuple(sorted(ns for ns, owner in self.owner.items() if owner == tenant))

    def conflicts_of(self, tenant: str) -> tuple[MembershipConflict, ...]:
        return tuple(c for c in self.conflicts if tenant in c.tenants)

    def contested_of(self, tenant: str) -> tuple[str, ...]:
        """The namespaces ``tenant`` selects but shares with another tenant, sorted."""
        return tuple(sorted({ns for c in self.conflicts_of(tenant) for ns in c.namespaces}))

    @property
    def contested(self) -> frozenset[str]:
        return frozenset(ns for c in self.conflicts for ns in c.namespaces)


def resolve(tenants: Mapping[str, Iterable[str]]) -> Membership:
    """Turn tenant → matched namespaces into namespace → tenant and pairwise conflicts."""
    claims: dict[str, set[str]] = {}
    for tenant, namespaces in tenants.items():
        for ns in namespaces:
            claims.setdefault(ns, set()).add(tenant)
    owner = {ns: next(iter(ts)) for ns, ts in claims.items() if len(ts) == 1}
    shared: dict[tuple[str, str], list[str]] = {}
    for ns, ts in sorted(claims.items()):
        for pair in combinations(sorted(ts), 2):
            shared.setdefault(pair, []).append(ns)
    conflicts = tuple(MembershipConflict(pair, tuple(nss)) for pair, nss in sorted(shared.items()))
    return Membership(owner=owner, conflicts=conflicts)
