"""TenantQuota controller: observe → plan → apply one wave → status.

Everything that decides lives in ``tessera.domain.quota``; this module only
gathers the observations (tenants, namespaces, Tessera's ResourceQuotas,
node capacity), applies the wave the plan releases — with optimistic
concurrency, so a quota that changed since we read it is re-planned rather
than overwritten — and writes the status once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from tessera.adapters.kube import ApiError, Obj, path_of
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.api.v1alpha1.tenantquota import TenantQuotaSpec
from tessera.controllers import kueue, skeleton
from tessera.controllers.runtime import Context, Result, custom_path, list_nodes, ref_of
from tessera.domain.base import selectors
from tessera.domain.base.conditions import Verdict
from tessera.domain.cluster import capacity as node_capacity
from tessera.domain.quota import charged, objects, planning, reporting, settling
from tessera.domain.quota import membership as membership_
from tessera.domain.quota.ledger import CapacityLedger
from tessera.domain.quota.names import device_class, is_extended, quota_key
from tessera.domain.quota.quantities import CountError, counts
from tessera.observability import metrics
from tessera.observability.tracing import span

PLURAL = "tenantquotas"
GEOMETRIES = "nodepoolgeometries"
KIND = "TenantQuota"
RESOURCE_API = "/apis/resource.k8s.io/v1"
LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"  # terminal pods are never charged
FAST_REQUEUE = 0.5  # waiting for the quota controller to confirm a wave
log = logging.getLogger("tessera.tenantquota")
_KIND = skeleton.Kind(
    KIND,
    PLURAL,
    lambda obj: TenantQuotaSpec.model_validate(obj.get("spec") or {}),
    announce=False,
)  # each wave's writes have their own Event


def reconcile(ctx: Context, name: str) -> Result:
    return skeleton.run(ctx, _KIND, name, _steps)


def _steps(ctx: Context, obj: Obj, spec: TenantQuotaSpec) -> skeleton.PassOutcome:
    name = obj["metadata"]["name"]
    tenants = _tenants(ctx)
    namespaces = ctx.kube.list("/api/v1/namespaces")
    member_map = {
        tenant: [
            ns["metadata"]["name"]
            for ns in namespaces
            if not ns["metadata"].get("deletionTimestamp")
            and selectors.matches(s.namespace_selector, ns["metadata"].get("labels") or {})
        ]
        for tenant, s in tenants.items()
    }
    membership = membership_.resolve(member_map)
    try:
        seen = _seen_quotas(ctx)
        present = _recount(ctx, spec, membership.namespaces_of(name))
        busy = _busy(ctx, name, spec, membership.namespaces_of(name), seen, present)
        plan = planning.plan(name, spec, membership, seen, present, busy)
    except CountError as err:
        return skeleton.PassOutcome(Verdict("stalled", "InvalidSpec", str(err)))
    if plan.waiting:
        log.info(
            "tenantquota/%s: waiting for admission in %s to settle before moving headroom",
            name,
            ", ".join(plan.waiting),
        )
    wave = plan.next_wave
    for action in wave:
        _apply(ctx, obj, action, seen)
    if wave:  # re-observe before the status claims anything about the new limits
        seen = _seen_quotas(ctx)
        present = _recount(ctx, spec, membership.namespaces_of(name))
        plan = planning.plan(name, spec, membership, seen, present, busy)
    ledger, capacity, geometries = _ledger(
        ctx, {r for s in tenants.values() for r in (*s.hard, *(s.total or {}))}
    )
    commitments = {
        t: reporting.commitment(s, len(membership.namespaces_of(t))) for t, s in tenants.items()
    }
    overcommit = reporting.overcommitted(name, commitments, capacity, ledger)
    verdict = reporting.verdict(name, plan, membership, overcommit)
    queues = None
    if spec.enforcement != "ResourceQuota" and verdict.state != "stalled":
        queues = kueue.sync(
            ctx,
            obj,
            membership.namespaces_of(name),
            commitments,
            counts(spec.hard, what="spec.hard"),
            ledger,
            {p: g.node_selector for p, g in geometries.items()},
        )
    verdict = reporting.combined(verdict, queues, both=spec.enforcement == "Both")
    contested = membership.contested_of(name)
    _export(name, spec, seen)
    settled = plan.settled and (queues is None or queues.state != "progressing")
    result = Result(None if settled else FAST_REQUEUE)
    return skeleton.PassOutcome(
        verdict, _status(obj, spec, plan, seen, capacity, contested), result
    )


def finalize(ctx: Context, name: str) -> bool:
    """Remove exactly this tenant's ResourceQuotas and Kueue objects (never anyone else's)."""
    ctx.quota_activity.pop(name, None)
    kueue.remove(ctx, name)
    for quota in ctx.kube.list("/api/v1/resourcequotas", label_selector=objects.selector()):
        seen = objects.read(quota)
        if seen is not None and seen.tenant == name:
            ctx.kube.delete(
                path_of("v1", "resourcequotas", quota["metadata"]["name"], seen.namespace)
            )
    return True


# -- observe -------------------------------------------------------------------------------------


def _tenants(ctx: Context) -> dict[str, TenantQuotaSpec]:
    out = {}
    for item in ctx.kube.list(custom_path(PLURAL)):
        if item["metadata"].get("deletionTimestamp"):
            continue
        try:
            out[item["metadata"]["name"]] = TenantQuotaSpec.model_validate(item.get("spec") or {})
        except ValidationError:
            continue  # that tenant reports its own InvalidSpec
    return out


def _seen_quotas(ctx: Context) -> list[objects.SeenQuota]:
    quotas = ctx.kube.list("/api/v1/resourcequotas", label_selector=objects.selector())
    return [seen for q in quotas if (seen := objects.read(q)) is not None]


def _recount(
    ctx: Context, spec: TenantQuotaSpec, namespaces: Iterable[str]
) -> dict[str, dict[str, int]]:
    """Tessera's own count of what the tenant's namespaces hold, for the resources with a
    ``total`` that it can recount (``charged``); read only for those, after the quotas."""
    totals = list(spec.total or {})
    by_pods, by_claims = charged.from_pods(totals), charged.from_claims(totals)
    found: list[dict[str, dict[str, int]]] = []
    for ns in namespaces:
        if by_pods:
            pods = ctx.kube.list(path_of("v1", "pods", namespace=ns), field_selector=LIVE_PODS)
            found.append(charged.pods(by_pods, pods, ctx.clock()))
        if by_claims:
            claims = ctx.kube.list(f"{RESOURCE_API}/namespaces/{ns}/resourceclaims")
            found.append(charged.claims(by_claims, claims))
    return charged.merged(*found)


def _busy(
    ctx: Context,
    name: str,
    spec: TenantQuotaSpec,
    namespaces: Iterable[str],
    seen: list[objects.SeenQuota],
    present: dict[str, dict[str, int]],
) -> frozenset[str]:
    """The namespaces admission charged within ``settling.SETTLE``; remembers this pass's view."""
    now = settling.usage(
        name, namespaces, counts(spec.total or {}, what="spec.total"), seen, present
    )
    busy, ctx.quota_activity[name] = settling.busy(
        ctx.quota_activity.get(name, {}), now, ctx.clock()
    )
    return busy


