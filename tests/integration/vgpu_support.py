"""What the vGPU stories share: the simulated vGPU stack, pools of vm-vgpu nodes, VMs, reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from builders import custom
from devcluster import vgpufleet, vgpunode
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c

from .faults import NPG, node_of, pool_spec
from .helpers import app_pods, eventually, namespace, wait_running

BOARD = "A100-PCIE-80GB"  # nvidia.com/gpu.product NVIDIA-A100-80GB-PCIe: types A100D-*
VM_TYPE = "A100D-20C"  # the VMs' vGPU: GPU 0 of every node keeps four of them
KEEP = {"devices": "0", "types": {VM_TYPE: 4}}


def layout(second: dict[str, int]) -> dict[str, Any]:
    """GPU 0: the VMs' four A100D-20C; GPU 1: ``second``."""
    return {"vgpu": {"layouts": [KEEP, {"devices": "1", "types": second}]}}


@pytest.fixture(scope="module")
def vgpu_agents(kube: Kube) -> Iterator[None]:
    """The simulated vGPU Device Manager and sandbox device plugin (KWOK plays the kubelet)."""
    namespace(kube, c.VGPU_CONFIGMAP_NAMESPACE)
    sim = vgpunode.VgpuNodeAgents(kube, reconfigure_seconds=0.3).start()
    try:
        yield
    finally:
        sim.stop()


def create_pool(
    kube: Kube, pool: str, nodes: int, spec_layout: dict[str, Any], **rollout: Any
) -> list[str]:
    """``nodes`` vm-vgpu nodes of two GPUs and the pool over them (Ready once applied); its
    drain may delete emptyDir data, as every virt-launcher pod mounts emptyDir."""
    rollout["drain"] = {"deleteEmptyDirData": True, **rollout.get("drain", {})}
    names = vgpufleet.create_nodes(kube, vgpufleet.pool(pool, BOARD, nodes, gpus=2))
    kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, spec_layout, **rollout)))
    return names


def vms(
    kube: Kube, ns: str, app: str, pool: str, replicas: int, kind: str = "Deployment"
) -> list[Obj]:
    """``replicas`` VMs of one A100D-20C each on the pool's nodes, Running."""
    namespace(kube, ns)
    on_pool = {c.POOL_LABEL: pool}
    vgpufleet.deploy_vms(kube, ns, vgpufleet.vms(app, VM_TYPE, replicas, on_pool, kind=kind))
    return wait_running(kube, ns, app, replicas, 90)


def devices(kube: Kube, node: str) -> list[dict[str, int]]:
    """The node's vGPU devices per GPU, as the simulated host holds them."""
    return list(json.loads(node_of(kube, node)["metadata"]["annotations"][vgpunode.DEVICES]))


def advertised(kube: Kube, node: str) -> dict[str, str]:
    """The sandbox device plugin's resources in the node's allocatable (non-zero)."""
    alloc = node_of(kube, node)["status"]["allocatable"]
    return {k: v for k, v in alloc.items() if k.startswith("nvidia.com/") and v != "0"}


def vm_nodes(kube: Kube, ns: str, app: str) -> set[str]:
    return {p["spec"].get("nodeName", "") for p in app_pods(kube, ns, app)}


def config_label(kube: Kube, node: str) -> str:
    return str(node_of(kube, node)["metadata"]["labels"].get(c.VGPU_CONFIG_LABEL, ""))


def state_label(kube: Kube, node: str) -> str:
    return str(node_of(kube, node)["metadata"]["labels"].get(c.VGPU_CONFIG_STATE_LABEL, ""))


def vgpu_configs(kube: Kube) -> dict[str, Any]:
    """The vgpu-configs section Tessera wrote into the vGPU Device Manager's ConfigMap."""
    path = path_of("v1", "configmaps", c.VGPU_CONFIGMAP_NAME, c.VGPU_CONFIGMAP_NAMESPACE)
    cm = eventually(lambda: kube.get_or_none(path), 30, "the vGPU ConfigMap")
    doc: dict[str, Any] = yaml.safe_load(cm["data"][c.VGPU_CONFIGMAP_KEY]) or {}
    return dict(doc.get("vgpu-configs") or {})
