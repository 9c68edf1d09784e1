"""``tessera plan --prune``: what deleting the Tessera objects no manifest names would do.

Argo CD with pruning (like ``kubectl apply --prune``) deletes every object
whose manifest left Git. Each kind's finalizer then runs, and the preview
says what it does, with the functions the finalizer calls:

* NodePoolGeometry (``controllers.nodepoolgeometry.finalize``):
  ``rollout.backout`` over the nodes the pool still holds (rollout state or
  pending taint). A node whose layout is being verified finishes first; every
  other node is released at once (taint lifted, uncordoned where Tessera
  cordoned it, state cleared). No layout label is written and the agent
  ConfigMap is not touched: layouts already applied stay as they are.
* SharingPolicy (``controllers.sharingpolicy.finalize``): the policies left
  are planned without it, so its nodes go back to the default device-plugin
  config (or to the policy that now wins them) and lose Tessera's HAMi
  fields, at once and without a drain; nodes its rollout holds are released.
* TenantQuota (``controllers.tenantquota.finalize``): exactly the
  ResourceQuotas labelled with the tenant are deleted.

The objects that stay are previewed against the cluster *without* the
deleted ones, so what a deletion does to them (a poolRef left dangling, a
namespace no longer contested) shows under those objects. Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from pydantic import ValidationError

from tessera.api.v1alpha1.common import LabelSelector
from tessera.api.v1alpha1.tenantquota import TenantQuotaSpec
from tessera.domain.base import selectors
from tessera.domain.preview import prune_pools, prune_sharing, tracking
from tessera.domain.preview.model import KIND_ORDER, Cluster, Locations, Raw
from tessera.domain.preview.results import Deletion, ObjectPreview, RemovedQuota
from tessera.domain.preview.sharing import SharingPreviews
from tessera.domain.quota import objects as quota_objects
from tessera.domain.quota.names import quota_key
from tessera.domain.quota.quantities import CountError, counts


def pruned(
    cluster: Cluster,
    manifests: Iterable[Raw],
    selector: LabelSelector | None = None,
    tracking_id: str | None = None,
) -> tuple[Raw, ...]:
    """The live Tessera objects of the three kinds that no manifest names, kind then name.

    ``selector`` narrows them to the objects carrying its labels, as ``kubectl apply
    --prune -l`` does (an Argo CD application's tracking label, for instance);
    ``tracking_id`` to those the Argo CD application of that name tracks by annotation.
    """
    named = {(m["kind"], m["metadata"]["name"]) for m in manifests}
    return tuple(
        obj
        for kind in KIND_ORDER
        for name, obj in sorted(cluster.of_kind(kind).items())
        if (kind, name) not in named
        and (selector is None or selectors.matches(selector, obj["metadata"].get("labels") or {}))
        and (tracking_id is None or tracking.tracked_by(obj, tracking_id))
    )


def without(cluster: Cluster, gone: Sequence[Raw]) -> Cluster:
    """``cluster`` once ``gone`` are deleted (and their finalizers have run)."""
    keys = {(o["kind"], o["metadata"]["name"]) for o in gone}
    kept = tuple(o for o in cluster.objects if (o.get("kind"), o["metadata"]["name"]) not in keys)
    return replace(cluster, objects=kept)


def previews(
    before: Cluster,
    after: Cluster,
    gone: Sequence[Raw],
    sharing: SharingPreviews,
    allocatable: Mapping[str, Mapping[str, int]],
    now: datetime,
    loc: Locations,
) -> tuple[ObjectPreview, ...]:
    """One ``delete`` preview per object in ``gone``."""
    out = []
    for obj in gone:
        if obj["kind"] == "NodePoolGeometry":
            p = prune_pools.deletion(before, after, obj, now, loc)
        elif obj["kind"] == "SharingPolicy":
            p = prune_sharing.deletion(before, obj, sharing, allocatable, now, loc)
        else:
            p = tenant(before, obj)
        out.append(_in_progress(p, obj))
    return tuple(out)


def _in_progress(p: ObjectPreview, obj: Raw) -> ObjectPreview:
    """An object already being deleted is said so: its finalizer may be part-way through."""
    since = obj["metadata"].get("deletionTimestamp")
    if not since or p.deletion is None:
        return p
    note = f"already being deleted (since {since}): its finalizer is at work"
    return replace(p, deletion=replace(p.deletion, effects=(note, *p.deletion.effects)))


def tenant(before: Cluster, obj: Raw) -> ObjectPreview:
    """The ResourceQuotas ``tenantquota.finalize`` deletes: those labelled with the tenant."""
    name = obj["metadata"]["name"]
    seen = [q for raw in before.quotas if (q := quota_objects.read(raw)) is not None]
    mine = sorted((q for q in seen if q.tenant == name), key=lambda q: q.namespace)
    quotas = tuple(
        RemovedQuota(q.namespace, quota_objects.quota_name(name), dict(q.hard), dict(q.used))
        for q in mine
    )
    writes = tuple(
        f"delete ResourceQuota {q.namespace}/{q.name}{_limits(q)}: tenantquota/{name} is deleted"
        for q in quotas
    )
    total: dict[str, int] = {}
    problems: list[str] = []
    try:
        spec = TenantQuotaSpec.model_validate(obj.get("spec") or {})
        total = counts(spec.total or {}, what="spec.total")
    except (ValidationError, CountError) as err:
        problems.append(f"spec unreadable, its total is unknown: {str(err).splitlines()[0]}")
    effects: list[str] = []
    if total:
        shown = ", ".join(f"{r}={n}" for r, n in sorted(total.items()))
        effects.append(f"the tenant-wide total ({shown}) is no longer enforced")
    if quotas:
        where = ", ".join(q.namespace for q in quotas)
        effects.append(
            f"namespace(s) {where} keep no Tessera limit: pods there may request any amount"
        )
    else:
        effects.append("no ResourceQuota of this tenant exists: nothing to delete")
    return ObjectPreview(
        kind="TenantQuota",
        name=name,
        action="delete",
        nodes_total=len(quotas),
        problems=tuple(problems),
        writes=writes,
        deletion=Deletion(quotas=quotas, unenforced=total, effects=tuple(effects)),
    )


def _limits(q: RemovedQuota) -> str:
    parts = []
    for resource, hard in sorted(q.hard.items()):
        used = q.used.get(resource)
        parts.append(f"{quota_key(resource)}={hard}" + (f", {used} used" if used else ""))
    return f" ({'; '.join(parts)})" if parts else ""
