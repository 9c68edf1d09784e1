"""One tenant's Kueue objects: what they should be, and the writes that get them there.

``desired`` builds the tenant's Cohort, ClusterQueues, LocalQueues and the flavors of the
pools offering its resources, from its share of the capacity ledger (``shares``). ``plan``
compares them with what the API server holds (``observed``: every object of the four kinds,
by kind, namespace and name) and returns the writes in a safe order: flavors, cohort,
ClusterQueues, LocalQueues created or patched; then this tenant's objects nobody wants any
more deleted, LocalQueues first. An object of a desired name that Tessera does not own
(its ``managed-by`` label, and the tenant's or the pool's label) is never written: it is a
clash, reported by name, and the objects that depend on it are held back with it.

Specs are compared on the fields Tessera writes only (Kueue defaults the others), quantities
by value (the API server may return ``2k`` for ``2000``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tessera.api import constants as c
from tessera.api.v1alpha1 import quantity
from tessera.api.v1alpha1.common import LabelSelector
from tessera.domain.quota.kueue import objects as k
from tessera.domain.quota.kueue import shares
from tessera.domain.quota.ledger import NO_POOL, CapacityLedger

Raw = dict[str, Any]
Key = tuple[str, str, str]  # kind, namespace ("" for cluster-scoped), name
OWNED_FIELDS = {
    k.FLAVOR.kind: ("nodeLabels", "tolerations"),
    k.COHORT.kind: (),
    k.CLUSTER_QUEUE.kind: ("cohortName", "namespaceSelector", "resourceGroups"),
    k.LOCAL_QUEUE_KIND.kind: ("clusterQueue",),
}
_BY_KIND = {kind.kind: kind for kind in k.KINDS}


@dataclass(frozen=True)
class Desired:
    objects: tuple[Raw, ...] = ()
    problems: tuple[str, ...] = ()  # why some of the tenant's objects cannot be written


def desired(
    tenant: str,
    members: Iterable[str],
    commitments: Mapping[str, Mapping[str, int]],
    hard: Mapping[str, int],
    ledger: CapacityLedger,
    selectors: Mapping[str, LabelSelector | None],
) -> Desired:
    """``commitments``: every tenant's promise (they share the pools); ``selectors``: each
    pool's nodeSelector (a pool without one has no flavor)."""
    mine = commitments.get(tenant, {})
    resources = sorted(mine)
    pools = sorted(
        p
        for p, offered in ledger.offered.items()
        if p != NO_POOL and selectors.get(p) is not None and offered & set(resources)
    )
    problems = []
    if len(resources) > k.LIMIT:
        problems.append(f"{len(resources)} resources, Kueue covers at most {k.LIMIT} per group")
    if len(pools) > k.LIMIT:
        problems.append(f"{len(pools)} pools offer them, Kueue lists at most {k.LIMIT} flavors")
    if problems:
        return Desired((), tuple(problems))
    share = shares.tenants(commitments, ledger).get(tenant, {})
    share = {p: row for p, row in share.items() if p in pools}
    namespaces = sorted(members)
    quotas = shares.namespaces(share, namespaces, hard)
    out: list[Raw] = []
    for pool in pools:
        selector = selectors[pool]
        assert selector is not None
        out.append(k.flavor(pool, selector, ledger.taints.get(pool, frozenset())))
    out.append(k.cohort(tenant))
    out.extend(k.cluster_queue(tenant, ns, resources, pools, quotas[ns]) for ns in namespaces)
    out.extend(k.local_queue(tenant, ns) for ns in namespaces)
    return Desired(tuple(out))


@dataclass(frozen=True, slots=True)
class KueueWrite:
    verb: Literal["create", "patch", "delete"]
    kind: k.KueueKind
    name: str
    namespace: str = ""
    body: Raw | None = None

    @property
    def path(self) -> str:
        return self.kind.path("" if self.verb == "create" else self.name, self.namespace)

    @property
    def ref(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind.kind} {where}{self.name}"


@dataclass(frozen=True)
class KueuePlan:
    actions: tuple[KueueWrite, ...] = ()
    clashes: tuple[str, ...] = ()  # one message per object Tessera will not touch
    unchanged: int = 0  # desired objects already as they should be

    @property
    def writes(self) -> int:
        return len(self.actions)


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace") or "", meta["name"])


