"""`tessera plan` for a vGPU pool: per node the vGPU types and counts before and after, the VMs
(virt-launcher pods) that migrate first, capacity in sandbox device plugin names, the config diff."""

from __future__ import annotations

from typing import Any

from preview_builders import T0, namespace, npg, world

from builders import NodeWrapper, PodWrapper
from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain import preview
from tessera.domain.cluster import objects as cluster
from tessera.domain.cluster import pools
from tessera.domain.geometry import vgpu
from tessera.domain.preview import Raw

OLD: dict[str, Any] = {"vgpu": {"layouts": [{"types": {"A100-10C": 4}}]}}
NEW: dict[str, Any] = {"vgpu": {"layouts": [{"types": {"A100-20C": 2}}]}}


def _vgpu_nodes(pool: str, count: int) -> list[Raw]:
    return [
        NodeWrapper(f"{pool}-{i}")
        .label(c.POOL_LABEL, pool)
        .label(c.GPU_PRODUCT_LABEL, "NVIDIA-A100-PCIE-40GB")
        .label(c.GPU_COUNT_LABEL, "2")
        .label(c.GPU_WORKLOAD_CONFIG_LABEL, "vm-vgpu")
        .ready()
        .advertise({})
        .obj()
        for i in range(count)
    ]


def _converged(nodes: list[Raw], pool: Raw) -> tuple[list[Raw], Raw]:
    """The nodes as the vGPU Device Manager and sandbox plugin leave them, and the ConfigMap."""
    name = pool["metadata"]["name"]
    spec = NodePoolGeometrySpec.model_validate(pool["spec"])
    seen = cluster.observe_pool(name, spec, nodes, {})
    out = []
    for node in nodes:
        target = seen.targets[node["metadata"]["name"]]
        assert target.config is not None
        labels = {
            **node["metadata"]["labels"],
            c.VGPU_CONFIG_LABEL: target.config[0],
            c.VGPU_CONFIG_STATE_LABEL: "success",
        }
        alloc = {**node["status"]["allocatable"], **{k: str(v) for k, v in target.capacity.items()}}
        meta = {**node["metadata"], "labels": labels}
        out.append({**node, "metadata": meta, "status": {**node["status"], "allocatable": alloc}})
    wanted, keep = cluster.pool_configs(spec, seen)
    text = pools.configs_document("", name, vgpu.SECTION, wanted, keep)
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": c.VGPU_CONFIGMAP_NAME, "namespace": c.VGPU_CONFIGMAP_NAMESPACE},
        "data": {c.VGPU_CONFIGMAP_KEY: text},
    }
    return out, cm


def _vm(name: str, node: str) -> Raw:
    """KubeVirt's pod of a running VM holding one vGPU."""
    built = PodWrapper(f"virt-launcher-{name}-x7k2p").namespace("vms").node(node)
    built = built.labels({"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": name})
    built = built.owner("VirtualMachineInstance", name)
    return built.limits({"nvidia.com/NVIDIA_A100-10C": 1}).phase("Running").obj()


def test_plan_shows_vgpu_types_per_node_and_the_vms_that_migrate() -> None:
    old = npg("vms", OLD)
    nodes, cm = _converged(_vgpu_nodes("vms", 2), old)
    items = [*nodes, cm, old, namespace("vms"), _vm("db", "vms-0"), _vm("web", "vms-1")]
    result = preview.preview(world(*items), [npg("vms", NEW)], T0)
    (obj,) = result.objects
    by_node = {ch.node: ch for ch in obj.changes}
    assert by_node["vms-0"].before == "all: 4xA100-10C"
    assert by_node["vms-0"].after == "all: 2xA100-20C"
    assert by_node["vms-0"].migrates == ("vms/virt-launcher-db-x7k2p",)
    assert by_node["vms-1"].migrates == ("vms/virt-launcher-web-x7k2p",)
    assert obj.capacity_before == {"nvidia.com/NVIDIA_A100-10C": 16}
    assert obj.capacity_after == {"nvidia.com/NVIDIA_A100-10C": 0, "nvidia.com/NVIDIA_A100-20C": 8}
    [diff] = result.configs
    assert c.VGPU_CONFIGMAP_NAME in diff.where
    assert "+    vgpu-devices: {A100-20C: 2}" in diff.diff
    text = preview.render(result)
    assert "vms-0: all: 4xA100-10C  ->  all: 2xA100-20C" in text
    assert "migrates VMs vms/virt-launcher-db-x7k2p" in text


def test_plan_of_a_type_the_board_lacks_says_why_and_writes_no_config() -> None:
    bad = npg("vms", {"vgpu": {"layouts": [{"types": {"A100D-20C": 1}}]}})
    result = preview.preview(world(*_vgpu_nodes("vms", 1)), [bad], T0)
    (obj,) = result.objects
    assert result.configs == ()
    assert any("A100D-20C" in p and "A100-PCIE-40GB" in p for p in obj.problems)
    assert [ch.after for ch in obj.changes] == ["impossible"]


def test_plan_of_a_fresh_vm_node_says_it_runs_the_device_managers_default() -> None:
    """An unlabelled vm-vgpu node is not empty: the device manager applied its default."""
    result = preview.preview(world(*_vgpu_nodes("vms", 1)), [npg("vms", NEW)], T0)
    (obj,) = result.objects
    assert [(ch.before, ch.after) for ch in obj.changes] == [
        ("the device manager's default config", "all: 2xA100-20C")
    ]
