"""Raw DRA objects → what a rollout on a DRA pool decides on (pure: objects in, values out).

Each node's devices as NVIDIA's driver publishes them are ``domain.dra.slices.slice_pools``.

- ``expected_devices``: what a node's slices must publish once its layout is live, from
  the same per-GPU resolution the device-plugin verification uses (``geometry.capacity``).
- ``plugin_pods``: the kubelet-plugin pods of the pool's DaemonSet, by node;
  ``plugin_daemon_sets`` which DaemonSets a pass reads, ``with_devices`` the views with both.
- ``with_claims``: pods whose ResourceClaims hold devices of ``gpu.nvidia.com`` in their
  node's pool are GPU pods: the drain evicts them, and the room check counts what they hold
  by the Tessera DeviceClass of each device's kind (``naming.geometry_class``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from tessera.api.v1alpha1.nodepoolgeometry import MigLayout
from tessera.domain.dra.naming import DRIVER, GPU, geometry_class
from tessera.domain.dra.slices import SlicePool
from tessera.domain.geometry import capacity
from tessera.domain.geometry.catalog import GpuModel
from tessera.domain.geometry.layouts import GeometryError
from tessera.domain.rollout import NodeView, PodView
from tessera.domain.rollout.views import UNPUBLISHED, DraNode, PluginPod

Raw = Mapping[str, Any]


def expected_devices(
    model: GpuModel, gpu_count: int, layouts: Sequence[MigLayout]
) -> dict[str, int]:
    """``gpu`` or MIG profile → count the driver publishes once ``layouts`` are applied:
    a GPU with MIG off is one ``gpu``, a GPU with MIG on only its MIG devices (§5.5)."""
    verdict = capacity.validate_mig_node(model, gpu_count, layouts, "mixed")
    if not verdict.valid:
        raise GeometryError(verdict.reason)
    out: dict[str, int] = {}
    for result in verdict.placements:
        kinds = [i.profile for i in result.instances] or [GPU]
        for kind in kinds:
            out[kind] = out.get(kind, 0) + 1
    return dict(sorted(out.items()))


def plugin_pods(pods: Iterable[Raw], daemon_set: str) -> dict[str, tuple[PluginPod, ...]]:
    """Node → the pods of DaemonSet ``daemon_set`` (``pods`` listed in its namespace)."""
    out: dict[str, list[PluginPod]] = {}
    for pod in pods:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        owners = meta.get("ownerReferences") or []
        if not any(o.get("kind") == "DaemonSet" and o.get("name") == daemon_set for o in owners):
            continue
        ready = status.get("phase") == "Running" and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        view = PluginPod(
            meta["namespace"],
            meta["name"],
            meta.get("uid", ""),
            terminating=meta.get("deletionTimestamp") is not None,
            ready=ready,
        )
        if spec.get("nodeName"):
            out.setdefault(spec["nodeName"], []).append(view)
    return {node: tuple(sorted(p, key=lambda v: v.name)) for node, p in out.items()}


def plugin_daemon_sets(
    default: str, involved: Sequence[NodeView], pools: Mapping[str, SlicePool]
) -> tuple[str, ...]:
    """The kubelet-plugin DaemonSets (``<namespace>/<name>``) whose pods a pass reads: the
    pool's (``default``) and any an in-flight record names, when a member is in flight or
    publishes no complete pool (is its driver there?); none when every member is converged
    and published (a converged pool reads the slices, nothing more)."""
    flying = [v for v in involved if v.state is not None]
    unpublished = any((p := pools.get(v.name)) is None or p.devices is None for v in involved)
    if not flying and not unpublished:
        return ()
    named = {
        t.plugin
        for v in flying
        for t in (v.state.target if v.state else None, v.state.last_good if v.state else None)
        if t is not None and t.plugin is not None
    }
    return tuple(sorted({default} | named))


def with_devices(
    views: Iterable[NodeView],
    pools: Mapping[str, SlicePool],
    plugins: Mapping[str, Mapping[str, tuple[PluginPod, ...]]],
) -> list[NodeView]:
    """``views``, each with what the driver publishes on it and its kubelet-plugin pods
    (``plugins``: node → DaemonSet → pods, as ``plugin_pods`` read them)."""

    def one(view: NodeView) -> NodeView:
        pool = pools.get(view.name)
        devices = pool.devices if pool is not None else None
        return replace(view, dra=DraNode(devices, plugins.get(view.name, {})))

    return [one(v) for v in views]


Allocations = dict[tuple[str, str], tuple[tuple[str, str, str], ...]]


def allocations(claims: Iterable[Raw]) -> Allocations:
    """(namespace, claim) → its allocated devices as (driver, pool, device)."""
    out: Allocations = {}
    for claim in claims:
        meta = claim["metadata"]
        alloc = (claim.get("status") or {}).get("allocation") or {}
        results = (alloc.get("devices") or {}).get("results") or []
        out[(meta.get("namespace", ""), meta["name"])] = tuple(
            (str(r.get("driver")), str(r.get("pool")), str(r.get("device"))) for r in results
        )
    return out


def with_claims(
    pods: Iterable[PodView], claims: Allocations, pools: Mapping[str, SlicePool]
) -> list[PodView]:
    """``pods``, those holding GPU devices of their node's pool marked as accelerator pods
    with what they hold by DeviceClass (a device no slice lists as ``UNPUBLISHED``)."""
    out = []
    for pod in pods:
        held = [
            device
            for name in pod.claims
            for driver, pool, device in claims.get((pod.namespace, name), ())
            if driver == DRIVER and pool == pod.node
        ]
        if not held:
            out.append(pod)
            continue
        kinds = pools.get(pod.node, SlicePool()).kinds
        requests = dict(pod.requests)
        for device in held:
            kind = kinds.get(device)
            key = geometry_class(kind) if kind is not None else UNPUBLISHED
            requests[key] = requests.get(key, 0) + 1
        out.append(replace(pod, requests_accelerator=True, requests=requests))
    return out


def room_view(view: NodeView, pool: SlicePool | None) -> NodeView:
    """A node for the room check: its published devices as room, by DeviceClass."""
    if pool is None or pool.devices is None:
        return view
    extra = {geometry_class(kind): n for kind, n in pool.devices.items()}
    return replace(view, allocatable={**view.allocatable, **extra})
