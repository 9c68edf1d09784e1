"""A fake cluster for the quota tests: the parts of the API server a tenant's quotas touch.

Quota admission checks ``status.hard`` and bumps ``status.used`` and the
resourceVersion; the quota controller copies ``spec.hard`` to ``status.hard``
only when ``sync`` is called; writes carrying a stale resourceVersion fail, as
a 409 would. After every write the tenant's limits must fit its total, and no
write may lower a limit below usage.

The recount race: a charge admitted with ``cached=False`` is one whose pod the
quota controller's informer caches do not hold yet; a ``spec.hard`` write into
that namespace makes the quota controller recount it and drop that charge from
``status.used`` (``held`` still counts the pod), until ``caught_up``. What the
tenant holds must never pass the total.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from quota_builders import GPU, MIG

from tessera.api.v1alpha1.tenantquota import TenantQuotaSpec
from tessera.domain.quota import objects
from tessera.domain.quota.membership import resolve
from tessera.domain.quota.planning import Action, QuotaPlan, plan
from tessera.domain.quota.quantities import quantities

TENANT = "team-a"
RESOURCES = (GPU, MIG)


def canonical(n: int) -> str:
    """What the API server stores: 2000 comes back as 2k."""
    return f"{n // 1000}k" if n and n % 1000 == 0 else str(n)


@dataclass
class Quota:
    hard: dict[str, int]
    enforced: dict[str, int] = field(default_factory=dict)


@dataclass
class Cluster:
    spec: TenantQuotaSpec
    members: set[str]
    quotas: dict[str, Quota] = field(default_factory=dict)
    used: dict[str, dict[str, int]] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    bounds: dict[str, int] = field(default_factory=dict)  # last sum of limits, per resource
    uncached: dict[str, dict[str, int]] = field(default_factory=dict)  # charged, not in caches
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)  # lost by a recount

    def manifests(self) -> list[dict[str, Any]]:
        out = []
        for ns, q in sorted(self.quotas.items()):
            body = objects.manifest(TENANT, ns, {})
            body["metadata"]["resourceVersion"] = str(self.versions[ns])
            body["spec"]["hard"] = {f"requests.{r}": canonical(n) for r, n in q.hard.items()}
            body["status"] = {
                "hard": {f"requests.{r}": canonical(n) for r, n in q.enforced.items()},
                "used": {f"requests.{r}": canonical(self.usage(ns, r)) for r in q.enforced},
            }
            out.append(body)
        return out

    def usage(self, ns: str, resource: str) -> int:
        return self.used.get(ns, {}).get(resource, 0)

    def held(self, ns: str, resource: str) -> int:
        """What the namespace's pods hold: status.used plus what a recount dropped."""
        return self.usage(ns, resource) + self.dropped.get(ns, {}).get(resource, 0)

    def caught_up(self, ns: str) -> None:
        """The caches hold every pod; a full resync gives back what a recount dropped."""
        self.uncached.pop(ns, None)
        for resource, n in self.dropped.pop(ns, {}).items():
            self.used.setdefault(ns, {})[resource] = self.usage(ns, resource) + n
            self.bump(ns)

    def bump(self, ns: str) -> None:
        self.versions[ns] = self.versions.get(ns, 0) + 1

    def admit(self, ns: str, resource: str, n: int, *, cached: bool = True) -> None:
        quota = self.quotas.get(ns)
        if quota is None or resource not in quota.enforced:
            return  # status not populated yet: admission refuses
        if self.usage(ns, resource) + n <= quota.enforced[resource]:
            self.used.setdefault(ns, {})[resource] = self.usage(ns, resource) + n
            self.bump(ns)
            if not cached:
                mine = self.uncached.setdefault(ns, {})
                mine[resource] = mine.get(resource, 0) + n
            # Usage may pass a namespace's new, lower limit (admission uses the old
            # one until the quota controller syncs), but what the tenant admits in
            # all must never pass the total.
            total = int((self.spec.total or {}).get(resource, 10**9))
            held = {m: self.held(m, resource) for m in sorted(self.members)}
            assert sum(held.values()) <= total, held

    def release(self, ns: str, resource: str, n: int) -> None:
        if self.usage(ns, resource):
            self.used[ns][resource] = max(0, self.usage(ns, resource) - n)
            self.bump(ns)

    def sync(self, ns: str) -> None:
        quota = self.quotas.get(ns)
        if quota is not None and quota.enforced != quota.hard:
            quota.enforced = dict(quota.hard)
            self.bump(ns)

    def write(self, action: Action) -> None:
        ns = action.namespace
        stale = action.resource_version not in (None, str(self.versions.get(ns)))
        if (action.verb == "create") == (ns in self.quotas) or stale:
            return  # 409: the controller re-plans on its next pass
        if action.verb == "delete":
            del self.quotas[ns]
            return
        assert action.manifest is not None
        hard = quantities(action.manifest["spec"]["hard"], what="write")
        new = {r.removeprefix("requests."): n for r, n in hard.items()}
        before = self.quotas.get(ns)
        for r, n in new.items():
            old = before.hard.get(r) if before else None
            floor = self.usage(ns, r) if old is None else min(old, self.usage(ns, r))
            assert n >= floor, f"{ns} {r} lowered to {n} below usage {self.usage(ns, r)}"
        self.quotas[ns] = Quota(new, before.enforced if before else {})
        self.bump(ns)
        if before is not None and before.hard != new:  # the quota controller recounts
            for r, n in self.uncached.pop(ns, {}).items():
                self.used[ns][r] -= n
                self.dropped.setdefault(ns, {})[r] = self.dropped.get(ns, {}).get(r, 0) + n

    def assert_within_total(self) -> None:
        """The sum of limits fits the total, or, above a lowered total, never rises."""
        for resource, total in (self.spec.total or {}).items():
            bound = 0
            for ns in self.members:
                q = self.quotas.get(ns)
                if q is None or resource not in q.hard:
                    bound += self.usage(ns, resource)
                else:
                    bound += max(q.hard[resource], q.enforced.get(resource, 0))
            allowed = max(int(total), self.bounds.get(resource, 0))
            assert bound <= allowed, (resource, bound, allowed, self.quotas)
            self.bounds[resource] = bound

    def observe(self, busy: frozenset[str] = frozenset()) -> QuotaPlan:
        seen = [q for m in self.manifests() if (q := objects.read(m)) is not None]
        return plan(TENANT, self.spec, resolve({TENANT: self.members}), seen, busy=busy)

    def reconcile(
        self, meanwhile: Sequence[tuple[str, str, int]] = (), busy: frozenset[str] = frozenset()
    ) -> QuotaPlan:
        result = self.observe(busy)
        for ns, resource, n in meanwhile:  # pods admitted between observing and writing
            self.admit(ns, resource, n)
        for action in result.next_wave:
            self.write(action)
            self.assert_within_total()
        return result

    def converge(self, passes: int = 6) -> int:
        """Reconcile with a prompt quota controller until nothing is left; return the passes."""
        for done in range(passes):
            for ns in list(self.quotas):
                self.sync(ns)
            if self.reconcile().settled:
                return done
        raise AssertionError(f"not settled after {passes} passes: {self.quotas}")