def owner_of(obj: Mapping[str, Any]) -> str | None:
    """``tenant:<name>`` or ``pool:<name>`` when Tessera owns the object, else None."""
    labels = obj["metadata"].get("labels") or {}
    if labels.get(c.MANAGED_BY_LABEL) != c.MANAGED_BY_VALUE:
        return None
    if obj.get("kind") == k.FLAVOR.kind:
        return f"pool:{labels[c.POOL_LABEL]}" if c.POOL_LABEL in labels else None
    tenant = labels.get(c.TENANT_QUOTA_LABEL)
    return f"tenant:{tenant}" if tenant else None


def plan(tenant: str, want: Desired, observed: Mapping[Key, Raw]) -> KueuePlan:
    actions: list[KueueWrite] = []
    clashes: list[str] = []
    unchanged = 0
    wanted = {key_of(o) for o in want.objects}
    clashed: set[Key] = set()
    for obj in want.objects:
        key = key_of(obj)
        kind, ns, name = key
        have = observed.get(key)
        if _needs(obj) & clashed:
            continue  # what it points at is someone else's
        if have is None:
            actions.append(KueueWrite("create", _BY_KIND[kind], name, ns, obj))
            continue
        owner = owner_of(have)
        if owner != owner_of(obj):
            clashed.add(key)
            who = "not Tessera's" if owner is None else f"Tessera's for {owner.replace(':', ' ')}"
            clashes.append(
                f"{kind} {ns + '/' if ns else ''}{name} exists and is {who}: Tessera leaves it "
                "as it is; rename or delete it to let Tessera write its own"
            )
            continue
        patch = _patch(obj, have)
        if patch is None:
            unchanged += 1
        else:
            actions.append(KueueWrite("patch", _BY_KIND[kind], name, ns, patch))
    gone = [
        o
        for o in observed.values()
        if owner_of(o) == f"tenant:{tenant}" and key_of(o) not in wanted
    ]
    order = {kind.kind: i for i, kind in enumerate(reversed(k.KINDS))}
    for obj in sorted(gone, key=lambda o: (order[o["kind"]], key_of(o))):
        kind, ns, name = key_of(obj)
        actions.append(KueueWrite("delete", _BY_KIND[kind], name, ns))
    return KueuePlan(tuple(actions), tuple(clashes), unchanged)


def _needs(obj: Mapping[str, Any]) -> set[Key]:
    """The objects ``obj`` refers to: a ClusterQueue its cohort and flavors, a LocalQueue
    its ClusterQueue."""
    spec = obj.get("spec") or {}
    if obj["kind"] == k.CLUSTER_QUEUE.kind:
        found = {(k.COHORT.kind, "", spec["cohortName"])}
        for group in spec.get("resourceGroups") or []:
            found |= {(k.FLAVOR.kind, "", f["name"]) for f in group["flavors"]}
        return found
    if obj["kind"] == k.LOCAL_QUEUE_KIND.kind:
        return {(k.CLUSTER_QUEUE.kind, "", spec["clusterQueue"])}
    return set()


def _patch(want: Raw, have: Mapping[str, Any]) -> Raw | None:
    """A merge patch making ``have`` what ``want`` says on Tessera's fields, or None."""
    fields = OWNED_FIELDS[want["kind"]]
    spec_want, spec_have = want.get("spec") or {}, have.get("spec") or {}
    labels_have = have["metadata"].get("labels") or {}
    labels_ok = all(labels_have.get(x) == v for x, v in want["metadata"]["labels"].items())
    differs = [f for f in fields if _normal(spec_want.get(f)) != _normal(spec_have.get(f))]
    if labels_ok and not differs:
        return None
    body: Raw = {"metadata": {"labels": want["metadata"]["labels"]}}
    if differs:
        body["spec"] = {f: spec_want.get(f) for f in differs}  # None removes the field
    return body


def _normal(value: Any) -> Any:
    """Quantities as numbers, empty as absent: how the API server may return a field."""
    if isinstance(value, dict):
        items = {x: _normal(v) for x, v in value.items()}
        return {x: v for x, v in items.items() if v is not None} or None
    if isinstance(value, list):
        return [_normal(v) for v in value] or None
    if isinstance(value, str):
        try:
            return quantity.whole(value)
        except quantity.QuantityError:
            return value
    return value
