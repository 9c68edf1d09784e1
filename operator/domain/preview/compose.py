"""``tessera.domain.preview.preview``: the whole preview, each part computed in turn.

Prune first (what no manifest names leaves the cluster the others are planned against), then
the pools, the sharing policies, the capacity both leave and the tenant quotas measured
against it, and last what each deletion's finalizer does. The top of the package's chain.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from tessera.api.v1alpha1.common import LabelSelector

from .geometry import previews as geometry_previews
from .model import KIND_ORDER, Cluster, Locations, Raw
from .prune import previews as deletions
from .prune import pruned, without
from .quota import allocatable_after, capacity_change
from .quota import previews as quota_previews
from .results import Preview
from .sharing import previews as sharing_previews


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
    nodes_after = allocatable_after(cluster, pools, shared, loc)
    capacity = capacity_change(cluster, nodes_after)
    quotas, tenants = quota_previews(cluster, after, wanted, capacity)
    deleted = deletions(cluster, after, gone, shared, nodes_after, now, loc)
    by_key = {(o.kind, o.name): o for o in (*pools.objects, *shared.objects, *quotas, *deleted)}
    ordered = sorted(
        (by_key[(m["kind"], m["metadata"]["name"])] for m in (*wanted, *gone)),
        key=lambda o: (KIND_ORDER.index(o.kind), o.name),
    )
    changed_capacity = {r: ba for r, ba in sorted(capacity.items()) if ba[0] != ba[1]}
    return Preview(
        objects=tuple(ordered),
        tenants=tenants,
        capacity=changed_capacity,
        configs=(*pools.configs, *shared.configs),
    )
