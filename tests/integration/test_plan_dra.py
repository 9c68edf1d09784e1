"""``tessera plan`` for a DRA pool against the real API server: the DeviceClasses it would
create, the ResourceSlice devices per class the pool's nodes would offer, a class name someone
else owns, and a reader that may not list DeviceClasses (an error, never "no changes")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from builders import LAYOUT_B
from builders.dra import DeviceClassWrapper, ResourceSliceWrapper, dra_pool
from devcluster import fleet, identity
from tessera.adapters.kube import Kube

from .conftest import Kubectl
from .dra_support import wait_absent
from .test_plan import plan

POOL = "plan-dra"
MIG1 = "mig-1g.10gb.tessera.io"
RESOURCE = "/apis/resource.k8s.io/v1"
READER = identity.Account("plan-dra-reader", "reader")


def _manifest(tmp_path: Path, layout: dict[str, Any]) -> Path:
    path = tmp_path / f"pool-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(dra_pool(POOL).layout(layout).obj()))
    return path


def _published_elsewhere(kube: Kube, profile: str) -> int:
    """The observer: MIG devices of ``profile`` in the driver's slices of nodes not in POOL."""
    return sum(
        1
        for item in kube.list(f"{RESOURCE}/resourceslices")
        if item["spec"]["driver"] == "gpu.nvidia.com"
        and not str(item["spec"].get("nodeName", "")).startswith(f"{POOL}-")
        for device in item["spec"].get("devices") or []
        if device.get("attributes", {}).get("profile", {}).get("string") == profile
    )


def test_plan_lists_class_creates_and_the_devices_per_pool(
    kube: Kube, kubectl: Kubectl, tmp_path: Path
) -> None:
    wait_absent(kube, MIG1)  # "create": no other test's pool holds the class
    fleet.create_nodes(kube, fleet.pool(POOL, "H100-80GB", 2, 8), wait=False)
    code, doc, text = plan(kubectl.plane.kubeconfig, _manifest(tmp_path, dict(LAYOUT_B)))
    assert code == 2, text
    assert [(c["action"], c["name"]) for c in doc["device_classes"]] == [("create", MIG1)]
    assert f"+ create {MIG1} (MIG 1g.10gb, exclusive; declared by NodePoolGeometry/{POOL})" in text
    # 2 nodes x 8 H100 x 7 slices of 1g.10gb, nothing published yet
    assert f"{MIG1}: 0 -> 112 devices on 2 node(s)" in text, text
    pool = next(o for o in doc["objects"] if o["name"] == POOL)
    assert pool["devices"] == {MIG1: [0, 112]}
    # Classes are cluster-wide: the quota capacity also counts what other tests' nodes publish.
    assert doc["capacity"][f"{MIG1}.deviceclass.resource.k8s.io/devices"] == {
        "before": 0,
        "after": 112 + _published_elsewhere(kube, "1g.10gb"),
    }

    # What one node's driver already publishes is the "now" side, read from its slice.
    slice_ = ResourceSliceWrapper(f"{POOL}-0").mig(0, "1g.10gb").mig(0, "1g.10gb", 1).obj()
    kube.create(f"{RESOURCE}/resourceslices", slice_)
    try:
        code, doc, text = plan(kubectl.plane.kubeconfig, _manifest(tmp_path, dict(LAYOUT_B)))
        assert code == 2 and f"{MIG1}: 2 -> 112 devices on 2 node(s)" in text, text
    finally:
        kube.delete(f"{RESOURCE}/resourceslices/{slice_['metadata']['name']}")

    # A class of that name someone else made: Tessera would never touch it, the plan fails.
    kube.create(f"{RESOURCE}/deviceclasses", DeviceClassWrapper(MIG1).obj())
    try:
        code, _, text = plan(kubectl.plane.kubeconfig, _manifest(tmp_path, dict(LAYOUT_B)))
        assert code == 1, text
        assert f"DeviceClass {MIG1} exists and is not Tessera's" in text
        assert f"NodePoolGeometry/{POOL} would be Stalled, reason Conflict" in text
    finally:
        kube.delete(f"{RESOURCE}/deviceclasses/{MIG1}")


def test_a_reader_that_may_not_list_deviceclasses_gets_an_error(
    kube: Kube, kubectl: Kubectl, tmp_path: Path
) -> None:
    """Everything plan reads but DeviceClasses: the plan cannot say which classes it
    creates, so it exits 1 naming them instead of printing a plan without them."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "plan-dra-reader"},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["nodes", "pods", "namespaces", "resourcequotas", "configmaps"],
                "verbs": ["get", "list"],
            },
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list"]},
            {"apiGroups": ["tessera.io"], "resources": ["*"], "verbs": ["list"]},
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["list"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "plan-dra-reader"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": READER.name, "namespace": READER.namespace}
        ],
    }
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": READER.name}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": READER.namespace}}
    kubectl.ok("apply", "-f", "-", stdin=yaml.safe_dump_all([namespace, role, binding]))
    kubectl.ok("apply", "-n", READER.namespace, "-f", "-", stdin=yaml.safe_dump(account))
    config = identity.kubeconfig(
        kube, identity.token(kube, READER), READER.name, tmp_path / "reader.kubeconfig"
    )
    code, _, text = plan(config, _manifest(tmp_path, dict(LAYOUT_B)))
    assert code == 1, text
    assert "deviceclasses" in text and "forbidden" in text.lower(), text
