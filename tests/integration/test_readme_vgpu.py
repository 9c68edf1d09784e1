"""docs/examples.md's "vGPU pools" section (linked from the README), played on the real control
plane.

A platform engineer copies the section: the ``kubectl label`` line from the console block, run
as printed on two vGPU nodes (A100 80GB PCIe boards, named as on the page, the GPU Operator's
deploy labels already there), then the NodePoolGeometry block applied verbatim with kubectl.
The simulated vGPU Device Manager and sandbox device plugin (``devcluster.vgpunode``, their
own board table) play the nodes. The section's KubeVirt blocks cannot be applied here (no
KubeVirt), so they are checked against what the nodes do advertise: the permitted mdev name and
resource, and the VM's ``deviceName``, are exactly the resource of the pool's type; a
virt-launcher-like pod asking for it is placed by kube-scheduler on the pool. The Helm line
names the ConfigMap Tessera writes.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest
import yaml

from devcluster import fleet, vgpufleet
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import ROOT, Kubectl, OperatorProcess
from .faults import NPG, assert_released, npg, wait_ready
from .helpers import eventually, namespace, wait_running
from .vgpu_support import BOARD, advertised, vgpu_agents

__all__ = ["vgpu_agents"]  # fixture: the simulated vGPU stack
pytestmark = pytest.mark.integration
NS = "readme-vgpu"


def section() -> str:
    text = (ROOT / "docs" / "examples.md").read_text()
    return text.split("\n## vGPU pools\n", 1)[1].split("\n## ", 1)[0]


def yaml_blocks() -> list[list[dict[str, Any]]]:
    return [
        [d for d in yaml.safe_load_all(b) if d]
        for b in re.findall(r"```yaml\n(.*?)```", section(), re.S)
    ]


def console_commands() -> list[list[str]]:
    """The console block's commands, continuation lines joined, as argv lists."""
    (block,) = re.findall(r"```console\n(.*?)```", section(), re.S)
    joined = block.replace("\\\n", " ")
    return [shlex.split(line[2:]) for line in joined.splitlines() if line.startswith("$ ")]


def test_the_readme_pool_gives_vms_the_resource_kubevirt_is_told_to_permit(
    kube: Kube, kubectl: Kubectl, operator: OperatorProcess, vgpu_agents: None
) -> None:
    (pool_obj,), (kubevirt, vm) = yaml_blocks()
    assert (pool_obj["kind"], kubevirt["kind"], vm["kind"]) == (
        "NodePoolGeometry",
        "KubeVirt",
        "VirtualMachine",
    )
    helm, label = console_commands()
    assert f"vgpuDeviceManager.config.name={c.VGPU_CONFIGMAP_NAME}" in helm, helm
    assert label[:3] == ["kubectl", "label", "node"], label
    nodes = [a for a in label[3:] if "=" not in a]
    gpus = int(dict(a.split("=", 1) for a in label[3:] if "=" in a)[c.GPU_COUNT_LABEL])
    specs = [vgpufleet.node_spec(n, BOARD, gpus=gpus) for n in nodes]
    manifests = [vgpufleet.node_manifest(s) for s in specs]
    for manifest in manifests:  # the GPU Operator's deploy labels only: the rest is the page's
        for key in (c.GPU_WORKLOAD_CONFIG_LABEL, c.GPU_PRODUCT_LABEL, c.GPU_COUNT_LABEL):
            del manifest["metadata"]["labels"][key]
    fleet.create_from_manifests(kube, manifests)
    kubectl.ok(*label[1:])  # as printed, after "kubectl"
    pool = pool_obj["metadata"]["name"]
    kubectl.ok("apply", "-f", "-", stdin=yaml.safe_dump(pool_obj))
    wait_ready(kube, pool, 240, "the vGPU pool of docs/examples.md")
    ((vgpu_type, per_gpu),) = pool_obj["spec"]["vgpu"]["layouts"][0]["types"].items()
    resource = vgpufleet.resource(vgpu_type)
    for name in nodes:
        assert advertised(kube, name) == {resource: str(gpus * per_gpu)}, name
    (permitted,) = kubevirt["spec"]["configuration"]["permittedHostDevices"]["mediatedDevices"]
    assert permitted["mdevNameSelector"] == f"NVIDIA {vgpu_type}", permitted
    assert permitted["resourceName"] == resource and permitted["externalResourceProvider"]
    (gpu,) = vm["spec"]["template"]["spec"]["domain"]["devices"]["gpus"]
    assert gpu["deviceName"] == resource, gpu

    namespace(kube, NS)  # what KubeVirt runs for the VM: its virt-launcher pod
    on_pool = pool_obj["spec"]["nodeSelector"]["matchLabels"]
    vgpufleet.deploy_vms(kube, NS, vgpufleet.vms("desktop", vgpu_type, 2, on_pool))
    pods = wait_running(kube, NS, "desktop", 2, 90)
    assert {p["spec"]["nodeName"] for p in pods} <= set(nodes)

    # "A later change of types rolls node by node": the VMs' virt-launcher pods (emptyDir
    # volumes, as every one has) are evicted and come back on the new layout.
    half = {"vgpu": {"layouts": [{"devices": "all", "types": {vgpu_type: per_gpu // 2}}]}}
    kubectl.ok("patch", "nodepoolgeometry", pool, "--type=merge", "-p", json.dumps({"spec": half}))
    wait_ready(kube, pool, 240, "the vGPU pool of docs/examples.md after a change of counts")
    for name in nodes:
        assert advertised(kube, name) == {resource: str(gpus * (per_gpu // 2))}, name
    moved = wait_running(kube, NS, "desktop", 2, 90)
    assert {p["metadata"]["uid"] for p in moved}.isdisjoint(p["metadata"]["uid"] for p in pods)
    kube.delete(path_of("v1", "namespaces", NS))  # its pods would hold the nodes' vGPUs
    kube.delete(f"{NPG}/{pool}")
    eventually(lambda: npg(kube, pool) is None, 60, f"{pool} deleted")
    assert_released(kube, on_pool[c.POOL_LABEL])
