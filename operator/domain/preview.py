"""``tessera plan``: what applying some manifests would do to a cluster, before anything is written.

A reviewer reads, per pool, the nodes that change (old → new layout or
sharing config), the pods that would be evicted, the PDBs that would block,
the capacity the pool ends with, the tenants whose quota would then be
overcommitted, and the agent ConfigMaps as a diff. Everything is computed by
the functions the operator runs (``tessera.domain.cluster`` builds the same
views, ``rollout.plan`` gives the same hash), from a ``Cluster`` — raw objects
read from the API server or from a snapshot file. Pure: no I/O here.

Module map: ``preview`` (inputs, result, orchestration), ``preview_geometry``
(NodePoolGeometry), ``preview_sharing`` (SharingPolicy), ``preview_quota``
(TenantQuota and capacity), ``preview_prune`` and ``preview_prune_nodes``
(deletions, with ``prune``), ``preview_text`` (the human rendering).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from tessera.api import constants as c
from tessera.api.v1alpha1 import KINDS
from tessera.api.v1alpha1.common import LabelSelector

if TYPE_CHECKING:
    from .preview_prune import Deletion

Raw = Mapping[str, Any]
KIND_ORDER = ("NodePoolGeometry", "SharingPolicy", "TenantQuota")
ObjectAction = Literal["create", "update", "unchanged", "delete"]


@dataclass(frozen=True)
class Locations:
    """Where the agents' ConfigMaps live (the operator's settings; defaults = GPU Operator's)."""

    mig: tuple[str, str] = (c.MIG_PARTED_CONFIGMAP_NAMESPACE, c.MIG_PARTED_CONFIGMAP_NAME)
    vnpu: tuple[str, str] = (c.VNPU_CONFIGMAP_NAMESPACE, c.VNPU_CONFIGMAP_NAME)
    device_plugin: tuple[str, str] = (
        c.DEVICE_PLUGIN_CONFIGMAP_NAMESPACE,
        c.DEVICE_PLUGIN_CONFIGMAP_NAME,
    )
    hami_namespace: str = c.HAMI_NAMESPACE


@dataclass(frozen=True)
class Cluster:
    """The objects a preview reads, as the API server returns them."""

    nodes: tuple[Raw, ...] = ()
    pods: tuple[Raw, ...] = ()
    pdbs: tuple[Raw, ...] = ()
    namespaces: tuple[Raw, ...] = ()
    configmaps: tuple[Raw, ...] = ()
    quotas: tuple[Raw, ...] = ()  # ResourceQuotas
    objects: tuple[Raw, ...] = ()  # Tessera's own kinds

    @classmethod
    def of(cls, items: Iterable[Raw]) -> Cluster:
        """Sort a flat list (a snapshot file) by kind; other kinds are ignored."""
        slots: dict[str, list[Raw]] = {
            "Node": [],
            "Pod": [],
            "PodDisruptionBudget": [],
            "Namespace": [],
            "ConfigMap": [],
            "ResourceQuota": [],
            "tessera": [],
        }
        for item in items:
            kind = item.get("kind", "")
            if str(item.get("apiVersion", "")).startswith(c.GROUP + "/"):
                slots["tessera"].append(item)
            elif kind in slots:
                slots[kind].append(item)
        return cls(
            tuple(slots["Node"]),
            tuple(slots["Pod"]),
            tuple(slots["PodDisruptionBudget"]),
            tuple(slots["Namespace"]),
            tuple(slots["ConfigMap"]),
            tuple(slots["ResourceQuota"]),
            tuple(slots["tessera"]),
        )

    def items(self) -> list[Raw]:
        return [
            *self.namespaces,
            *self.nodes,
            *self.pods,
            *self.pdbs,
            *self.configmaps,
            *self.quotas,
            *self.objects,
        ]

    def configmap(self, where: tuple[str, str]) -> Raw | None:
        namespace, name = where
        for cm in self.configmaps:
            meta = cm["metadata"]
            if meta.get("namespace") == namespace and meta["name"] == name:
                return cm
        return None

    def of_kind(self, kind: str) -> dict[str, Raw]:
        return {o["metadata"]["name"]: o for o in self.objects if o.get("kind") == kind}

    def with_objects(self, manifests: Iterable[Raw]) -> Cluster:
        """The cluster as it would be once ``manifests`` are applied (by kind and name)."""
        incoming = {(m["kind"], m["metadata"]["name"]): m for m in manifests}
        merged: list[Raw] = []
        for obj in self.objects:
            key = (obj.get("kind", ""), obj["metadata"]["name"])
            live_meta = obj["metadata"]
            new = incoming.pop(key, None)
            if new is None:
                merged.append(obj)
                continue
            # the annotations a person put on the live object (an approval) survive an apply
            notes = {**(live_meta.get("annotations") or {}), **_annotations(new)}
            merged.append({**new, "metadata": {**new["metadata"], "annotations": notes}})
        return replace(self, objects=(*merged, *incoming.values()))


