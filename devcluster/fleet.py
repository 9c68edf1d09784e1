"""Simulated accelerator nodes: Node objects that look like real GPU/NPU nodes.

A node carries the labels GPU Feature Discovery (or the Ascend device
plugin) would put on it and the allocatable a device plugin would advertise
for whole devices. The agents in ``gpunode`` and ``kubelet`` then keep it
honest as Tessera reconfigures it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

from . import hardware

SIMULATED_LABEL = "sim.tessera.io/simulated"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    model: str  # a GPU model (H100-80GB …) or an Ascend chip (Ascend310P3 …) of ``hardware``
    devices: int = 8
    pool: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False

    @property
    def is_ascend(self) -> bool:
        return hardware.is_npu(self.model)


def node_manifest(spec: NodeSpec) -> dict[str, object]:
    labels = {SIMULATED_LABEL: "true", "kubernetes.io/hostname": spec.name, **spec.labels}
    if spec.pool:
        labels[c.POOL_LABEL] = spec.pool
    if spec.is_ascend:
        chip = hardware.npu_chip(spec.model)
        labels[c.NPU_CHIP_NAME_LABEL] = chip.chip
        labels[c.NPU_COUNT_LABEL] = str(spec.devices)
        resources = {f"huawei.com/{chip.whole_resource}": str(spec.devices)}
    else:
        labels |= {
            c.GPU_PRODUCT_LABEL: hardware.gpu(spec.model).product,
            c.GPU_COUNT_LABEL: str(spec.devices),
            c.MIG_STRATEGY_LABEL: "mixed",
            "nvidia.com/mig.capable": "true",
            c.GPU_REPLICAS_LABEL: "1",
            c.GPU_SHARING_STRATEGY_LABEL: "none",
        }
        resources = {"nvidia.com/gpu": str(spec.devices)}
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", **resources}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
        "spec": {"unschedulable": spec.unschedulable} if spec.unschedulable else {},
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def create_nodes(kube: Kube, specs: Iterable[NodeSpec]) -> list[str]:
    """Create the nodes (status included, which needs a second write) and return their names."""
    names = []
    for spec in specs:
        manifest = node_manifest(spec)
        try:
            kube.create("/api/v1/nodes", manifest)
        except ApiError as err:
            if not err.conflict:
                raise
        kube.patch(path_of("v1", "nodes", spec.name) + "/status", {"status": manifest["status"]})
        names.append(spec.name)
    return names


def pool(name: str, model: str, count: int, devices: int = 8) -> list[NodeSpec]:
    return [NodeSpec(f"{name}-{i}", model, devices, pool=name) for i in range(count)]
