"""The DRA part of a preview: DeviceClass writes and, per DRA pool, the devices its slices offer.

Classes: ``dra.desired_classes`` over every pool and policy once the manifests are
applied — each pool's nodes read with ``dra.pool_input`` (its nodeSelector, as the operator
reads them) and the classes of a spec that does not parse held (``dra.holding``) —, against the cluster's DeviceClasses with ``dra.diff`` — exactly what the
operator's class controller computes, so the plan lists its creates, updates and
deletes; a class of a wanted name that Tessera does not own is a conflict (the
declarer would be ``Stalled``, reason ``Conflict``: exit 1). A snapshot without
DeviceClasses compares with none (every class is a create).

Devices: per DRA pool of the manifests, what its nodes' ResourceSlices hold now
(``dra.slices.selected``) and what they will hold once the geometry is applied and
the kubelet plugin republished, predicted per node from the same per-GPU resolution
as device-plugin capacity (``geometry.capacity.validate_mig_node``): a GPU with MIG
off is one ``gpu`` device, every MIG instance one device of its profile.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import ValidationError

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain import dra
from tessera.domain.cluster import claims as pool_claims
from tessera.domain.cluster import objects as observe
from tessera.domain.cluster.pools import WHOLE_GPUS
from tessera.domain.dra import naming
from tessera.domain.dra import sharing as dra_sharing
from tessera.domain.dra import slices as dra_slices
from tessera.domain.geometry import capacity, catalog
from tessera.domain.preview.model import Cluster, Locations, Raw
from tessera.domain.preview.results import ClassChange
from tessera.domain.quota.devices import selects
from tessera.domain.quota.names import devices_of

POOL = "NodePoolGeometry"
T = TypeVar("T", NodePoolGeometrySpec, SharingPolicySpec)


@dataclass(frozen=True)
class DraPreviews:
    classes: tuple[ClassChange, ...] = ()
    conflicts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # class → declarers
    problems: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # Kind/name → why
    devices: Mapping[str, Mapping[str, tuple[int, int]]] = field(default_factory=dict)
    """Pool → class → devices now, devices once applied (pools of the manifests only)."""
    members: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # DRA pool → nodes
    capacity: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """``<class>.deviceclass.resource.k8s.io/devices`` → cluster-wide before, after."""


def previews(
    before: Cluster, after: Cluster, manifests: Sequence[Raw], loc: Locations
) -> DraPreviews:
    pools, bad_pools = _specs(after.of_kind(POOL), NodePoolGeometrySpec)
    policies, bad_policies = _specs(after.of_kind("SharingPolicy"), SharingPolicySpec)
    dra_pools = {n: s for n, s in pools.items() if s.allocation == "DRA"}
    if not dra_pools and not any(dra.owned(o) for o in before.device_classes):
        return DraPreviews()  # no DRA anywhere: nothing to say, nothing read
    members = _members(after, pools, loc)
    labels = [n["metadata"].get("labels") or {} for n in after.nodes]
    inputs = {n: dra.pool_input(s, labels) for n, s in pools.items()}  # as the operator reads
    unparsed = [*(f"{POOL}/{n}" for n in bad_pools), *(f"SharingPolicy/{n}" for n in bad_policies)]
    desired = dra.holding(dra.desired_classes(inputs, policies), unparsed)  # as the operator
    changes = dra.diff(desired, before.device_classes)
    classes = (
        *(
            ClassChange(d.name, "create", d.selects, d.declared_by, _says(d))
            for d in changes.create
        ),
        *(
            ClassChange(d.name, "update", d.selects, d.declared_by, _says(d))
            for d, _ in changes.update
        ),
        *(ClassChange(n, "delete") for n, _ in changes.delete),
    )
    problems = {
        who: tuple(str(p) for p in found)
        for who, found in desired.problems.items()
        if who not in unparsed  # the object's own preview names its spec error
    }
    named = {m["metadata"]["name"] for m in manifests if m["kind"] == POOL}
    now = {n: dra_slices.selected(before.slices, members.get(n, ())) for n in dra_pools}
    then = {n: _predicted(before, after, s, members.get(n, ())) for n, s in dra_pools.items()}
    devices = {
        n: {
            naming.geometry_class(what): (now[n].get(what, 0), then[n].get(what, 0))
            for what in sorted(now[n].keys() | then[n].keys())
        }
        for n in sorted(named & dra_pools.keys())
    }
    return DraPreviews(
        classes=tuple(sorted(classes, key=lambda x: x.name)),
        conflicts=dict(changes.conflicts),
        problems=problems,
        devices=devices,
        members={n: members.get(n, ()) for n in dra_pools},
        capacity=_capacity(before, desired, now, then),
    )


def _says(cls: dra.DesiredClass) -> str:
    what = "whole GPUs" if cls.selects == naming.GPU else f"MIG {cls.selects}"
    return f"{what}, {dra_sharing.describe(cls.config)}"


def _capacity(
    before: Cluster,
    desired: dra.DesiredClasses,
    now: Mapping[str, Counter[str]],
    then: Mapping[str, Counter[str]],
) -> dict[str, tuple[int, int]]:
    """Devices per Tessera class, cluster-wide: DRA pools' nodes as predicted, others as now."""
    everywhere = dra_slices.selected(before.slices, _slice_nodes(before))
    planned = everywhere - sum(now.values(), Counter()) + sum(then.values(), Counter())
    old = {o["metadata"]["name"]: o for o in before.device_classes if dra.owned(o)}
    out: dict[str, tuple[int, int]] = {}
    for name in sorted(old.keys() | desired.classes.keys()):
        was = selects(old[name]) if name in old else None
        will = desired.classes[name].selects if name in desired.classes else None
        out[devices_of(name)] = (
            everywhere.get(was, 0) if was else 0,
            planned.get(will, 0) if will else 0,
        )
    return out


