"""Simulated accelerator nodes: Node objects that look like real GPU/NPU nodes.

A node carries the labels GPU Feature Discovery (or the Ascend device
plugin) would put on it and the allocatable a device plugin would advertise
for whole devices. KWOK plays its kubelet (it is annotated for KWOK: status and
Lease heartbeats, the pods bound to it); the agents in ``gpunode``, ``npunode`` and
``hami_ascend`` keep its devices honest as Tessera reconfigures it, through
:func:`publish_devices` — the device plugin's registration, which KWOK keeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devcluster import hardware, watchdog
from devcluster.scheduling import KWOK_ANNOTATION
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

SIMULATED_LABEL = "sim.tessera.io/simulated"
# The GPU Operator's deploy label of its DRA stack: the simulated NVIDIA DRA driver's kubelet
# plugin runs on nodes carrying it ("true"), and no device plugin runs there (``dradriver``).
DRA_NODE_LABEL = "nvidia.com/gpu.deploy.dra-driver"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
READY_TIMEOUT = 60.0


@dataclass(frozen=True)
class NodeSpec:
    name: str
    model: str  # a GPU model (H100-80GB …) or an Ascend chip (Ascend310P3 …) of ``hardware``
    devices: int = 8
    pool: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    dra: bool = False  # a DRA node: the DRA driver's label, no nvidia.com/* in allocatable

    @property
    def is_ascend(self) -> bool:
        return hardware.is_npu(self.model)


def node_manifest(spec: NodeSpec) -> dict[str, Any]:
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
        resources = {} if spec.dra else {"nvidia.com/gpu": str(spec.devices)}
        if spec.dra:  # labels={DRA_NODE_LABEL: "false"}: a DRA node whose driver is not installed
            labels.setdefault(DRA_NODE_LABEL, "true")
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", **resources}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": labels,
            "annotations": {KWOK_ANNOTATION: "fake"},
        },
        "spec": {"unschedulable": spec.unschedulable} if spec.unschedulable else {},
        # No conditions: KWOK reports the node Ready (and keeps these resources).
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


def create_nodes(kube: Kube, specs: Iterable[NodeSpec], *, wait: bool = True) -> list[str]:
    """Create the nodes and their resources (status: a second write); return their names.

    With ``wait``, return once KWOK has reported every node Ready and the node lifecycle
    controller has lifted the ``not-ready`` taint the API server puts on a new node — the
    moment the scheduler can place pods there.
    """
    return create_from_manifests(kube, [node_manifest(spec) for spec in specs], wait=wait)


def create_from_manifests(
    kube: Kube, manifests: Iterable[dict[str, Any]], *, wait: bool = True
) -> list[str]:
    """:func:`create_nodes` for Node manifests (``node_manifest``'s, changed by the caller)."""
    names = []
    for manifest in manifests:
        name = manifest["metadata"]["name"]
        try:
            kube.create("/api/v1/nodes", manifest)
        except ApiError as err:
            if not err.conflict:
                raise
        kube.patch(path_of("v1", "nodes", name) + "/status", {"status": manifest["status"]})
        names.append(name)
    if wait:
        wait_schedulable(kube, names)
    return names


def wait_schedulable(kube: Kube, names: Iterable[str], timeout: float = READY_TIMEOUT) -> None:
    """Wait until each node is Ready and free of the ``not-ready`` taint (or gone)."""
    pending = set(names)
    deadline = time.monotonic() + timeout
    while pending:
        watchdog.check()
        pending = {name for name in pending if not _schedulable(kube, name)}
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nodes not Ready after {timeout:.0f}s (KWOK): {sorted(pending)}")
        time.sleep(0.05)  # polling the API with a deadline


def _schedulable(kube: Kube, name: str) -> bool:
    node = kube.get_or_none(path_of("v1", "nodes", name))
    return node is None or schedulable(node)


def schedulable(node: Mapping[str, Any]) -> bool:
    """KWOK reports the node Ready and the ``not-ready`` taint is lifted: pods can go there."""
    ready = any(
        cond.get("type") == "Ready" and cond.get("status") == "True"
        for cond in (node.get("status") or {}).get("conditions") or []
    )
    taints = (node.get("spec") or {}).get("taints") or []
    return ready and not any(t.get("key") == NOT_READY_TAINT for t in taints)


def patch_node(
    kube: Kube,
    name: str,
    labels: Mapping[str, str | None],
    annotations: Mapping[str, str | None] | None = None,
) -> None:
    """Set (``None``: remove) labels and annotations of node ``name``; a node gone is no error."""
    meta: dict[str, Any] = {"labels": dict(labels)}
    if annotations:
        meta["annotations"] = dict(annotations)
    try:
        kube.patch(path_of("v1", "nodes", name), {"metadata": meta})
    except ApiError as err:
        if not err.not_found:
            raise


def publish_devices(
    kube: Kube, node: Mapping[str, Any], prefix: str, devices: Mapping[str, int]
) -> None:
    """Make ``devices`` the node's allocatable and capacity under ``prefix`` (a plugin's domain).

    What a device plugin's registration does through the kubelet. Resources outside ``prefix``
    are kept; nothing is written when the node already shows them; a node deleted meanwhile is
    not an error.
    """
    current = (node.get("status") or {}).get("allocatable") or {}
    keep = {k: v for k, v in current.items() if not k.startswith(prefix)}
    wanted = {**keep, **{k: str(v) for k, v in devices.items()}}
    if wanted == current:
        return
    patch = [
        {"op": "replace", "path": "/status/allocatable", "value": wanted},
        {"op": "replace", "path": "/status/capacity", "value": wanted},
    ]
    try:
        kube.patch(path_of("v1", "nodes", node["metadata"]["name"]) + "/status", patch, kind="json")
    except ApiError as err:
        if not err.not_found:
            raise


def pool(
    name: str, model: str, count: int, devices: int = 8, *, dra: bool = False
) -> list[NodeSpec]:
    """``count`` nodes ``<name>-<i>`` of pool ``name``; with ``dra``, GPU nodes of a DRA pool:
    GFD's labels and the MIG manager as elsewhere, the DRA driver's kubelet plugin instead of
    the device plugin (``dradriver``)."""
    return [NodeSpec(f"{name}-{i}", model, devices, pool=name, dra=dra) for i in range(count)]


def daemonset_pod(
    kube: Kube,
    namespace: str,
    node: str,
    owned: Callable[[Mapping[str, Any]], bool],
    what: str,
    timeout: float,
    label_selector: str | None = None,
) -> dict[str, Any]:
    """The live (not deleting) pod on ``node`` that ``owned`` accepts: a DaemonSet's pod, made
    by the DaemonSet controller and bound by kube-scheduler. TimeoutError names ``what``."""
    pods = path_of("v1", "pods", namespace=namespace)
    deadline = time.monotonic() + timeout
    while True:
        watchdog.check()
        found = kube.list(
            pods, label_selector=label_selector, field_selector=f"spec.nodeName={node}"
        )
        for pod in found:
            if not pod["metadata"].get("deletionTimestamp") and owned(pod):
                return pod
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} on {node} after {timeout:.0f}s")
        time.sleep(0.1)  # polling the API with a deadline
