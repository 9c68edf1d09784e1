"""Who holds which GPU on a DRA node: its ResourceClaims, read against its ResourceSlices.

On a pool with ``allocation: DRA`` no agent is needed: the scheduler writes what each claim
holds into ``status.allocation.devices.results`` (driver, pool, device) and the pods it is
for into ``status.reservedFor`` (both in one status write, before the pod is bound: kube-scheduler's
DRA plugin, PreBind). A device becomes a GPU index through the node's ResourceSlices: NVIDIA's driver
publishes no index (``cmd/gpu-kubelet-plugin/deviceinfo.go``, v0.4.1), but every GPU and MIG device carries
``resource.kubernetes.io/pciBusID`` (a MIG device its parent's), and NVML, so ``nvidia-smi``
and mig-parted, number a node's GPUs in PCI bus order. The result is the same ``Holders``
record the GPU node agent publishes for device-plugin pools, read at the observation's time,
so ``scope`` decides both alike.

``held`` trusts the map only when it says everything; otherwise it returns why not, and the
node is drained whole (``scope.decide``):

- the node's slices do not name one PCI bus per GPU (a GPU with MIG on and no MIG devices
  is not published at all), or the pool is incomplete;
- a claim allocated on the node holds a device its slices do not list;
- a pod on the node uses a claim that is allocated but not reserved for it (yet), one that
  is not allocated at all, or one the list did not return.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from tessera.api import constants as c
from tessera.domain.dra.naming import DRIVER
from tessera.domain.dra.slices import SlicePool
from tessera.domain.rollout.holders import Holders
from tessera.domain.rollout.views import NodeView, PodView

Raw = Mapping[str, Any]


@dataclass(frozen=True)
class ClaimHeld:
    """One ResourceClaim as the map needs it: the GPU devices it holds, whom it is for."""

    namespace: str
    name: str
    allocated: bool
    devices: tuple[tuple[str, str], ...]
    """(pool, device) of each result of driver ``gpu.nvidia.com``."""
    reserved: tuple[str, ...]
    """The uids of the pods in ``status.reservedFor``."""

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


Claims = Mapping[tuple[str, str], ClaimHeld]


def claims(raw: Iterable[Raw]) -> dict[tuple[str, str], ClaimHeld]:
    """(namespace, name) → each claim as the map needs it."""
    out = {}
    for item in raw:
        meta, status = item["metadata"], item.get("status") or {}
        alloc = status.get("allocation")
        results = ((alloc or {}).get("devices") or {}).get("results") or []
        devices = tuple(
            (str(r.get("pool", "")), str(r.get("device", "")))
            for r in results
            if r.get("driver") == DRIVER
        )
        reserved = tuple(
            str(r.get("uid", ""))
            for r in status.get("reservedFor") or []
            if r.get("resource") == "pods" and not r.get("apiGroup")
        )
        key = (str(meta.get("namespace", "")), str(meta["name"]))
        out[key] = ClaimHeld(key[0], key[1], alloc is not None, devices, reserved)
    return out


def indices(node: str, pool: SlicePool | None, gpu_count: int) -> dict[str, int] | str:
    """Device name → its GPU index on ``node`` (the rank of its PCI bus), or why not known."""
    if pool is None or pool.devices is None:
        return f"{node} publishes no complete ResourceSlice pool"
    buses = sorted(set(pool.buses.values()))
    if len(buses) != gpu_count:
        return (
            f"the ResourceSlices of {node} name {len(buses)} GPU(s) by PCI bus, "
            f"the node has {gpu_count}"
        )
    rank = {bus: i for i, bus in enumerate(buses)}
    return {device: rank[bus] for device, bus in pool.buses.items()}


def held(
    node: str,
    pods: Sequence[PodView],
    found: Claims,
    pool: SlicePool | None,
    gpu_count: int,
    read: datetime,
) -> Holders | str:
    """Who holds which GPU on ``node`` (``pods``: those bound to it), or why the claims
    cannot say."""
    index = indices(node, pool, gpu_count)
    if isinstance(index, str):
        return index
    for each in found.values():
        for where, device in each.devices:
            if where == node and device not in index:
                return f"claim {each.ref} holds device {device}, which no ResourceSlice of {node} lists"
    out: dict[str, tuple[int, ...]] = {}
    for pod in pods:
        gpus: set[int] = set()
        for name in pod.claims:
            claim = found.get((pod.namespace, name))
            if claim is None:
                return f"pod {pod.ref} uses claim {pod.namespace}/{name}, which was not listed"
            if not claim.allocated:
                return f"pod {pod.ref} uses claim {claim.ref}, which is not allocated yet"
            mine = [device for where, device in claim.devices if where == node]
            if mine and pod.uid not in claim.reserved:
                return f"pod {pod.ref} uses claim {claim.ref}, which is not reserved for it yet"
            gpus |= {index[device] for device in mine}
        if gpus:
            out[pod.ref] = tuple(sorted(gpus))
    return Holders(read, out)


def with_holders(
    views: Iterable[NodeView],
    pods: Sequence[PodView],
    found: Claims,
    pools: Mapping[str, SlicePool],
    read: datetime,
) -> list[NodeView]:
    """``views``, each DRA node's with who holds which GPU (``held``), or why not known."""
    on: dict[str, list[PodView]] = {}
    for pod in pods:
        on.setdefault(pod.node, []).append(pod)
    out = []
    for view in views:
        if view.dra is None:
            out.append(view)
            continue
        count = view.labels.get(c.GPU_COUNT_LABEL, "")
        if not count.isdigit():
            why = f"{view.name} has no {c.GPU_COUNT_LABEL} label"
            out.append(replace(view, holders=None, holders_error=why))
            continue
        got = held(view.name, on.get(view.name, ()), found, pools.get(view.name), int(count), read)
        if isinstance(got, str):
            out.append(replace(view, holders=None, holders_error=got))
        else:
            out.append(replace(view, holders=got, holders_error=""))
    return out
