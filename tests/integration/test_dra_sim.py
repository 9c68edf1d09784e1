"""The simulated NVIDIA DRA driver, played against the real scheduler and claim controller.

DRA nodes (``fleet.pool(..., dra=True)``) run the simulated MIG manager and, through the real
DaemonSet controller, the driver's kubelet-plugin pod, which KWOK runs; each plugin pod
publishes its node's ResourceSlice once, at start. A DeviceClass written here, a
ResourceClaimTemplate and a Deployment then go through kube-controller-manager's resourceclaim
controller (claims from the template) and kube-scheduler's DynamicResources plugin (allocation)
exactly as in a cluster: every claim on a device of the class's profile, every pod Running.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from builders.workloads import DeploymentWrapper
from devcluster import dradevices, dradriver, fleet, gpunode
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c

from .helpers import app_pods, eventually, namespace, running

pytestmark = pytest.mark.integration
NAMES = gpunode.Names(mig_name="sim-dra-test")  # not the ConfigMap Tessera writes
POOL = "dratest-h100"
NODES = [f"{POOL}-0", f"{POOL}-1"]
PLAIN = "dratest-plain-0"  # a device-plugin node: no plugin pod, no slice
LAYOUT = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}  # two 1g.10gb per GPU: four on a node
CLASS = "dratest-1g10gb"
NS = "dra-sim"
GUARDED = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
    " && device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
)
RESOURCE = "resource.k8s.io/v1"


@pytest.fixture(scope="module")
def dra(kube: Kube) -> Iterator[dradriver.DraDriver]:
    namespace(kube, NAMES.mig_namespace)
    configs = {"dratest": [{"devices": "all", "mig-enabled": True, "mig-devices": LAYOUT}]}
    text = yaml.safe_dump({"version": "v1", "mig-configs": configs})
    cm = {
        "metadata": {"name": NAMES.mig_name, "namespace": NAMES.mig_namespace},
        "data": {c.MIG_PARTED_CONFIGMAP_KEY: text},
    }
    kube.create(path_of("v1", "configmaps", namespace=NAMES.mig_namespace), cm)
    specs = [*fleet.pool(POOL, "H100-80GB", 2, devices=2, dra=True)]
    specs.append(fleet.NodeSpec(PLAIN, "H100-80GB", devices=2))
    fleet.create_nodes(kube, specs)
    agents = gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.2, names=NAMES).start()
    driver = dradriver.DraDriver(kube, names=NAMES).start()
    try:
        yield driver
    finally:
        driver.stop()
        agents.stop()
        for path in [
            *(path_of("v1", "nodes", n) for n in [*NODES, PLAIN]),
            path_of("v1", "configmaps", NAMES.mig_name, NAMES.mig_namespace),
            path_of(RESOURCE, "deviceclasses", CLASS),
        ]:
            kube.delete(path)


def _slice(kube: Kube, node: str) -> Obj | None:
    return kube.get_or_none(path_of(RESOURCE, "resourceslices", dradriver.slice_name(node)))


def _published(kube: Kube, node: str, generation: int) -> Obj:
    def probe() -> Obj | None:
        found = _slice(kube, node)
        return found if found and found["spec"]["pool"]["generation"] == generation else None

    return eventually(probe, timeout=60, what=f"{node}'s ResourceSlice at generation {generation}")


def _names(found: Obj) -> list[str]:
    return [d["name"] for d in found["spec"]["devices"]]


def _attr(device: Obj, name: str) -> Any:
    return next(iter(device["attributes"][name].values()))


def test_a_dra_node_gets_one_slice_of_whole_gpus_and_no_device_plugin_resources(
    kube: Kube, dra: dradriver.DraDriver
) -> None:
    for node in NODES:
        found = _published(kube, node, 1)
        spec = found["spec"]
        assert spec["driver"] == "gpu.nvidia.com" and spec["nodeName"] == node
        assert spec["pool"] == {"name": node, "generation": 1, "resourceSliceCount": 1}
        assert _names(found) == ["gpu-0", "gpu-1"]
        gpu = spec["devices"][0]
        assert _attr(gpu, "type") == "gpu"
        assert _attr(gpu, "productName") == "NVIDIA H100 80GB HBM3"
        assert _attr(gpu, "uuid").startswith("GPU-")
        assert "profile" not in gpu["attributes"]
        assert gpu["capacity"]["memory"]["value"] == "81562Mi"
        owner = found["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("Node", node)
        allocatable = kube.get(path_of("v1", "nodes", node))["status"]["allocatable"]
        assert not [k for k in allocatable if k.startswith("nvidia.com/")]
    assert _slice(kube, PLAIN) is None
    pods = kube.list(path_of("v1", "pods", namespace=dradriver.NAMESPACE))
    assert PLAIN not in {p["spec"].get("nodeName") for p in pods}


def test_a_mig_change_is_published_only_when_the_plugin_pod_restarts(
    kube: Kube, dra: dradriver.DraDriver
) -> None:
    node = NODES[0]
    _published(kube, node, 1)
    kube.patch(
        path_of("v1", "nodes", node), {"metadata": {"labels": {c.MIG_CONFIG_LABEL: "dratest"}}}
    )
    eventually(
        lambda: _label(kube, node, c.MIG_CONFIG_STATE_LABEL) == "success",
        what=f"the MIG manager's success on {node}",
    )
    stale = _slice(kube, node)
    assert stale is not None and _names(stale) == ["gpu-0", "gpu-1"]  # static MIG: no re-scan
    old = dradriver.plugin_pod(kube, node)
    kube.delete(path_of("v1", "pods", old["metadata"]["name"], dradriver.NAMESPACE))
    fresh = _published(kube, node, 2)
    new = dradriver.plugin_pod(kube, node)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert fresh["metadata"]["annotations"][dradriver.POD_ANNOTATION] == new["metadata"]["uid"]
    # H100-80GB: 3g at 4, 2g at 0, the two 1g at 2 and 3 (the MIG manager's placement)
    per_gpu = ["mig-3g40gb-9-4", "mig-2g20gb-14-0", "mig-1g10gb-19-2", "mig-1g10gb-19-3"]
    expected = sorted(f"gpu-{m}-{d}" for m in (0, 1) for d in per_gpu)
    assert sorted(_names(fresh)) == expected
    mig = next(d for d in fresh["spec"]["devices"] if d["name"] == "gpu-1-mig-1g10gb-19-2")
    assert _attr(mig, "type") == "mig" and _attr(mig, "profile") == "1g.10gb"
    whole = {_attr(d, "uuid") for d in stale["spec"]["devices"]}
    assert _attr(mig, "parentUUID") in whole
    assert mig["capacity"]["memorySlice2"]["value"] == "1"
    assert _published(kube, NODES[1], 1)  # the other node's plugin was not restarted


def _label(kube: Kube, node: str, key: str) -> str | None:
    labels = kube.get(path_of("v1", "nodes", node))["metadata"].get("labels") or {}
    return labels.get(key)


def test_claims_from_a_template_land_on_devices_of_the_class_profile(
    kube: Kube, dra: dradriver.DraDriver
) -> None:
    _published(kube, NODES[0], 2)  # after the MIG change: four 1g.10gb on node 0, none on 1
    namespace(kube, NS)
    device_class = {
        "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": GUARDED}}]},
    }
    kube.create(path_of(RESOURCE, "deviceclasses"), device_class)
    template = {
        "metadata": {"name": "one-1g10gb"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "mig", "exactly": {"deviceClassName": CLASS}}]}
            }
        },
    }
    kube.create(path_of(RESOURCE, "resourceclaimtemplates", namespace=NS), template)
    manifest = DeploymentWrapper("infer").replicas(5).pool(POOL).obj()
    pod = manifest["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": "mig", "resourceClaimTemplateName": "one-1g10gb"}]
    pod["containers"][0]["resources"]["claims"] = [{"name": "mig"}]
    kube.create(path_of("apps/v1", "deployments", namespace=NS), manifest)

    def four_run() -> list[Obj] | None:
        pods = app_pods(kube, NS, "infer")
        up = [p for p in pods if running(p)]
        return up if len(pods) == 5 and len(up) == 4 else None

    up = eventually(four_run, timeout=90, what="4 of 5 replicas Running (4 devices of 1g.10gb)")
    devices = {_allocated(kube, p) for p in up}
    assert len(devices) == 4  # one device per claim
    for node, device in devices:
        assert node == NODES[0]
        published = {d["name"]: d for d in (_slice(kube, node) or {})["spec"]["devices"]}
        assert _attr(published[device], "profile") == "1g.10gb"
    pending = [p for p in app_pods(kube, NS, "infer") if not running(p)]
    assert len(pending) == 1 and not pending[0]["spec"].get("nodeName")  # whole GPUs not taken

    # Deleting a replica frees its claim: KWOK ends the pod, the claim controller deletes the
    # claim, and the replica that waited gets the device.
    gone = up[0]
    claim = _claim_name(gone)
    kube.delete(path_of("v1", "pods", gone["metadata"]["name"], NS))
    eventually(
        lambda: kube.get_or_none(path_of(RESOURCE, "resourceclaims", claim, NS)) is None,
        timeout=60,
        what=f"claim {claim} deleted with its pod",
    )
    eventually(four_run, timeout=90, what="4 replicas Running again")


def _claim_name(pod: Obj) -> str:
    statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    name: str = statuses[0]["resourceClaimName"]
    return name


def _allocated(kube: Kube, pod: Obj) -> tuple[str, str]:
    """(node, device) of the pod's claim; the pod runs on that node."""
    claim = kube.get(path_of(RESOURCE, "resourceclaims", _claim_name(pod), NS))
    result = claim["status"]["allocation"]["devices"]["results"][0]
    assert result["driver"] == dradevices.DRIVER
    assert pod["spec"]["nodeName"] == result["pool"]
    reserved = {r["uid"] for r in claim["status"].get("reservedFor") or []}
    assert pod["metadata"]["uid"] in reserved
    return str(result["pool"]), str(result["device"])


def test_deleting_a_dra_node_deletes_its_slice(kube: Kube, dra: dradriver.DraDriver) -> None:
    node = NODES[1]
    _published(kube, node, 1)
    kube.delete(path_of("v1", "nodes", node))
    eventually(lambda: _slice(kube, node) is None, timeout=60, what=f"{node}'s slice deleted")
