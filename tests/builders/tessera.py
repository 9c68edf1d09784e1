"""Tessera's own objects: NodePoolGeometry, SharingPolicy, TenantQuota, as a user writes them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from tessera.api import constants as c

from .base import Wrapper

# MIG layouts the tests move pools between (H100-80GB profiles; A100-40GB for LAYOUT_A100).
LAYOUT_A: Mapping[str, Any] = {
    "mig": {"layouts": [{"profiles": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}]}
}
LAYOUT_B: Mapping[str, Any] = {"mig": {"layouts": [{"profiles": {"1g.10gb": 7}}]}}
LAYOUT_A100: Mapping[str, Any] = {"mig": {"layouts": [{"profiles": {"1g.5gb": 7}}]}}
# A rollout that gives up soon enough for a test to see it fail (the defaults wait longer).
QUICK_ROLLOUT: Mapping[str, Any] = {"verifyTimeout": "2m", "drain": {"timeout": "1m"}}


def custom(kind: str, name: str, spec: dict[str, Any], **annotations: str) -> dict[str, Any]:
    """A Tessera object of any ``kind`` whose ``spec`` the test writes out whole (a spec the
    API server must refuse, one read from a sample), with ``annotations`` when given."""
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": c.API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


class TesseraWrapper(Wrapper):
    """A custom object of ``tessera.io/v1alpha1`` with a ``spec`` (empty until set)."""

    api_version = c.API_VERSION

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._obj["spec"] = {}

    def spec(self, **fields: Any) -> Self:
        """Any spec field, by its wire (camelCase) name: ``spec(priority=2)``."""
        self._obj["spec"].update(fields)
        return self


class PoolWrapper(TesseraWrapper):
    """An object over the nodes of one pool (label ``tessera.io/pool``), at first the pool
    with the object's own name."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.pool(name)

    def pool(self, pool: str) -> Self:
        self._obj["spec"]["nodeSelector"] = {"matchLabels": {c.POOL_LABEL: pool}}
        return self


class GeometryWrapper(PoolWrapper):
    """A NodePoolGeometry: ``GeometryWrapper("inf").layout(LAYOUT_A).rollout(**QUICK_ROLLOUT)``."""

    kind = "NodePoolGeometry"

    def layout(self, layout: Mapping[str, Any]) -> Self:
        """The device section, ``{"mig": {...}}`` or ``{"ascend": {...}}``."""
        return self.spec(**layout)

    def rollout(self, **fields: Any) -> Self:
        """Rollout settings, merged into those set so far (no fields: ``rollout: {}``)."""
        self._obj["spec"].setdefault("rollout", {}).update(fields)
        return self


class SharingPolicyWrapper(PoolWrapper):
    """A SharingPolicy: ``SharingPolicyWrapper("ts").backend("TimeSlicing").spec(...)``."""

    kind = "SharingPolicy"

    def backend(self, backend: str) -> Self:
        return self.spec(backend=backend)


class TenantQuotaWrapper(TesseraWrapper):
    """A TenantQuota: ``TenantQuotaWrapper("t").namespaces(tenant="t").hard({GPU: 2})``."""

    kind = "TenantQuota"

    def namespaces(self, **labels: str) -> Self:
        """Over the namespaces labelled ``labels``."""
        return self.spec(namespaceSelector={"matchLabels": labels})

    def namespaces_in(self, key: str, values: list[str]) -> Self:
        """Over the namespaces whose label ``key`` is one of ``values``."""
        expression = {"key": key, "operator": "In", "values": list(values)}
        return self.spec(namespaceSelector={"matchExpressions": [expression]})

    def hard(self, limits: Mapping[str, Any]) -> Self:
        """What each namespace may use."""
        return self.spec(hard=dict(limits))

    def total(self, limits: Mapping[str, Any]) -> Self:
        """What the tenant's namespaces may use together."""
        return self.spec(total=dict(limits))
