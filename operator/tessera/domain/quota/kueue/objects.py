"""The Kueue objects of one tenant, as manifests (kueue.x-k8s.io/v1beta2, Kueue v0.17.0).

Shapes from Kueue's ``apis/kueue/v1beta2`` (the storage version of every kind): a Cohort's
``spec`` may be empty; a ClusterQueue names its ``cohortName``, selects its namespace by
``kubernetes.io/metadata.name`` and lists one resource group whose ``coveredResources`` are
the tenant's resources and whose ``flavors`` each list every covered resource, in that order
(Kueue's CEL rule), with ``nominalQuota`` and ``borrowingLimit``; a LocalQueue names its
``clusterQueue``; a ResourceFlavor has ``nodeLabels`` and ``tolerations``. Kueue allows 64
covered resources and 64 flavors per group: a tenant beyond them is refused (``TooLarge``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tessera.api import constants as c
from tessera.api.v1alpha1.common import LabelSelector
from tessera.domain.quota.kueue.shares import Quota

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
API = f"/apis/{API_VERSION}"
LOCAL_QUEUE = "tessera"  # the queue name a Job gives (kueue.x-k8s.io/queue-name: tessera)
PREFIX = "tessera-"
LIMIT = 64  # covered resources, and flavors, per resource group
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
Raw = dict[str, Any]


@dataclass(frozen=True, slots=True)
class KueueKind:
    kind: str
    plural: str
    namespaced: bool = False

    def path(self, name: str = "", namespace: str = "") -> str:
        where = (
            f"{API}/namespaces/{namespace}/{self.plural}" if namespace else f"{API}/{self.plural}"
        )
        return f"{where}/{name}" if name else where


COHORT = KueueKind("Cohort", "cohorts")
CLUSTER_QUEUE = KueueKind("ClusterQueue", "clusterqueues")
LOCAL_QUEUE_KIND = KueueKind("LocalQueue", "localqueues", namespaced=True)
FLAVOR = KueueKind("ResourceFlavor", "resourceflavors")
KINDS = (FLAVOR, COHORT, CLUSTER_QUEUE, LOCAL_QUEUE_KIND)  # the order they are created in


def cohort_name(tenant: str) -> str:
    return PREFIX + tenant


def cluster_queue_name(namespace: str) -> str:
    return PREFIX + namespace


def flavor_name(pool: str) -> str:
    return PREFIX + pool


def tenant_labels(tenant: str) -> dict[str, str]:
    return {c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE, c.TENANT_QUOTA_LABEL: tenant}


def flavor_labels(pool: str) -> dict[str, str]:
    return {c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE, c.POOL_LABEL: pool}


def tenant_selector(tenant: str) -> str:
    return ",".join(f"{k}={v}" for k, v in tenant_labels(tenant).items())


def _manifest(
    kind: KueueKind, name: str, labels: Mapping[str, str], spec: Raw, ns: str = ""
) -> Raw:
    meta: Raw = {"name": name, "labels": dict(labels)}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": API_VERSION, "kind": kind.kind, "metadata": meta, "spec": spec}


def flavor(pool: str, selector: LabelSelector, taints: Iterable[tuple[str, str, str]]) -> Raw:
    """The pool's flavor: Kueue adds ``nodeLabels`` to an admitted pod's nodeSelector and
    ``tolerations`` to its tolerations (its ``matchExpressions`` have no flavor equivalent)."""
    spec: Raw = {"nodeLabels": dict(sorted(selector.match_labels.items()))}
    tolerations = [
        {"key": k, "operator": "Equal", "value": v, "effect": e}
        if v
        else {"key": k, "operator": "Exists", "effect": e}
        for k, v, e in sorted(taints)
    ]
    if tolerations:
        spec["tolerations"] = tolerations
    return _manifest(FLAVOR, flavor_name(pool), flavor_labels(pool), spec)


def cohort(tenant: str) -> Raw:
    return _manifest(COHORT, cohort_name(tenant), tenant_labels(tenant), {})


def cluster_queue(
    tenant: str,
    namespace: str,
    resources: Iterable[str],
    pools: Iterable[str],
    quotas: Mapping[str, Mapping[str, Quota]],
) -> Raw:
    """``quotas``: pool → resource → this namespace's quota (0 where it has none)."""
    covered = sorted(resources)
    flavors = [
        {
            "name": flavor_name(pool),
            "resources": [_quota(r, (quotas.get(pool) or {}).get(r, Quota(0, 0))) for r in covered],
        }
        for pool in sorted(pools)
    ]
    spec: Raw = {
        "cohortName": cohort_name(tenant),
        "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: namespace}},
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}] if flavors else [],
    }
    return _manifest(CLUSTER_QUEUE, cluster_queue_name(namespace), tenant_labels(tenant), spec)


def _quota(resource: str, quota: Quota) -> Raw:
    return {
        "name": resource,
        "nominalQuota": str(quota.nominal),
        "borrowingLimit": str(quota.borrowing),
    }


def local_queue(tenant: str, namespace: str) -> Raw:
    spec = {"clusterQueue": cluster_queue_name(namespace)}
    return _manifest(LOCAL_QUEUE_KIND, LOCAL_QUEUE, tenant_labels(tenant), spec, namespace)
