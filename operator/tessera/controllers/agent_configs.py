"""The node agents' ConfigMap a pool writes its layouts into, before any label names them.

mig-parted's (``mig-configs``), the vNPU agent's (``vnpu-configs``) and the vGPU
Device Manager's (``vgpu-configs``): pools share the map, each owning exactly the
configs named after it (``pools.owns``), so a write that loses a race re-reads
the map and tries again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tessera.adapters.kube import ApiError, Obj, path_of
from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.controllers.runtime import Context
from tessera.domain.cluster import objects as cluster
from tessera.domain.cluster import pools

log = logging.getLogger("tessera.nodepoolgeometry")
_CONFIGMAP_ATTEMPTS = 5


@dataclass(frozen=True)
class AgentConfigMap:
    """The ConfigMap the pool's node agent reads its layouts from, and where in it."""

    namespace: str
    name: str
    key: str
    section: str

    @property
    def path(self) -> str:
        return path_of("v1", "configmaps", self.name, self.namespace)


def locate(ctx: Context, spec: NodePoolGeometrySpec) -> AgentConfigMap:
    if pools.is_ascend(spec):
        ns, name = ctx.settings.vnpu_configmap
        return AgentConfigMap(ns, name, c.VNPU_CONFIGMAP_KEY, "vnpu-configs")
    if pools.is_vgpu(spec):  # the vGPU Device Manager's map (GPU Operator vgpuDeviceManager)
        ns, name = ctx.settings.vgpu_configmap
        return AgentConfigMap(ns, name, c.VGPU_CONFIGMAP_KEY, "vgpu-configs")
    ns, name = ctx.settings.mig_configmap
    return AgentConfigMap(ns, name, c.MIG_PARTED_CONFIGMAP_KEY, "mig-configs")


def sections(where: AgentConfigMap, current: Obj | None) -> Mapping[str, Any]:
    """The configs of ``where``'s section as the map holds them (``pools.configs_in``)."""
    return pools.configs_in(((current or {}).get("data") or {}).get(where.key) or "", where.section)


def ensure(
    ctx: Context,
    where: AgentConfigMap,
    pool: str,
    spec: NodePoolGeometrySpec,
    seen: cluster.PoolObservation,
    current: Obj | None,
) -> None:
    """Write the pool's configs into the agent ConfigMap before any label can name them.

    ``current`` is the ConfigMap as this pass read it; pools share the
    ConfigMap, so a write that loses a race re-reads it and tries again.
    """
    wanted, keep = cluster.pool_configs(spec, seen)
    for _ in range(_CONFIGMAP_ATTEMPTS):
        if _write_configs(ctx, where, current, pool, wanted, keep):
            return
        current = ctx.kube.get_or_none(where.path)
    raise ApiError(
        409, "Conflict", f"{where.namespace}/{where.name} kept changing while pool {pool} wrote it"
    )


def _write_configs(
    ctx: Context,
    where: AgentConfigMap,
    current: Obj | None,
    pool: str,
    wanted: Mapping[str, list[dict[str, Any]]],
    keep: set[str],
) -> bool:
    """One optimistic attempt; False when another writer got there first."""
    ns, name, key = where.namespace, where.name, where.key
    text = pools.configs_document(
        ((current or {}).get("data") or {}).get(key, ""), pool, where.section, wanted, keep
    )
    if text is None:
        return True
    try:
        if current is None:
            _ensure_namespace(ctx, ns)
            body = {
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": {c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE},
                },
                "data": {key: text},
            }
            ctx.kube.create(path_of("v1", "configmaps", namespace=ns), body)
        else:
            version = current["metadata"]["resourceVersion"]
            ctx.kube.patch(
                where.path, {"metadata": {"resourceVersion": version}, "data": {key: text}}
            )
    except ApiError as err:
        if err.conflict:
            return False
        raise
    log.info("nodepoolgeometry/%s: wrote %s configs to %s/%s", pool, len(wanted), ns, name)
    return True


def _ensure_namespace(ctx: Context, namespace: str) -> None:
    if ctx.kube.get_or_none(path_of("v1", "namespaces", namespace)) is None:
        try:
            ctx.kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        except ApiError as err:
            if not err.conflict:
                raise