def _annotations(obj: Raw) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


# -- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeChange:
    node: str
    before: str
    after: str
    disruptive: bool
    evicts: tuple[str, ...] = ()  # namespace/name of the pods drained first
    note: str = ""  # why it waits, or why it cannot happen


@dataclass(frozen=True)
class ObjectPreview:
    """One manifest: its object-level change and, for pools, what happens on the nodes."""

    kind: str
    name: str
    action: ObjectAction
    nodes_total: int = 0
    changes: tuple[NodeChange, ...] = ()
    pods_to_evict: int = 0
    blocking_pdbs: tuple[str, ...] = ()
    plan_hash: str = ""  # what the operator writes to status.plan.hash (rollouts only)
    approval: str = ""  # Automatic | Manual, for rollouts
    approved: bool = False
    capacity_before: Mapping[str, int] = field(default_factory=dict)
    capacity_after: Mapping[str, int] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()  # NodePoolGeometry: nodes another pool selects (exit 1)
    writes: tuple[str, ...] = ()  # other writes (ResourceQuotas), one sentence each
    deletion: Deletion | None = None  # action "delete": what its finalizer does


@dataclass(frozen=True)
class TenantImpact:
    tenant: str
    before: bool  # Overcommitted now
    after: bool  # Overcommitted once applied
    message: str


@dataclass(frozen=True)
class ConfigDiff:
    where: str  # namespace/name key
    diff: str  # unified diff, live → planned


@dataclass(frozen=True)
class Preview:
    objects: tuple[ObjectPreview, ...] = ()
    tenants: tuple[TenantImpact, ...] = ()
    capacity: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # changed only
    configs: tuple[ConfigDiff, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def conflicts(self) -> tuple[str, ...]:
        """Pools that would select the same nodes: an error, the plan cannot be applied."""
        return tuple(f"{o.kind}/{o.name}: {c}" for o in self.objects for c in o.conflicts)

    @property
    def changed(self) -> bool:
        return bool(
            self.configs
            or any(o.action != "unchanged" or o.changes or o.writes for o in self.objects)
        )


def object_action(kind: str, live: Raw | None, new: Raw) -> ObjectAction:
    """Compared as parsed specs, so defaults the API server filled in are no difference."""
    if live is None:
        return "create"
    spec = {k.kind: k.spec for k in KINDS}[kind]
    try:
        same = spec.model_validate(live.get("spec") or {}) == spec.model_validate(
            new.get("spec") or {}
        )
    except ValidationError:
        same = False
    return "unchanged" if same else "update"


def preview(
    cluster: Cluster,
    manifests: Iterable[Raw],
    now: datetime,
    where: Locations | None = None,
    prune: bool = False,
    prune_selector: LabelSelector | None = None,
    prune_tracking_id: str | None = None,
) -> Preview:
    """What applying ``manifests`` (already parsed by ``manifests.parse``) would do.

    With ``prune``, every Tessera object no manifest names is deleted too (only those
    ``prune_selector`` selects and Argo CD application ``prune_tracking_id`` tracks,
    when given).
    """
    from . import preview_geometry, preview_prune, preview_quota, preview_sharing

    loc = where or Locations()
    wanted = list(manifests)
    gone = preview_prune.pruned(cluster, wanted, prune_selector, prune_tracking_id) if prune else ()
    after = preview_prune.without(cluster.with_objects(wanted), gone)
    geometry = preview_geometry.previews(cluster, after, wanted, now, loc)
    sharing = preview_sharing.previews(cluster, after, wanted, now, loc)
    nodes_after = preview_quota.allocatable_after(cluster, geometry, sharing, loc)
    capacity = preview_quota.capacity_change(cluster, nodes_after)
    quotas, tenants = preview_quota.previews(cluster, after, wanted, capacity)
    deleted = preview_prune.previews(cluster, after, gone, sharing, nodes_after, now, loc)
    by_key = {(o.kind, o.name): o for o in (*geometry.objects, *sharing.objects, *quotas, *deleted)}
    ordered = sorted(
        (by_key[(m["kind"], m["metadata"]["name"])] for m in (*wanted, *gone)),
        key=lambda o: (KIND_ORDER.index(o.kind), o.name),
    )
    changed_capacity = {r: ba for r, ba in sorted(capacity.items()) if ba[0] != ba[1]}
    return Preview(
        objects=tuple(ordered),
        tenants=tenants,
        capacity=changed_capacity,
        configs=(*geometry.configs, *sharing.configs),
    )
