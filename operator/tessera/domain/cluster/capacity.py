"""Each node's offer to the capacity ledger (``quota.ledger``), read from the raw cluster.

What a node offers now, by sharing mode:

- MIG, whole GPUs, time-slicing and MPS: the accelerator resources it advertises
  (``status.allocatable``: MIG profile counts, replicas under a device-plugin sharing config,
  ``.shared`` renames); vGPU types and vNPU templates likewise;
- HAMi: the slots it advertises, and the memory and cores HAMi's device plugin registered
  (its ``hami.io/node-nvidia-register`` and ``hami.io/node-register-<chip>`` annotations):
  ``nvidia.com/gpumem`` (MiB) and ``nvidia.com/gpucores`` (percent of a GPU, 100 each), and
  ``huawei.com/<chip>-memory`` / ``huawei.com/<chip>-core`` for Ascend cards;
- DRA: the devices its ResourceSlices publish (newest complete generation), under each
  DeviceClass resource ``<class>.deviceclass.resource.k8s.io/devices`` the tenants name whose
  selector Tessera can read (``quota.devices.selects``).

A node belongs to the pool that may touch it (``cluster.claims``: one pool's selector, or the
one a contended node is kept by); a node no pool may touch counts under no pool. A member of a
NodePoolGeometry that is not at its pool's target (``rollout.targets.at_target``),
or that a rollout holds, is changing: it also offers ``after``, the pool's target capacity
for it (``pools.target_for``) under its device-plugin sharing config (replicas and renames),
DRA targets under Tessera's geometry classes. Whatever the target does not predict (HAMi's
memory and cores, classes other than the geometry's) is 0 afterwards, so the ledger counts
0 of it until the node is done: never a promise that may not hold.

A node's scheduling taints go with its offer, but not Tessera's own (a rollout's) nor
Kubernetes' ``node.kubernetes.io/*`` (cordon, not ready): a pool's Kueue flavor tolerates
what every node of the pool carries for good, never a node being changed or failing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.cluster import claims as pool_claims
from tessera.domain.cluster import objects, pools
from tessera.domain.dra import slices as dra_slices
from tessera.domain.quota import devices as quota_devices
from tessera.domain.quota.ledger import NO_POOL, CapacityLedger, NodeOffer, build
from tessera.domain.quota.names import device_class, devices_of
from tessera.domain.quota.quantities import accelerators
from tessera.domain.rollout.targets import at_target
from tessera.domain.sharing import parsing
from tessera.domain.sharing.device_plugin import DevicePluginConfig

Raw = Mapping[str, Any]
_PASSING = (c.GROUP + "/", "node.kubernetes.io/")  # Tessera's rollout, the node's conditions
GPUMEM = "nvidia.com/gpumem"
GPUCORES = "nvidia.com/gpucores"


def hami_registered(annotations: Mapping[str, str]) -> dict[str, int]:
    """Memory and cores HAMi's device plugins registered on a node (nothing when unreadable)."""
    out: dict[str, int] = {}
    for key, raw in annotations.items():
        if key == c.HAMI_NVIDIA_REGISTER_ANNOTATION:
            mem, core = GPUMEM, GPUCORES
        elif key.startswith(c.HAMI_NODE_REGISTER_ANNOTATION_PREFIX):
            chip = key.removeprefix(c.HAMI_NODE_REGISTER_ANNOTATION_PREFIX)
            mem, core = f"huawei.com/{chip}-memory", f"huawei.com/{chip}-core"
        else:
            continue
        for device in _devices(raw):
            for resource, field in ((mem, "devmem"), (core, "devcore")):
                value = device.get(field)
                if type(value) is int and value > 0:
                    out[resource] = out.get(resource, 0) + value
    return out


