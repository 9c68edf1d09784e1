"""Capacity after the change, and what it means for TenantQuotas.

Capacity is what the TenantQuota controller compares promises with: the sum
of the nodes' accelerator allocatable. Nodes nothing changes keep what they
advertise now; a node whose layout or sharing changes is predicted from its
new physical devices (the pool's target capacity) multiplied out by the
sharing config that will govern it (``sharing.status.advertised``).
Overcommitment is then ``quota.reporting.overcommitted`` before and after,
and a TenantQuota manifest is planned with ``quota.planning.plan`` to list
the ResourceQuota writes it causes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from pydantic import ValidationError

from tessera.api.v1alpha1.tenantquota import TenantQuotaSpec
from tessera.domain.base import selectors
from tessera.domain.cluster import objects as observe
from tessera.domain.preview.geometry import GeometryPreviews
from tessera.domain.preview.model import Cluster, Locations, Raw, object_action
from tessera.domain.preview.results import ObjectPreview, TenantImpact
from tessera.domain.preview.sharing import SharingPreviews
from tessera.domain.quota import membership as membership_
from tessera.domain.quota import objects as quota_objects
from tessera.domain.quota import planning as quota_planning
from tessera.domain.quota import reporting
from tessera.domain.quota.quantities import CountError, accelerators
from tessera.domain.sharing import status as sharing_status

KIND = "TenantQuota"


def allocatable_after(
    cluster: Cluster, geometry: GeometryPreviews, sharing: SharingPreviews, loc: Locations
) -> dict[str, dict[str, int]]:
    """Per node, the accelerator allocatable once everything planned has rolled out."""
    changing = {c.node for o in geometry.objects for c in o.changes} | set(sharing.changed)
    out: dict[str, dict[str, int]] = {}
    for node in cluster.nodes:
        name = node["metadata"]["name"]
        now = accelerators((node.get("status") or {}).get("allocatable") or {})
        if name not in changing:
            out[name] = now
            continue
        physical = dict(geometry.allocatable.get(name) or _physical(node, cluster, loc))
        result = sharing.results.get(name)
        facts = sharing.facts.get(name)
        shared: dict[str, int] = {}
        if result is not None and result.valid and facts is not None:
            devices = replace(
                facts,
                gpus=physical.get("nvidia.com/gpu", 0),
                mig_devices={k: v for k, v in physical.items() if k.startswith("nvidia.com/mig-")},
            )
            shared = sharing_status.advertised(result, devices)
        if shared and facts is not None and facts.vendor == "nvidia":
            physical = {k: v for k, v in physical.items() if not k.startswith("nvidia.com/")}
        out[name] = {**physical, **shared}
    return out


def _physical(node: Raw, cluster: Cluster, loc: Locations) -> dict[str, int]:
    plugin = cluster.configmap(loc.device_plugin) or {}
    view = observe.pool_view(node, plugin.get("data") or {})
    return accelerators(dict(view.allocatable))


def capacity_change(
    cluster: Cluster, after: Mapping[str, Mapping[str, int]]
) -> dict[str, tuple[int, int]]:
    before: dict[str, int] = {}
    for node in cluster.nodes:
        for r, n in accelerators((node.get("status") or {}).get("allocatable") or {}).items():
            before[r] = before.get(r, 0) + n
    planned: dict[str, int] = {}
    for alloc in after.values():
        for r, n in alloc.items():
            planned[r] = planned.get(r, 0) + n
    return {
        r: (before.get(r, 0), planned.get(r, 0)) for r in sorted(before.keys() | planned.keys())
    }


def _tenants(objects: Cluster) -> dict[str, TenantQuotaSpec]:
    out = {}
    for name, obj in objects.of_kind(KIND).items():
        try:
            out[name] = TenantQuotaSpec.model_validate(obj.get("spec") or {})
        except ValidationError:
            continue
    return out


def _membership(cluster: Cluster, tenants: Mapping[str, TenantQuotaSpec]) -> membership_.Membership:
    live = [ns for ns in cluster.namespaces if not ns["metadata"].get("deletionTimestamp")]
    return membership_.resolve(
        {
            tenant: [
                ns["metadata"]["name"]
                for ns in live
                if selectors.matches(spec.namespace_selector, ns["metadata"].get("labels") or {})
            ]
            for tenant, spec in tenants.items()
        }
    )


def _overcommit(
    tenants: Mapping[str, TenantQuotaSpec],
    members: membership_.Membership,
    capacity: Mapping[str, int],
) -> dict[str, tuple[bool, str]]:
    commitments = {}
    for t, s in tenants.items():
        try:
            commitments[t] = reporting.commitment(s, len(members.namespaces_of(t)))
        except CountError:
            continue
    out = {}
    for t in commitments:
        _, status, _, message = reporting.overcommitted(t, commitments, capacity)
        out[t] = (status == "True", message)
    return out


def previews(
    before: Cluster,
    after: Cluster,
    manifests: Sequence[Raw],
    capacity: Mapping[str, tuple[int, int]],
) -> tuple[tuple[ObjectPreview, ...], tuple[TenantImpact, ...]]:
    """TenantQuota manifests (their ResourceQuota writes) and every tenant's Overcommitted."""
    old_tenants, new_tenants = _tenants(before), _tenants(after)
    old = _overcommit(
        old_tenants, _membership(before, old_tenants), {r: b for r, (b, _) in capacity.items()}
    )
    members = _membership(after, new_tenants)
    new = _overcommit(new_tenants, members, {r: a for r, (_, a) in capacity.items()})
    impacts = tuple(
        TenantImpact(t, old.get(t, (False, ""))[0], flag, message)
        for t, (flag, message) in sorted(new.items())
        if flag or old.get(t, (False, ""))[0]
    )
    seen = [q for raw in before.quotas if (q := quota_objects.read(raw)) is not None]
    live = before.of_kind(KIND)
    out = []
    for manifest in manifests:
        if manifest["kind"] != KIND:
            continue
        name = manifest["metadata"]["name"]
        spec = new_tenants[name]
        writes: list[str] = []
        problems: list[str] = []
        try:
            plan = quota_planning.plan(name, spec, members, seen)
            for a in (*plan.wave1, *plan.wave2):
                hard = ((a.manifest or {}).get("spec") or {}).get("hard") or {}
                limits = ", ".join(f"{k}={v}" for k, v in sorted(hard.items()))
                limits = f" ({limits})" if limits else ""
                writes.append(f"{a.verb} ResourceQuota {a.namespace}/{a.name}{limits}: {a.reason}")
        except CountError as err:
            problems.append(str(err))
        problems += [c.message for c in members.conflicts_of(name)]
        out.append(
            ObjectPreview(
                kind=KIND,
                name=name,
                action=object_action(KIND, live.get(name), manifest),
                nodes_total=len(members.namespaces_of(name)),
                problems=tuple(problems),
                writes=tuple(writes),
            )
        )
    return tuple(out), impacts