def _slice_nodes(cluster: Cluster) -> set[str]:
    return {str((s.get("spec") or {}).get("nodeName", "")) for s in cluster.slices}


def _predicted(
    before: Cluster, after: Cluster, spec: NodePoolGeometrySpec, nodes: Sequence[str]
) -> Counter[str]:
    """The devices ``nodes`` will publish once ``spec`` is applied. A node the layout cannot
    be applied to (unknown model, layout that does not fit: the geometry preview names why)
    is never repartitioned, so it keeps publishing what it does now."""
    layouts = tuple(spec.mig.layouts) if spec.mig else WHOLE_GPUS
    by_name = {n["metadata"]["name"]: n for n in after.nodes}
    found: Counter[str] = Counter()
    for node in nodes:
        labels = by_name[node]["metadata"].get("labels") or {}
        try:
            model = catalog.resolve(labels.get(c.GPU_PRODUCT_LABEL, ""))
            count = int(labels.get(c.GPU_COUNT_LABEL, "0") or 0)
            verdict = capacity.validate_mig_node(model, count, layouts)
        except (catalog.UnknownModelError, ValueError):
            verdict = None
        if verdict is None or not verdict.valid:
            found.update(dra_slices.selected(before.slices, (node,)))
            continue
        for gpu in verdict.placements:
            found[naming.GPU] += 0 if gpu.instances else 1
            found.update(i.profile for i in gpu.instances)
    return +found


def _members(
    after: Cluster, pools: Mapping[str, NodePoolGeometrySpec], loc: Locations
) -> dict[str, tuple[str, ...]]:
    plugin = (after.configmap(loc.device_plugin) or {}).get("data") or {}
    claimants = pool_claims.claimants(after.of_kind(POOL).values())
    out = {}
    for name, spec in pools.items():
        if spec.allocation == "DRA":
            seen = observe.observe_pool(name, spec, after.nodes, plugin, claimants)
            out[name] = tuple(sorted(seen.targets))
    return out


def _specs(objects: Mapping[str, Raw], kind: type[T]) -> tuple[dict[str, T], list[str]]:
    """The specs that parse, and the names of those that do not (their classes are held)."""
    out, bad = {}, []
    for name, obj in objects.items():
        try:
            out[name] = kind.model_validate(obj.get("spec") or {})
        except ValidationError:
            bad.append(name)  # the object's own preview reports it
    return out, bad