def _devices(raw: str) -> list[dict[str, Any]]:
    try:
        found = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    return [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []


def shared(physical: Mapping[str, int], config: DevicePluginConfig | None) -> dict[str, int]:
    """Whole devices as the device plugin advertises them under ``config``: replicas and
    renames applied (the inverse of ``pools.physical_allocatable``)."""
    if config is None:
        return dict(physical)
    out: dict[str, int] = {}
    for resource, n in physical.items():
        name = config.advertised_as(resource)
        out[name] = out.get(name, 0) + n * config.replicas_of(resource)
    return out


def _config(labels: Mapping[str, str], sharing: Mapping[str, Any]) -> DevicePluginConfig | None:
    key = labels.get(c.DEVICE_PLUGIN_CONFIG_LABEL)
    if not key or key not in sharing:
        return None
    config, _ = parsing.parse(sharing[key])
    return config


def class_kinds(resources: Iterable[str], classes: Iterable[Raw]) -> dict[str, str | None]:
    """Each DRA class resource → what its class selects (``gpu`` or a MIG profile), None for
    a class Tessera cannot read; a class that does not exist selects nothing (``""``)."""
    by_name = {k["metadata"]["name"]: k for k in classes}
    out: dict[str, str | None] = {}
    for resource in resources:
        name = device_class(resource)
        if name is not None:
            out[resource] = quota_devices.selects(by_name[name]) if name in by_name else ""
    return out


def offers(
    nodes: Sequence[Raw],
    geometries: Mapping[str, NodePoolGeometrySpec],
    sharing: Mapping[str, Any],
    *,
    kinds: Mapping[str, str | None] | None = None,
    slices: Iterable[Raw] = (),
) -> list[NodeOffer]:
    """Every node's offer; ``sharing`` is the device-plugin ConfigMap's data, ``kinds`` the
    DRA class resources to count (``class_kinds``), ``slices`` the cluster's ResourceSlices."""
    kinds = kinds or {}
    counted = {r: k for r, k in kinds.items() if k}
    published = dra_slices.slice_pools(slices) if counted else {}
    views = {n["metadata"]["name"]: objects.pool_view(n, sharing) for n in nodes}
    claims = pool_claims.resolve(
        {p: s.node_selector for p, s in geometries.items()}, views.values()
    )
    owned: dict[str, list[tuple[str, Mapping[str, str], Mapping[str, int]]]] = {}
    for name, pool in claims.owner.items():  # a node two pools contend for: neither's
        owned.setdefault(pool, []).append((name, views[name].labels, views[name].allocatable))
    member: dict[str, tuple[str, pools.NodeTarget | None]] = {}
    for pool, spec in sorted(geometries.items()):
        for name, wanted in pools.targets_for(pool, spec, owned.get(pool, [])).items():
            member[name] = (pool, wanted)
    out = []
    for node in nodes:
        meta = node["metadata"]
        name = meta["name"]
        now = accelerators((node.get("status") or {}).get("allocatable") or {})
        now = {r: n for r, n in now.items() if r.startswith(c.ACCELERATOR_RESOURCE_PREFIXES)}
        now.update(hami_registered(meta.get("annotations") or {}))
        pool_devices = (published.get(name) or dra_slices.SlicePool()).devices or {}
        for resource, kind in counted.items():
            now[resource] = pool_devices.get(kind, 0)
        pool, target = member.get(name, (NO_POOL, None))
        view = views[name]
        after: dict[str, int] | None = None
        if target is not None and (
            view.state is not None or target.desired.invalid or not at_target(view, target.desired)
        ):
            if target.desired.expected_devices is not None:  # DRA: by geometry class
                predicted = {devices_of(k): n for k, n in target.capacity.items()}
            else:
                predicted = shared(target.capacity, _config(view.labels, sharing))
            after = predicted
        kept = frozenset(
            (t.key, t.value, t.effect)
            for t in view.taints
            if t.effect in ("NoSchedule", "NoExecute") and not t.key.startswith(_PASSING)
        )
        out.append(NodeOffer(name, pool, now, after, kept))
    # Devices a driver publishes for a pool no Node object carries (a slice whose node is not
    # listed, or one not bound to a node) are still the class's capacity, in no pool.
    for name, published_pool in sorted(published.items()):
        if name in views:
            continue
        devices = published_pool.devices or {}
        extra = {resource: devices.get(kind, 0) for resource, kind in counted.items()}
        out.append(NodeOffer(name, NO_POOL, extra, None, frozenset()))
    return out


def ledger(
    nodes: Sequence[Raw],
    geometries: Mapping[str, NodePoolGeometrySpec],
    sharing: Mapping[str, Any],
    *,
    kinds: Mapping[str, str | None] | None = None,
    slices: Iterable[Raw] = (),
) -> CapacityLedger:
    return build(offers(nodes, geometries, sharing, kinds=kinds, slices=slices))
