"""Builders for the quota tests: specs, observed quotas and raw ResourceQuota manifests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tessera.api.constants import MANAGED_BY_LABEL, MANAGED_BY_VALUE, TENANT_QUOTA_LABEL
from tessera.api.v1alpha1.tenantquota import TenantQuotaSpec
from tessera.domain.quota.membership import Membership, resolve
from tessera.domain.quota.objects import SeenQuota

GPU = "nvidia.com/gpu"
MEM = "nvidia.com/gpumem"
MIG = "nvidia.com/mig-1g.10gb"


def spec(
    hard: Mapping[str, int | str] | None = None, total: Mapping[str, int | str] | None = None
) -> TenantQuotaSpec:
    return TenantQuotaSpec.model_validate(
        {
            "namespaceSelector": {},
            "hard": dict(hard or {}),
            "total": None if total is None else dict(total),
        }
    )


def seen(
    namespace: str,
    hard: Mapping[str, int] | None = None,
    *,
    used: Mapping[str, int] | None = None,
    enforced: Mapping[str, int] | None = None,
    tenant: str = "team-a",
    rv: str = "7",
) -> SeenQuota:
    """A Tessera quota as read back; enforced defaults to hard (the quota controller caught up)."""
    hard = dict(hard or {})
    return SeenQuota(
        namespace=namespace,
        tenant=tenant,
        hard=hard,
        enforced=dict(hard if enforced is None else enforced),
        used=dict(used or {}),
        resource_version=rv,
    )


def members(tenant: str = "team-a", *namespaces: str) -> Membership:
    return resolve({tenant: set(namespaces)})


def rq(
    namespace: str,
    name: str = "tessera-team-a",
    *,
    labels: Mapping[str, str] | None = None,
    hard: Mapping[str, str] | None = None,
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A raw ResourceQuota manifest, labelled as Tessera's for team-a unless told otherwise."""
    marks = {MANAGED_BY_LABEL: MANAGED_BY_VALUE, TENANT_QUOTA_LABEL: "team-a"}
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(marks if labels is None else labels),
            "resourceVersion": "42",
        },
        "spec": {"hard": dict(hard or {})},
    }
    if status is not None:
        body["status"] = dict(status)
    return body