def _ledger(
    ctx: Context, resources: set[str]
) -> tuple[CapacityLedger, dict[str, int], dict[str, NodePoolGeometrySpec]]:
    """The capacity ledger (``cluster.capacity``) and, of it, the totals Tessera can stand
    behind: every accelerator resource, and the DeviceClass resources the tenants name whose
    class it can read (their ResourceSlices are only read when some tenant names one)."""
    dra = {r for r in resources if device_class(r)}
    kinds: dict[str, str | None] = {}
    slices: list[Obj] = []
    if dra:
        kinds = node_capacity.class_kinds(dra, ctx.kube.list(f"{RESOURCE_API}/deviceclasses"))
        slices = ctx.kube.list(f"{RESOURCE_API}/resourceslices")
    geometries = {}
    for item in ctx.kube.list(custom_path(GEOMETRIES)):
        try:
            geometries[item["metadata"]["name"]] = NodePoolGeometrySpec.model_validate(
                item.get("spec") or {}
            )
        except ValidationError:
            continue  # that pool reports its own InvalidSpec; its nodes count as they are
    ns, cm_name = ctx.settings.device_plugin_configmap
    sharing = (ctx.kube.get_or_none(path_of("v1", "configmaps", cm_name, ns)) or {}).get("data")
    ledger = node_capacity.ledger(
        list_nodes(ctx), geometries, sharing or {}, kinds=kinds, slices=slices
    )
    totals = ledger.totals()
    known = {r: totals.get(r, 0) for r, kind in kinds.items() if kind is not None}
    capacity = {**{r: n for r, n in totals.items() if is_extended(r)}, **known}
    return ledger, capacity, geometries


