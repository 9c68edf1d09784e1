"""TenantQuota: accelerator quotas for a tenant's namespaces, plus a tenant-wide total."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from tessera.api.v1alpha1.common import (
    RESOURCE_NAME_PATTERN,
    ApiModel,
    Condition,
    Count,
    LabelSelector,
    cel,
    keys_matching,
    validations,
)

Enforcement = Literal["ResourceQuota", "Kueue", "Both"]

_RESOURCE_KEYS = keys_matching(
    RESOURCE_NAME_PATTERN,
    "resource names are qualified extended resources such as nvidia.com/mig-1g.10gb, "
    "DRA devices of a DeviceClass such as mig-1g.10gb.tessera.io.deviceclass.resource.k8s.io/"
    "devices, or object counts such as count/resourceclaims.resource.k8s.io",
    32,
)


class TenantQuotaSpec(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "(has(self.hard) && size(self.hard) > 0) || (has(self.total) && size(self.total) > 0)",
                "set at least one resource in hard or total",
            ),
        )
    )

    namespace_selector: LabelSelector = Field(description="The tenant's namespaces.")
    hard: dict[str, Count] = Field(
        default_factory=dict,
        description="Per-namespace limit of each resource (e.g. nvidia.com/mig-1g.10gb: 4, "
        "mig-1g.10gb.tessera.io.deviceclass.resource.k8s.io/devices: 4, "
        "count/resourceclaims.resource.k8s.io: 10), enforced by a ResourceQuota in every "
        "tenant namespace.",
        json_schema_extra=_RESOURCE_KEYS,
    )
    total: dict[str, Count] | None = Field(
        default=None,
        description="Limit across all the tenant's namespaces: the per-namespace limits Tessera "
        "writes never sum past it, even when namespaces create pods at the same moment "
        "(docs/quota.md says what Kubernetes' quota controller can still let through).",
        json_schema_extra=_RESOURCE_KEYS,
    )
    enforcement: Enforcement = Field(
        default="ResourceQuota",
        description="Who enforces the quotas: ResourceQuota (a ResourceQuota per namespace, "
        "enforced by the API server at pod creation), Kueue (a Cohort for the tenant, a "
        "ClusterQueue and LocalQueue per namespace and a ResourceFlavor per pool, their "
        "quotas following the capacity ledger: Kueue admits Jobs only up to what the pools "
        "hold), or Both. docs/quota.md says how quotas map to Kueue.",
    )


class NamespaceQuota(ApiModel):
    namespace: str = Field(description="The namespace.")
    hard: dict[str, str] = Field(default_factory=dict, description="Limits Tessera wrote.")
    used: dict[str, str] = Field(
        default_factory=dict, description="Usage the quota controller counted."
    )


class TenantQuotaStatus(ApiModel):
    observed_generation: int = Field(default=0, description="The generation this status describes.")
    namespaces: int = Field(
        default=0,
        description="Namespaces the selector matches, including those another TenantQuota "
        "selects too (see contested).",
    )
    contested: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="Namespaces another TenantQuota selects too: Tessera leaves their quotas "
        "as they are and reports Stalled, reason Conflict, until one selector stops matching.",
    )
    used: dict[str, str] = Field(default_factory=dict, description="Usage summed over namespaces.")
    total: dict[str, str] = Field(default_factory=dict, description="The tenant-wide limits.")
    capacity: dict[str, str] = Field(
        default_factory=dict,
        description="What the cluster offers, per resource: extended resources summed over "
        "the nodes' allocatable; DRA devices of a class counted in the ResourceSlices when "
        "the class's selector is one Tessera writes (else the resource is not listed); "
        "object counts are never listed.",
    )
    per_namespace: list[NamespaceQuota] = Field(
        default_factory=list, max_length=100, description="Limits and usage by namespace."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Reconciling, Stalled, Overcommitted.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
