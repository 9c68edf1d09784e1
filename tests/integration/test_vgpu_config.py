"""A vGPU pool on the real API server: Tessera writes the vGPU Device Manager's config next to
the configs people wrote, points the node at it, and verifies what the sandbox device plugin
then advertises; a type the board lacks is refused before anything is written.

The test plays the vGPU Device Manager and the sandbox device plugin by hand, as the GPU
Operator's would answer (docs/facts/vgpu.md §Labels and states): it reads the config name from
the node's ``nvidia.com/vgpu.config``, sets ``nvidia.com/vgpu.config.state`` and the node's
``nvidia.com/NVIDIA_<type>`` allocatable.
"""

from __future__ import annotations

from typing import Any

import yaml

from builders import QUICK_ROLLOUT, GeometryWrapper, custom
from devcluster import fleet
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .helpers import condition, eventually

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
MAP = path_of("v1", "configmaps", c.VGPU_CONFIGMAP_NAME, c.VGPU_CONFIGMAP_NAMESPACE)
HUMAN = {
    "version": "v1",
    "vgpu-configs": {
        "default": [{"devices": "all", "vgpu-devices": {"A100-20C": 2}}],
        "A100-4C": [
            {"device-filter": "0x20F110DE", "devices": "all", "vgpu-devices": {"A100-4C": 10}}
        ],
    },
}


def _vgpu_node(name: str, pool: str) -> dict[str, Any]:
    """A VM node with two A100 PCIe 40GB boards, as the GPU Operator labels a vm-vgpu node
    once its vGPU Device Manager has started."""
    node = fleet.node_manifest(fleet.NodeSpec(name, "A100-40GB", devices=2, pool=pool))
    labels = node["metadata"]["labels"]
    for key in [k for k in labels if k.startswith("nvidia.com/")]:
        del labels[key]
    labels |= {
        c.GPU_PRODUCT_LABEL: "NVIDIA-A100-PCIE-40GB",
        c.GPU_COUNT_LABEL: "2",
        c.GPU_WORKLOAD_CONFIG_LABEL: "vm-vgpu",
        # the Device Manager's verdict on its start-up default: Tessera waits for one
        c.VGPU_CONFIG_STATE_LABEL: "success",
    }
    node["status"]["allocatable"].pop("nvidia.com/gpu", None)
    node["status"]["capacity"] = dict(node["status"]["allocatable"])
    return node


def _pool(name: str, types: dict[str, int]) -> dict[str, Any]:
    spec = GeometryWrapper(name).layout({"vgpu": {"layouts": [{"types": types}]}})
    return custom("NodePoolGeometry", name, spec.rollout(**QUICK_ROLLOUT).obj()["spec"])


def _human_map(kube: Kube) -> dict[str, Any]:
    if kube.get_or_none(path_of("v1", "namespaces", c.VGPU_CONFIGMAP_NAMESPACE)) is None:
        kube.create("/api/v1/namespaces", {"metadata": {"name": c.VGPU_CONFIGMAP_NAMESPACE}})
    body = {
        "metadata": {"name": c.VGPU_CONFIGMAP_NAME, "namespace": c.VGPU_CONFIGMAP_NAMESPACE},
        "data": {c.VGPU_CONFIGMAP_KEY: yaml.safe_dump(HUMAN)},
    }
    if kube.get_or_none(MAP) is None:
        return kube.create(path_of("v1", "configmaps", namespace=c.VGPU_CONFIGMAP_NAMESPACE), body)
    return kube.patch(MAP, {"data": body["data"]})


def _configs(kube: Kube) -> dict[str, Any]:
    text = kube.get(MAP)["data"][c.VGPU_CONFIGMAP_KEY]
    configs: dict[str, Any] = yaml.safe_load(text)["vgpu-configs"]
    return configs


def _stalled(kube: Kube, name: str) -> dict[str, Any] | None:
    obj = kube.get_or_none(f"{NPG}/{name}")
    cond = condition(obj, "Stalled")
    fresh = obj and obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    return cond if fresh and cond and cond["status"] == "True" else None


def test_a_vgpu_pool_writes_its_config_beside_human_ones_and_verifies_the_vgpus(
    kube: Kube, operator: OperatorProcess
) -> None:
    _human_map(kube)
    node = "vgpu-cfg-0"
    fleet.create_from_manifests(kube, [_vgpu_node(node, "vgpu-cfg")])
    kube.create(NPG, _pool("vgpu-cfg", {"A100-20C": 2}))

    def labelled() -> str | None:
        return kube.get(path_of("v1", "nodes", node))["metadata"]["labels"].get(c.VGPU_CONFIG_LABEL)

    name = eventually(labelled, 60, "node labelled with the pool's vGPU config")
    configs = _configs(kube)
    assert configs[name] == [{"devices": "all", "vgpu-devices": {"A100-20C": 2}}]
    assert configs["default"] == HUMAN["vgpu-configs"]["default"]  # people's configs stay
    assert configs["A100-4C"] == HUMAN["vgpu-configs"]["A100-4C"]
    assert kube.get(path_of("v1", "nodes", node))["spec"].get("unschedulable") is True

    # The device manager: pending, then the sandbox device plugin's resources, then success.
    path = path_of("v1", "nodes", node)
    kube.patch(path, {"metadata": {"labels": {c.VGPU_CONFIG_STATE_LABEL: "pending"}}})
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/NVIDIA_A100-20C": "4"}
    kube.patch(path + "/status", {"status": {"allocatable": alloc, "capacity": alloc}})
    kube.patch(path, {"metadata": {"labels": {c.VGPU_CONFIG_STATE_LABEL: "success"}}})

    def ready() -> dict[str, Any] | None:
        obj = kube.get(f"{NPG}/vgpu-cfg")
        cond = condition(obj, "Ready")
        return obj if cond and cond["status"] == "True" else None

    obj = eventually(ready, 60, "vgpu-cfg Ready")
    assert obj["status"]["capacity"] == {"nvidia.com/NVIDIA_A100-20C": "4"}
    assert not kube.get(path)["spec"].get("unschedulable")


def test_a_type_the_board_lacks_is_refused_before_anything_is_written(
    kube: Kube, operator: OperatorProcess
) -> None:
    _human_map(kube)
    node = "vgpu-bad-0"
    fleet.create_from_manifests(kube, [_vgpu_node(node, "vgpu-bad")])
    kube.create(NPG, _pool("vgpu-bad", {"A100D-20C": 1}))  # an A100 80GB PCIe type

    cond = eventually(lambda: _stalled(kube, "vgpu-bad"), 60, "vgpu-bad Stalled")
    assert cond["reason"] == "InvalidGeometryForModel"
    for word in ("A100D-20C", "A100-PCIE-40GB", "the type must exist on the board"):
        assert word in cond["message"]
    configs = _configs(kube)
    assert not [k for k in configs if k.startswith("tessera-vgpu-bad-")]
    assert {"default", "A100-4C"} <= set(configs)
    got = kube.get(path_of("v1", "nodes", node))
    assert not got["spec"].get("unschedulable")
    assert c.VGPU_CONFIG_LABEL not in got["metadata"]["labels"]