# -- apply ---------------------------------------------------------------------------------------


def _written(seen: list[objects.SeenQuota], action: planning.Action) -> list[str]:
    """The spec.hard keys the quota being updated has now (as observed for this plan)."""
    for quota in seen:
        if quota.namespace == action.namespace and objects.quota_name(quota.tenant) == action.name:
            return [*(quota_key(r) for r in quota.hard), *quota.stray]
    return []


def _apply(ctx: Context, obj: Obj, action: planning.Action, seen: list[objects.SeenQuota]) -> None:
    path = path_of("v1", "resourcequotas", action.name, action.namespace)
    with span(f"{action.verb} ResourceQuota", namespace=action.namespace, reason=action.reason):
        log.info(
            "tenantquota/%s: %s %s: %s", obj["metadata"]["name"], action.verb, path, action.reason
        )
        try:
            if action.verb == "create" and action.manifest is not None:
                ctx.kube.create(
                    path_of("v1", "resourcequotas", namespace=action.namespace), action.manifest
                )
            elif action.verb == "update" and action.manifest is not None:
                # a merge patch keeps keys it does not mention: null the resources dropped
                hard = {**dict.fromkeys(_written(seen, action)), **action.manifest["spec"]["hard"]}
                body: dict[str, Any] = {
                    "metadata": {
                        "labels": action.manifest["metadata"]["labels"],
                        "resourceVersion": action.resource_version,
                    },
                    "spec": {**action.manifest["spec"], "hard": hard},
                }
                ctx.kube.patch(path, body)
            elif action.verb == "delete":
                precondition = (
                    {"preconditions": {"resourceVersion": action.resource_version}}
                    if action.resource_version
                    else None
                )
                ctx.kube.delete(path, precondition)
        except ApiError as err:
            if err.conflict or err.not_found:  # changed under us: the next pass re-plans
                log.info(
                    "tenantquota: %s %s raced (%s); re-planning", action.verb, path, err.reason
                )
                return
            raise
    ctx.events.post(
        ref_of(obj),
        "QuotaUpdated",
        f"{action.verb} {action.namespace}/{action.name}: {action.reason}",
        ctx.clock(),
    )


# -- status --------------------------------------------------------------------------------------


def _status(
    obj: Obj,
    spec: TenantQuotaSpec,
    plan: planning.QuotaPlan,
    seen: list[objects.SeenQuota],
    capacity: dict[str, int],
    contested: tuple[str, ...],
) -> dict[str, Any]:
    meta = obj["metadata"]
    status = reporting.status(
        spec,
        plan,
        seen,
        capacity,
        tenant=meta["name"],
        generation=meta.get("generation", 0),
        conditions=[],  # the pass's verdict, added by the skeleton
        contested=contested,
    )
    return status.model_dump(by_alias=True, exclude_none=True)


def _export(name: str, spec: TenantQuotaSpec, seen: list[objects.SeenQuota]) -> None:
    mine = [q for q in seen if q.tenant == name]
    total = counts(spec.total or {}, what="spec.total")
    for resource in spec.hard.keys() | (spec.total or {}).keys():
        metrics.QUOTA.labels(name, resource, "used").set(sum(q.used.get(resource, 0) for q in mine))
        metrics.QUOTA.labels(name, resource, "hard").set(sum(q.hard.get(resource, 0) for q in mine))
        if resource in total:
            metrics.QUOTA.labels(name, resource, "total").set(total[resource])
