"""The ResourceQuota objects Tessera owns: their name, labels and keys, read and written.

One ResourceQuota per tenant namespace, named ``tessera-<tenant>``, limiting
each resource under the key the quota system counts it by (``names.quota_key``:
``requests.<resource>`` for extended resources, the name itself for DRA devices
per DeviceClass and for object counts). Ownership is decided by labels alone: an object without both
Tessera's managed-by label and the tenant label is never read as Tessera's,
so it is never updated or deleted, even when its name collides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tessera.api.constants import MANAGED_BY_LABEL, MANAGED_BY_VALUE, TENANT_QUOTA_LABEL
from tessera.domain.quota.names import quota_key, resource_of
from tessera.domain.quota.quantities import quantities

NAME_PREFIX = "tessera-"


def quota_name(tenant: str) -> str:
    return f"{NAME_PREFIX}{tenant}"


def labels(tenant: str) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE, TENANT_QUOTA_LABEL: tenant}


def selector() -> str:
    """The label selector that lists every Tessera quota, for the controller's watch."""
    return f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{TENANT_QUOTA_LABEL}"


@dataclass(frozen=True)
class SeenQuota:
    """A Tessera-owned ResourceQuota as observed, keyed by TenantQuota resource (no ``requests.``)."""

    namespace: str
    tenant: str
    hard: Mapping[str, int] = field(default_factory=dict)  # spec.hard: what Tessera wrote
    enforced: Mapping[str, int] = field(default_factory=dict)  # status.hard: what admission uses
    used: Mapping[str, int] = field(default_factory=dict)  # status.used
    resource_version: str = ""
    stray: tuple[str, ...] = ()  # spec.hard keys Tessera never writes (``names.resource_of``)

    @property
    def confirmed(self) -> bool:
        """Whether the quota controller has copied spec.hard to status.hard yet."""
        return dict(self.hard) == dict(self.enforced)


def read(manifest: Mapping[str, Any]) -> SeenQuota | None:
    """A ResourceQuota manifest as Tessera sees it, or None when Tessera does not own it."""
    meta = manifest.get("metadata") or {}
    marks = meta.get("labels") or {}
    tenant = marks.get(TENANT_QUOTA_LABEL)
    if marks.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE or not tenant:
        return None
    if meta.get("name") != quota_name(tenant):
        return None
    where = f"ResourceQuota {meta.get('namespace')}/{meta.get('name')}"
    status = manifest.get("status") or {}
    written = (manifest.get("spec") or {}).get("hard") or {}
    return SeenQuota(
        namespace=str(meta.get("namespace", "")),
        tenant=str(tenant),
        hard=_resources(written, f"{where} spec.hard"),
        enforced=_resources(status.get("hard") or {}, f"{where} status.hard"),
        used=_resources(status.get("used") or {}, f"{where} status.used"),
        resource_version=str(meta.get("resourceVersion", "")),
        stray=tuple(sorted(k for k in written if resource_of(k) is None)),
    )


def manifest(tenant: str, namespace: str, hard: Mapping[str, int]) -> dict[str, Any]:
    """The ResourceQuota Tessera wants in ``namespace``; values as plain digit strings."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": quota_name(tenant), "namespace": namespace, "labels": labels(tenant)},
        "spec": {"hard": {quota_key(r): str(n) for r, n in sorted(hard.items())}},
    }


def _resources(values: Mapping[str, Any], what: str) -> dict[str, int]:
    # Keys Tessera never writes are someone's edit: they are reported as ``stray``
    # and dropped by the next write.
    kept = {r: v for k, v in values.items() if (r := resource_of(k)) is not None}
    return quantities(kept, what=what)
