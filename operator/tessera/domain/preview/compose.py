"""``tessera.domain.preview.preview``: the whole preview, each part computed in turn.

Prune first (what no manifest names leaves the cluster the others are planned against), then
the pools, the sharing policies, the capacity both leave and the tenant quotas measured
against it, and last what each deletion's finalizer does. The top of the package's chain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from tessera.api.v1alpha1.common import LabelSelector
from tessera.domain.preview.admission import previews as admission_previews
from tessera.domain.preview.dra import DraPreviews
from tessera.domain.preview.dra import previews as dra_previews
from tessera.domain.preview.geometry import previews as geometry_previews
from tessera.domain.preview.hami import previews as hami_previews
from tessera.domain.preview.model import KIND_ORDER, Cluster, Locations, Raw
from tessera.domain.preview.prune import previews as deletions
from tessera.domain.preview.prune import pruned, without
from tessera.domain.preview.quota import allocatable_after, capacity_change
from tessera.domain.preview.quota import previews as quota_previews
from tessera.domain.preview.results import ObjectPreview, Preview
from tessera.domain.preview.schedulers import SchedulerPreviews
from tessera.domain.preview.schedulers import previews as scheduler_previews
from tessera.domain.preview.sharing import previews as sharing_previews
from tessera.domain.quota.quantities import accelerators


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
    loc = where or Locations()
    wanted = list(manifests)
    gone = pruned(cluster, wanted, prune_selector, prune_tracking_id) if prune else ()
    after = without(cluster.with_objects(wanted), gone)
    pools = geometry_previews(cluster, after, wanted, now, loc)
    shared = sharing_previews(cluster, after, wanted, now, loc)
    devices = dra_previews(cluster, after, wanted, loc)
    contracts = admission_previews(cluster, after)
    scheduling = _both(
        scheduler_previews(cluster, after, shared.plan), hami_previews(cluster, after, shared.plan)
    )
    nodes_after = allocatable_after(cluster, pools, shared, loc)
    dra_nodes = {n for members in devices.members.values() for n in members}
    for node in cluster.nodes:  # DRA nodes' allocatable does not follow their geometry
        if node["metadata"]["name"] in dra_nodes:
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            nodes_after[node["metadata"]["name"]] = accelerators(allocatable)
    capacity = {**capacity_change(cluster, nodes_after), **devices.capacity}
    quotas, tenants = quota_previews(cluster, after, wanted, capacity)
    deleted = deletions(cluster, after, gone, shared, nodes_after, now, loc)
    found = (*pools.objects, *shared.objects, *quotas, *deleted)
    by_key = {(o.kind, o.name): _with_scheduler(_with_dra(o, devices), scheduling) for o in found}
    ordered = sorted(
        (by_key[(m["kind"], m["metadata"]["name"])] for m in (*wanted, *gone)),
        key=lambda o: (KIND_ORDER.index(o.kind), o.name),
    )
    changed_capacity = {r: ba for r, ba in sorted(capacity.items()) if ba[0] != ba[1]}
    return Preview(
        objects=tuple(ordered),
        tenants=tenants,
        capacity=changed_capacity,
        configs=(*pools.configs, *shared.configs, *scheduling.configs),
        device_classes=devices.classes,
        class_conflicts=tuple(
            f"DeviceClass {name} exists and is not Tessera's (no label "
            f"app.kubernetes.io/managed-by: tessera): {', '.join(who)} would be Stalled, "
            "reason Conflict"
            for name, who in sorted(devices.conflicts.items())
        ),
        admission=contracts.changes,
        admission_conflicts=contracts.conflicts,
    )


def _both(a: SchedulerPreviews, b: SchedulerPreviews) -> SchedulerPreviews:
    """Volcano's part and HAMi's, each policy's lines of both."""

    def lines(x: Mapping[str, tuple[str, ...]], y: Mapping[str, tuple[str, ...]]) -> Any:
        return {k: (*x.get(k, ()), *y.get(k, ())) for k in sorted({*x, *y})}

    return SchedulerPreviews(
        (*a.configs, *b.configs),
        lines(a.errors, b.errors),
        lines(a.notes, b.notes),
        lines(a.writes, b.writes),
    )


def _with_dra(o: ObjectPreview, devices: DraPreviews) -> ObjectPreview:
    """A DRA pool's capacity is what its ResourceSlices hold, not device-plugin resources;
    a declarer whose classes are refused says why."""
    problems = devices.problems.get(f"{o.kind}/{o.name}", ())
    if o.kind == "NodePoolGeometry" and o.name in devices.members and o.action != "delete":
        o = replace(
            o, capacity_before={}, capacity_after={}, devices=devices.devices.get(o.name, {})
        )
    return replace(o, problems=(*o.problems, *problems)) if problems else o


def _with_scheduler(o: ObjectPreview, found: SchedulerPreviews) -> ObjectPreview:
    """A policy naming Volcano: what its scheduler cannot take is an error (exit 1), its
    traps are problems, a restart is a write."""
    if o.kind != "SharingPolicy":
        return o
    if o.action == "delete":  # a deleted policy's release of Volcano's config
        return replace(o, writes=(*o.writes, *found.writes.get(o.name, ())))
    return replace(
        o,
        conflicts=(*o.conflicts, *found.errors.get(o.name, ())),
        problems=(*o.problems, *found.notes.get(o.name, ())),
        writes=(*o.writes, *found.writes.get(o.name, ())),
    )
