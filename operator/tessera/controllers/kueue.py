"""A TenantQuota's Kueue objects (``spec.enforcement: Kueue | Both``): observe → plan → apply.

The decisions are ``tessera.domain.quota.kueue``; this module reads the four kinds once per
pass (Kueue's CRDs served or not), writes what the plan says, and turns the outcome into a
Verdict for the TenantQuota. Every write is one the plan made from this pass's reads: a
create that meets an object made meanwhile (409) or a patch of one deleted meanwhile (404) is
left to the next pass, which sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from tessera.adapters.kube import ApiError, Obj
from tessera.api.v1alpha1.common import LabelSelector
from tessera.controllers.runtime import Context, ref_of
from tessera.domain.base.conditions import Verdict
from tessera.domain.quota.kueue import objects as k
from tessera.domain.quota.kueue import plan as kplan
from tessera.domain.quota.ledger import CapacityLedger
from tessera.observability.tracing import span

log = logging.getLogger("tessera.tenantquota.kueue")
NOT_INSTALLED = "KueueNotInstalled"


def installed(ctx: Context) -> bool:
    """Whether the API server serves Kueue's kueue.x-k8s.io/v1beta2 (discovery, no RBAC)."""
    found = ctx.kube.get_or_none(k.API)
    served = {r.get("name") for r in (found or {}).get("resources") or []}
    return all(kind.plural in served for kind in k.KINDS)


def observe(ctx: Context) -> dict[kplan.Key, Obj]:
    out: dict[kplan.Key, Obj] = {}
    for kind in k.KINDS:
        for item in ctx.kube.list(kind.path()):
            item.setdefault("kind", kind.kind)
            out[kplan.key_of(item)] = item
    return out


def not_installed() -> Verdict:
    return Verdict(
        "stalled",
        NOT_INSTALLED,
        f"spec.enforcement asks for Kueue, but the API server does not serve {k.API_VERSION} "
        f"({', '.join(kind.plural for kind in k.KINDS)}): install Kueue v0.17 or later, or set "
        "spec.enforcement: ResourceQuota",
    )


def sync(
    ctx: Context,
    obj: Obj,
    members: Iterable[str],
    commitments: Mapping[str, Mapping[str, int]],
    hard: Mapping[str, int],
    ledger: CapacityLedger,
    selectors: Mapping[str, LabelSelector | None],
) -> Verdict:
    """Write the tenant's Kueue objects as the ledger says; the Verdict of that part."""
    tenant = obj["metadata"]["name"]
    if not installed(ctx):
        return not_installed()
    namespaces = sorted(members)
    want = kplan.desired(tenant, namespaces, commitments, hard, ledger, selectors)
    if want.problems:
        return Verdict("stalled", "TooLarge", "; ".join(want.problems))
    plan = kplan.plan(tenant, want, observe(ctx))
    for action in plan.actions:
        _apply(ctx, obj, action)
    queues = f"{len(namespaces)} ClusterQueues in cohort {k.cohort_name(tenant)}"
    if plan.clashes:
        return Verdict("stalled", "NameClash", "; ".join(plan.clashes))
    if plan.actions:
        return Verdict("progressing", "ApplyingQueues", f"{plan.writes} Kueue writes; {queues}")
    return Verdict("ready", "QueuesApplied", f"Kueue quotas in force: {queues}")


def remove(ctx: Context, tenant: str) -> None:
    """Delete exactly this tenant's Kueue objects (never a flavor, shared by tenants)."""
    if not installed(ctx):
        return
    plan = kplan.plan(tenant, kplan.Desired(), observe(ctx))
    for action in plan.actions:
        ctx.kube.delete(action.path)


def _apply(ctx: Context, obj: Obj, action: kplan.KueueWrite) -> None:
    with span(f"{action.verb} {action.kind.kind}", name=action.name):
        log.info("tenantquota/%s: %s %s", obj["metadata"]["name"], action.verb, action.ref)
        try:
            if action.verb == "create" and action.body is not None:
                ctx.kube.create(action.path, action.body)
            elif action.verb == "patch" and action.body is not None:
                ctx.kube.patch(action.path, action.body)
            elif action.verb == "delete":
                ctx.kube.delete(action.path)
        except ApiError as err:
            if err.conflict or err.not_found:  # changed under us: the next pass re-plans
                log.info("tenantquota: %s %s raced (%s)", action.verb, action.ref, err.reason)
                return
            raise
    ctx.events.post(ref_of(obj), "KueueUpdated", f"{action.verb} {action.ref}", ctx.clock())
