"""DeviceClasses Tessera owns for DRA pools, on the real API server and kube-scheduler.

A platform engineer applies a pool with ``allocation: DRA``, changes its geometry, adds
sharing policies (one the driver would refuse), meets a DeviceClass someone wrote by hand
under a name Tessera wants, deletes the pool — and a pod's ResourceClaim naming a Tessera
class is allocated by kube-scheduler. ``tessera run`` is the session's operator, under its
own ServiceAccount (config/rbac). What Tessera wrote is read back from the API server.

The pools' rollouts are paused: these tests are about classes, not MIG changes (no node is
cordoned, so kube-scheduler can place the pod). The ResourceSlices are written by the test
as the NVIDIA driver's kubelet plugin would publish them: the simulated DRA driver
(issue 16, item 6) is not on this branch yet.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from builders.dra import DeviceClassWrapper, ResourceSliceWrapper, dra_policy, dra_pool
from devcluster import fleet
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.domain import dra

from .conftest import OperatorProcess
from .dra_support import DraObjects, dra_objects, wait_absent
from .helpers import condition, eventually, namespace

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
SP = "/apis/tessera.io/v1alpha1/sharingpolicies"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
MANAGED = {"app.kubernetes.io/managed-by": "tessera"}
GUARD = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com']"
HALF_MIG = {"mig": {"layouts": [{"devices": "0-3", "profiles": {"1g.10gb": 7}}]}}
PAUSED = {"paused": True}
__all__ = ["dra_objects"]  # the fixture: pools and policies deleted, their classes gone


@pytest.fixture(scope="module", autouse=True)
def running(operator: OperatorProcess) -> Iterator[None]:
    yield


def klass(kube: Kube, name: str) -> Obj | None:
    return kube.get_or_none(f"{CLASSES}/{name}")


def ours(kube: Kube) -> dict[str, Obj]:
    found = kube.list(CLASSES, label_selector="app.kubernetes.io/managed-by=tessera")
    return {o["metadata"]["name"]: o for o in found}


def reason(kube: Kube, path: str, type_: str) -> str | None:
    found = condition(kube.get_or_none(path), type_)
    return found["reason"] if found and found["status"] == "True" else None


def message(kube: Kube, path: str, type_: str) -> str:
    return str((condition(kube.get_or_none(path), type_) or {}).get("message", ""))


def observed(kube: Kube, path: str) -> Obj | None:
    """The object once its status describes its current generation."""
    obj = kube.get_or_none(path)
    status = (obj or {}).get("status") or {}
    if obj and status.get("observedGeneration") == obj["metadata"]["generation"]:
        return obj
    return None


def expression(obj: Obj) -> str:
    return str(obj["spec"]["selectors"][0]["cel"]["expression"])


def mps_of(kube: Kube, name: str) -> dict[str, Any]:
    obj = klass(kube, name) or {}
    config = (obj.get("spec") or {}).get("config") or [{}]
    sharing = config[0].get("opaque", {}).get("parameters", {}).get("sharing", {})
    return dict(sharing.get("mpsConfig") or {})


def declared_by(kube: Kube, name: str) -> str | None:
    obj = klass(kube, name) or {}
    return (obj.get("metadata", {}).get("annotations") or {}).get("tessera.io/declared-by")


def publish(kube: Kube, built: ResourceSliceWrapper) -> None:
    """Stand-in for the driver's kubelet plugin: the node's slice of gpu.nvidia.com."""
    kube.create(SLICES, built.obj())


def pool_of(name: str, layout: dict[str, Any] | None = None, **gates: bool) -> dict[str, Any]:
    built = dra_pool(name, **gates).rollout(**PAUSED)
    return (built.layout(layout) if layout else built).obj()


def test_pool_classes_follow_the_geometry_and_count_published_devices(
    kube: Kube, dra_objects: DraObjects
) -> None:
    wait_absent(kube, "gpu.tessera.io", "mig-1g.10gb.tessera.io", "mig-2g.20gb.tessera.io")
    nodes = fleet.create_nodes(kube, fleet.pool("dra-a", "H100-80GB", 2))
    kube.create(NPG, pool_of(dra_objects.track(NPG, "dra-a"), HALF_MIG))
    path = f"{NPG}/dra-a"
    wanted = {"gpu.tessera.io", "mig-1g.10gb.tessera.io"}
    eventually(lambda: wanted <= set(ours(kube)), what="the pool's classes")
    gpu, mig = klass(kube, "gpu.tessera.io"), klass(kube, "mig-1g.10gb.tessera.io")
    assert gpu is not None and mig is not None
    assert expression(gpu) == f"{GUARD}.type == 'gpu'"
    assert expression(mig) == (
        f"{GUARD}.type == 'mig' && device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
    )
    assert "config" not in mig["spec"]
    for obj in (gpu, mig):
        assert obj["metadata"]["labels"] == MANAGED
        assert obj["metadata"]["annotations"]["tessera.io/declared-by"] == "NodePoolGeometry/dra-a"

    # no driver on the nodes yet: Reconciling, naming them
    eventually(lambda: reason(kube, path, "Reconciling") == "WaitingForDriver", what="waiting")
    assert all(n in message(kube, path, "Reconciling") for n in nodes)
    publish(kube, ResourceSliceWrapper(nodes[0]).gpu(4).mig(0, "1g.10gb").mig(0, "1g.10gb", 1))
    eventually(lambda: nodes[0] not in message(kube, path, "Reconciling"), what="one node left")
    publish(kube, ResourceSliceWrapper(nodes[1]).gpu(5))
    want = [
        {"name": "gpu.tessera.io", "selects": "gpu", "devices": 2},
        {"name": "mig-1g.10gb.tessera.io", "selects": "1g.10gb", "devices": 2},
    ]
    eventually(
        lambda: (kube.get(path).get("status") or {}).get("deviceClasses") == want,
        what="devices counted from the ResourceSlices",
    )
    assert reason(kube, path, "Reconciling") != "WaitingForDriver"

    # the geometry changes: every GPU MIG 2g.20gb — whole GPUs and 1g.10gb are no longer offered
    two = {"mig": {"layouts": [{"profiles": {"2g.20gb": 3}}]}}
    kube.patch(path, {"spec": two})
    eventually(
        lambda: set(ours(kube)) >= {"mig-2g.20gb.tessera.io"} and not wanted & set(ours(kube)),
        what="mig-2g.20gb.tessera.io created, the others deleted",
    )
    kube.delete(path)
    eventually(lambda: "mig-2g.20gb.tessera.io" not in ours(kube), what="classes gone")


def test_policy_the_driver_would_refuse_writes_nothing_until_its_gate_is_on(
    kube: Kube, dra_objects: DraObjects
) -> None:
    wait_absent(kube, "gpu.tessera.io")
    nodes = fleet.create_nodes(kube, fleet.pool("dra-b", "H100-80GB", 1))
    kube.create(NPG, pool_of(dra_objects.track(NPG, "dra-b")))  # whole GPUs
    mps = {"defaultActiveThreadPercentage": 40, "defaultPinnedDeviceMemoryLimit": "10Gi"}
    kube.create(SP, dra_policy(dra_objects.track(SP, "dra-mps"), "dra-b", "MPS", mps=mps).obj())
    path = f"{SP}/dra-mps"
    eventually(lambda: reason(kube, path, "Stalled") == "InvalidConfig", what="refused")
    text = message(kube, path, "Stalled")
    assert "spec.dra.mps" in text and "MPSSupport" in text, text
    assert not [n for n in ours(kube) if n.startswith("dra-mps.")]  # nothing written
    node = kube.get(path_of("v1", "nodes", nodes[0]))
    assert "nvidia.com/device-plugin.config" not in node["metadata"]["labels"]
    assert (kube.get(path).get("status") or {}).get("configKey", "") == ""

    kube.patch(f"{NPG}/dra-b", {"spec": {"dra": {"featureGates": {"mpsSupport": True}}}})
    eventually(lambda: klass(kube, "dra-mps.gpu.sharing.tessera.io"), what="the MPS class")
    eventually(lambda: reason(kube, path, "Stalled") is None, what="no longer refused")
    made = klass(kube, "dra-mps.gpu.sharing.tessera.io")
    assert made is not None
    assert expression(made) == f"{GUARD}.type == 'gpu'"
    assert made["spec"]["config"] == [
        {
            "opaque": {
                "driver": "gpu.nvidia.com",
                "parameters": {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "GpuConfig",
                    "sharing": {"strategy": "MPS", "mpsConfig": mps},
                },
            }
        }
    ]
    obj = eventually(lambda: observed(kube, path), what="policy status")
    assert obj["status"]["deviceClasses"] == ["dra-mps.gpu.sharing.tessera.io"]
    node = kube.get(path_of("v1", "nodes", nodes[0]))
    assert "nvidia.com/device-plugin.config" not in node["metadata"]["labels"]

    # converged: full passes (each spec change is one) write no DeviceClass
    before = {n: o["metadata"]["resourceVersion"] for n, o in ours(kube).items()}
    for priority in (1, 2, 3):
        kube.patch(path, {"spec": {"priority": priority}})
        eventually(lambda: observed(kube, path), what=f"pass of generation {priority + 1}")
    gates = {"mpsSupport": True, "timeSlicingSettings": True}
    kube.patch(f"{NPG}/dra-b", {"spec": {"dra": {"featureGates": gates}}})
    eventually(lambda: observed(kube, f"{NPG}/dra-b"), what="pool pass")
    after = {n: o["metadata"]["resourceVersion"] for n, o in ours(kube).items()}
    assert after == before

    # updates: a new config in place (same name), a second declarer of the shared class
    kube.patch(path, {"spec": {"dra": {"mps": {"defaultActiveThreadPercentage": 60}}}})
    eventually(
        lambda: (
            mps_of(kube, "dra-mps.gpu.sharing.tessera.io").get("defaultActiveThreadPercentage")
            == 60
        ),
        what="the class's config updated",
    )
    kube.create(NPG, pool_of(dra_objects.track(NPG, "dra-b2")))
    both = "NodePoolGeometry/dra-b,NodePoolGeometry/dra-b2"
    eventually(lambda: declared_by(kube, "gpu.tessera.io") == both, what="two declarers")
    kube.delete(f"{NPG}/dra-b2")
    eventually(
        lambda: declared_by(kube, "gpu.tessera.io") == "NodePoolGeometry/dra-b", what="one again"
    )

    kube.delete(path)
    eventually(lambda: klass(kube, "dra-mps.gpu.sharing.tessera.io") is None, what="class gone")
    assert klass(kube, "gpu.tessera.io") is not None  # still declared by the pool
    kube.delete(f"{NPG}/dra-b")


def test_hand_made_class_of_a_wanted_name_is_a_conflict_and_left_alone(
    kube: Kube, dra_objects: DraObjects
) -> None:
    wait_absent(kube, "mig-3g.40gb.tessera.io", "mig-1g.10gb.tessera.io")
    fleet.create_nodes(kube, fleet.pool("dra-c", "H100-80GB", 1))
    theirs = DeviceClassWrapper("mig-3g.40gb.tessera.io").selector(
        "device.driver == 'x.example.com'"
    )
    made = kube.create(CLASSES, theirs.obj())
    layout = {"mig": {"layouts": [{"profiles": {"3g.40gb": 1, "1g.10gb": 4}}]}}
    kube.create(NPG, pool_of(dra_objects.track(NPG, "dra-c"), layout))
    path = f"{NPG}/dra-c"
    eventually(lambda: reason(kube, path, "Stalled") == "Conflict", what="Conflict")
    assert "mig-3g.40gb.tessera.io" in message(kube, path, "Stalled")
    assert klass(kube, "mig-1g.10gb.tessera.io") is not None  # its other class is written
    kept = klass(kube, "mig-3g.40gb.tessera.io")
    assert kept is not None
    assert kept["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]

    kube.delete(path)
    eventually(lambda: kube.get_or_none(path) is None, what="pool deleted")
    eventually(lambda: klass(kube, "mig-1g.10gb.tessera.io") is None, what="its class deleted")
    kept = klass(kube, "mig-3g.40gb.tessera.io")
    assert (
        kept is not None
        and kept["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
    )
    kube.delete(f"{CLASSES}/mig-3g.40gb.tessera.io")


def test_kube_scheduler_allocates_a_claim_of_a_tessera_class(
    kube: Kube, dra_objects: DraObjects
) -> None:
    nodes = fleet.create_nodes(kube, fleet.pool("dra-d", "H100-80GB", 1))
    kube.create(
        NPG,
        pool_of(
            dra_objects.track(NPG, "dra-d"), {"mig": {"layouts": [{"profiles": {"1g.20gb": 4}}]}}
        ),
    )
    eventually(lambda: klass(kube, "mig-1g.20gb.tessera.io"), what="the class")
    # a whole GPU beside the MIG devices: it has no profile attribute, so only a selector that
    # reads type first lets kube-scheduler evaluate the class against it without an error
    slice_ = ResourceSliceWrapper(nodes[0]).gpu(0).mig(2, "1g.20gb").mig(2, "2g.20gb", 2)
    publish(kube, slice_)
    namespace(kube, "dra-work")
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "one-slice", "namespace": "dra-work"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "mig", "exactly": {"deviceClassName": "mig-1g.20gb.tessera.io"}}
                ]
            }
        },
    }
    kube.create(path_of("resource.k8s.io/v1", "resourceclaims", namespace="dra-work"), claim)
    # A bare pod, placed by kube-scheduler: the test is about one named claim's allocation
    # against the class, which the replicas of a Deployment would all share.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "worker", "namespace": "dra-work"},
        "spec": {
            "nodeSelector": {"tessera.io/pool": "dra-d"},
            "resourceClaims": [{"name": "mig", "resourceClaimName": "one-slice"}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "mig"}]}}],
        },
    }
    kube.create(path_of("v1", "pods", namespace="dra-work"), pod)
    claims = path_of("resource.k8s.io/v1", "resourceclaims", "one-slice", "dra-work")

    def allocated() -> list[Obj] | None:
        found = kube.get(claims).get("status") or {}
        return (found.get("allocation") or {}).get("devices", {}).get("results")

    results = eventually(allocated, 60, "the claim allocated by kube-scheduler")
    assert [(r["pool"], r["device"]) for r in results] == [(nodes[0], "gpu-2-mig-1g20gb-19-0")]
    bound = eventually(
        lambda: kube.get(path_of("v1", "pods", "worker", "dra-work"))["spec"].get("nodeName"),
        what="the pod bound",
    )
    assert bound == nodes[0]
    kube.delete(path_of("v1", "namespaces", "dra-work"))
    kube.delete(f"{NPG}/dra-d")


def test_a_field_the_api_server_drops_is_named_with_its_feature_gate(kube: Kube) -> None:
    """The comparison the controller makes after each write, against the real 1.34 server:
    an alpha field (extendedResourceName, gate DRAExtendedResource off) comes back missing."""
    sent = dra.DesiredClass("dropped-probe.tessera.io", "gpu", ("NodePoolGeometry/probe",))
    spec = {**sent.spec(), "extendedResourceName": "example.com/gpu"}
    stored = kube.create(CLASSES, {**sent.manifest(), "spec": spec})
    try:
        lost = dra.dropped(spec, stored.get("spec") or {})
        assert lost == ("spec.extendedResourceName",)
        assert "DRAExtendedResource" in dra.dropped_message(sent.name, lost)
        assert dra.dropped(sent.spec(), stored["spec"]) == ()  # what Tessera sends is kept
    finally:
        kube.delete(f"{CLASSES}/{sent.name}")


def test_a_class_deleted_by_hand_comes_back_though_its_pool_is_idle(
    kube: Kube, operator: OperatorProcess, dra_objects: DraObjects
) -> None:
    """A converged (here: Stalled NoNodes) pool's passes are skipped while their inputs stay
    the same; the DeviceClasses are among those inputs, so a hand deletion re-runs the pass."""
    wait_absent(kube, "mig-7g.80gb.tessera.io")
    kube.create(
        NPG,
        pool_of(
            dra_objects.track(NPG, "dra-e"), {"mig": {"layouts": [{"profiles": {"7g.80gb": 1}}]}}
        ),
    )
    path = f"{NPG}/dra-e"
    eventually(lambda: reason(kube, path, "Stalled") == "NoNodes", what="a pool with no node")
    eventually(lambda: klass(kube, "mig-7g.80gb.tessera.io"), what="its class")
    eventually(
        lambda: "nodepoolgeometry/dra-e: pass skipped" in operator.log(),
        60,
        "the idle pool's passes skipped",
    )
    kube.delete(f"{CLASSES}/mig-7g.80gb.tessera.io")
    eventually(lambda: klass(kube, "mig-7g.80gb.tessera.io"), 30, "the class written again")
    kube.delete(path)
    eventually(lambda: klass(kube, "mig-7g.80gb.tessera.io") is None, what="class gone")


def test_a_profile_the_nodes_model_lacks_writes_no_class(kube: Kube) -> None:
    """1g.5gb is an A100-40GB profile: on H100-80GB nodes the pool is refused, naming the
    layout and the model, and no class of it is written (nothing applied)."""
    fleet.create_nodes(kube, fleet.pool("dra-g", "H100-80GB", 1))
    kube.create(NPG, pool_of("dra-g", {"mig": {"layouts": [{"profiles": {"1g.5gb": 7}}]}}))
    path = f"{NPG}/dra-g"
    eventually(
        lambda: "spec.mig.layouts[0]" in message(kube, path, "Stalled"),
        what="the pool refused, naming its layout",
    )
    assert reason(kube, path, "Stalled") == "InvalidGeometryForModel"
    assert "H100-80GB" in message(kube, path, "Stalled")
    assert klass(kube, "mig-1g.5gb.tessera.io") is None
    assert not (kube.get(path).get("status") or {}).get("deviceClasses")
    kube.delete(path)
