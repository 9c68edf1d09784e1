"""vGPU nodes and VM workloads: what a KubeVirt cluster with NVIDIA's vGPU stack looks like.

A ``vm-vgpu`` node (the GPU Operator's ``nvidia.com/gpu.workload.config=vm-vgpu``) carries the
operator's deploy labels of that workload (vgpu.md §1.4: sandbox device plugin, vGPU manager,
vGPU Device Manager, sandbox validator, CC manager, client — all ``true``), a GFD-like
product and count, and NFD's PCI label; its allocatable has no ``nvidia.com/gpu`` (no container
device plugin runs there) but whatever vGPU devices the sandbox device plugin advertises
(``vgpunode``). VMs are virt-launcher-like pods (``kubevirt.io=virt-launcher``, with the
emptyDir volumes every virt-launcher pod mounts) of a Deployment or StatefulSet, placed by kube-scheduler by their ``nvidia.com/NVIDIA_<type>`` request; a VM
that cannot be live-migrated is one whose eviction is refused, played by a PodDisruptionBudget
of ``maxUnavailable: 0`` (KubeVirt's eviction webhook refuses such a VMI's virt-launcher pod).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devcluster import fleet, vgpuboards
from devcluster.scheduling import KWOK_ANNOTATION
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

VM_VGPU = "vm-vgpu"
SANDBOX_PLUGIN_LABEL = "nvidia.com/gpu.deploy.sandbox-device-plugin"
SANDBOX_VALIDATOR_LABEL = "nvidia.com/gpu.deploy.sandbox-validator"
VGPU_DM_LABEL = "nvidia.com/gpu.deploy.vgpu-device-manager"
DEPLOY_LABELS = (
    SANDBOX_PLUGIN_LABEL,
    "nvidia.com/gpu.deploy.vgpu-manager",
    VGPU_DM_LABEL,
    SANDBOX_VALIDATOR_LABEL,
    "nvidia.com/gpu.deploy.cc-manager",
    "nvidia.com/gpu.deploy.client",
)
PAUSED = "paused-for-vgpu-change"
PCI_LABEL = "feature.node.kubernetes.io/pci-10de.present"  # NFD: an NVIDIA PCI device
VIRT_LAUNCHER = {"kubevirt.io": "virt-launcher"}
# A virt-launcher pod always mounts emptyDir volumes (KubeVirt's private, public, sockets,
# libvirt runtime and ephemeral disks ...): a drain must be allowed to delete their data.
LAUNCHER_EMPTY_DIRS = ("private", "public", "sockets", "libvirt-runtime", "ephemeral-disks")


def node_spec(name: str, board: str, gpus: int = 1, pool: str = "") -> fleet.NodeSpec:
    """A vm-vgpu node of ``board`` (a key, name or product of ``vgpu_boards.yaml``)."""
    found = vgpuboards.board(board)
    labels = {
        c.GPU_WORKLOAD_CONFIG_LABEL: VM_VGPU,
        **dict.fromkeys(DEPLOY_LABELS, "true"),
        PCI_LABEL: "true",
        c.GPU_PRODUCT_LABEL: found.product,
        c.GPU_COUNT_LABEL: str(gpus),
    }
    return fleet.NodeSpec(name, found.key, gpus, pool=pool, labels=labels)


def node_manifest(spec: fleet.NodeSpec) -> dict[str, Any]:
    """The Node: no container-stack labels, no ``nvidia.com/*`` until the plugin advertises."""
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    labels = {fleet.SIMULATED_LABEL: "true", "kubernetes.io/hostname": spec.name, **spec.labels}
    if spec.pool:
        labels[c.POOL_LABEL] = spec.pool
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
        "spec": {},
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


def pool(name: str, board: str, count: int, gpus: int = 1) -> list[fleet.NodeSpec]:
    """``count`` vm-vgpu nodes ``<name>-<i>`` of pool ``name``."""
    return [node_spec(f"{name}-{i}", board, gpus, pool=name) for i in range(count)]


def create_nodes(kube: Kube, specs: list[fleet.NodeSpec], *, wait: bool = True) -> list[str]:
    return fleet.create_from_manifests(kube, [node_manifest(s) for s in specs], wait=wait)


def resource(vgpu_type: str, mdev_prefix: str = "NVIDIA") -> str:
    """The sandbox device plugin's resource for a type (``nvidia.com/NVIDIA_A100D-20C``)."""
    return f"nvidia.com/{mdev_prefix}_{vgpu_type}"


def vms(
    name: str,
    vgpu_type: str,
    replicas: int,
    node_selector: Mapping[str, str] | None = None,
    *,
    kind: str = "Deployment",
) -> dict[str, Any]:
    """``replicas`` VMs: virt-launcher-like pods each holding one vGPU of ``vgpu_type``, on the
    nodes ``node_selector`` picks (kube-scheduler places them; no ``nodeName``)."""
    labels = {"app": name, **VIRT_LAUNCHER}
    pod: dict[str, Any] = {
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "compute",
                "image": "quay.io/kubevirt/virt-launcher:v1.6.0",
                "resources": {
                    "requests": {"cpu": "100m", resource(vgpu_type): "1"},
                    "limits": {resource(vgpu_type): "1"},
                },
                "volumeMounts": [
                    {"name": v, "mountPath": f"/var/run/kubevirt-{v}"} for v in LAUNCHER_EMPTY_DIRS
                ],
            }
        ],
        "volumes": [{"name": v, "emptyDir": {}} for v in LAUNCHER_EMPTY_DIRS],
    }
    if node_selector:
        pod["nodeSelector"] = dict(node_selector)
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": labels}, "spec": pod},
    }
    if kind == "StatefulSet":
        spec |= {"serviceName": name, "podManagementPolicy": "Parallel"}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def not_migratable(name: str) -> dict[str, Any]:
    """The PDB that makes VMs ``name`` refuse eviction (a VM that cannot live-migrate)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": f"{name}-not-migratable"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": name}}},
    }


def deploy_vms(kube: Kube, namespace: str, manifest: dict[str, Any]) -> None:
    plural = "statefulsets" if manifest["kind"] == "StatefulSet" else "deployments"
    try:
        kube.create(path_of("apps/v1", plural, namespace=namespace), manifest)
    except ApiError as err:
        if not err.conflict:
            raise
