"""Issue 16, item 3: a MIG rollout over a DRA pool, on the real control plane.

Two H100 nodes of a pool with ``allocation: DRA`` run the simulated MIG manager and the
simulated NVIDIA DRA driver (``devcluster.dradriver``: its kubelet-plugin DaemonSet, run by
the real DaemonSet controller and KWOK, publishes a node's ResourceSlice only when its pod
starts). A Deployment's replicas hold ResourceClaims from a template naming Tessera's
DeviceClass of one MIG profile (``mig-1g.10gb.tessera.io``, written by the operator from the
pool); kube-scheduler allocates each to a device of exactly that profile on a node of the
pool. A platform engineer changes the pool's geometry; an outside ``Ledger`` watches Nodes
and Pods throughout:

* the nodes are drained one at a time (never more than ``maxUnavailable`` held), the
  replicas holding the nodes' GPUs through claims evicted and placed again by the scheduler;
* each node's plugin pod is restarted once its MIG manager reported success, and the
  node's slice then lists the new profiles, which is what verifies it;
* the pool ends Ready and releases every node; new claims land on the new profile, and no
  claim is left allocated on a device no slice lists any more.

A node whose plugin cannot come back (its DaemonSet left the node as the change came in) is
Failed once ``verifyTimeout`` passes, the pool names it with the devices expected and
published, and ``onFailure: Hold`` keeps it out of scheduling. A node whose driver is absent
before it starts is never started (``test_dra_driver_absent``).
"""

from __future__ import annotations

from typing import Any

import pytest

from builders import DeploymentWrapper, custom
from devcluster import dradriver, fleet
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c

from . import story_support as story
from .conftest import OperatorProcess
from .dra_support import NPG, DraObjects, dra_objects, driver
from .faults import agents, assert_released, events, npg, pool_spec, wait_ready
from .helpers import condition, eventually, namespace, wait_running
from .rollout_ledger import Ledger

__all__ = ["agents", "dra_objects", "driver"]  # fixtures: simulated GPU agents; pools deleted after
pytestmark = pytest.mark.integration
RESOURCE = "resource.k8s.io/v1"
ONE_G = {"mig": {"layouts": [{"profiles": {"1g.10gb": 7}}]}}
MIXED = {"mig": {"layouts": [{"profiles": {"1g.10gb": 3, "2g.20gb": 2}}]}}
# Tessera's classes for the two profiles (docs/dra.md), written by the operator from the pool.
CLASSES = {"1g.10gb": "mig-1g.10gb.tessera.io", "2g.20gb": "mig-2g.20gb.tessera.io"}


def tessera_class(kube: Kube, profile: str) -> Obj:
    """Tessera's class for ``profile``, once the operator wrote it (a pool declares it)."""
    name = CLASSES[profile]
    found = eventually(
        lambda: kube.get_or_none(path_of(RESOURCE, "deviceclasses", name)), 60, f"class {name}"
    )
    assert found["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "tessera", found
    return found


def dra_spec(pool: str, layout: dict[str, Any], **rollout: Any) -> dict[str, Any]:
    return {**pool_spec(pool, layout, **rollout), "allocation": "DRA"}


def published(kube: Kube, node: str) -> dict[str, int]:
    """The node's slice: devices by ``gpu`` or MIG profile."""
    found = kube.get_or_none(path_of(RESOURCE, "resourceslices", dradriver.slice_name(node)))
    out: dict[str, int] = {}
    for device in (found or {}).get("spec", {}).get("devices") or []:
        attrs = device["attributes"]
        kind = attrs["type"]["string"]
        key = attrs["profile"]["string"] if kind == "mig" else kind
        out[key] = out.get(key, 0) + 1
    return out


def device_names(kube: Kube, node: str) -> set[str]:
    found = kube.get(path_of(RESOURCE, "resourceslices", dradriver.slice_name(node)))
    return {d["name"] for d in found["spec"]["devices"]}


def plugin_uid(kube: Kube, node: str) -> str:
    return str(dradriver.plugin_pod(kube, node)["metadata"]["uid"])


def claimed(kube: Kube, ns: str, app: str, class_: str) -> None:
    """ResourceClaimTemplate ``app``: one device of ``class_``."""
    template = {
        "metadata": {"name": app},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "mig", "exactly": {"deviceClassName": class_}}]}
            }
        },
    }
    kube.create(path_of(RESOURCE, "resourceclaimtemplates", namespace=ns), template)


def deploy(kube: Kube, ns: str, app: str, pool: str, replicas: int, class_: str) -> list[Obj]:
    """Deployment ``app``: ``replicas`` on the pool, each holding a claim of ``class_``."""
    claimed(kube, ns, app, class_)
    manifest = DeploymentWrapper(app).replicas(replicas).pool(pool).obj()
    pod = manifest["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": "mig", "resourceClaimTemplateName": app}]
    pod["containers"][0]["resources"]["claims"] = [{"name": "mig"}]
    kube.create(path_of("apps/v1", "deployments", namespace=ns), manifest)
    return wait_running(kube, ns, app, replicas, 90)


def allocations(kube: Kube, ns: str) -> list[tuple[str, str, str]]:
    """(pool, device, claim) of every allocated claim in ``ns``."""
    out = []
    for claim in kube.list(path_of(RESOURCE, "resourceclaims", namespace=ns)):
        alloc = (claim.get("status") or {}).get("allocation") or {}
        for r in (alloc.get("devices") or {}).get("results") or []:
            out.append((r["pool"], r["device"], claim["metadata"]["name"]))
    return out


def restarts(kube: Kube, node: str) -> list[str]:
    """The node's Events of a kubelet-plugin restart (one per layout applied)."""
    found = [e["message"] for e in events(kube, node, "DeletePod")]
    return [m for m in found if "restart kubelet-plugin pod" in m]


def profile_of(kube: Kube, node: str, device: str) -> str:
    found = kube.get(path_of(RESOURCE, "resourceslices", dradriver.slice_name(node)))
    (dev,) = [d for d in found["spec"]["devices"] if d["name"] == device]
    return str(dev["attributes"]["profile"]["string"])


def test_a_geometry_change_rolls_a_dra_pool_node_by_node_and_verifies_it_from_its_slices(
    kube: Kube, operator: OperatorProcess, driver: dradriver.DraDriver, dra_objects: DraObjects
) -> None:
    pool, ns = "dra-roll", "dra-roll-ns"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 2, devices=1, dra=True))
    kube.create(
        NPG,
        custom(
            "NodePoolGeometry",
            dra_objects.track(NPG, pool),
            dra_spec(pool, ONE_G, maxUnavailable=1),
        ),
    )
    wait_ready(kube, pool, 180, "1g.10gb layout on the DRA pool")
    for name in names:
        assert published(kube, name) == {"1g.10gb": 7}, name
    tessera_class(kube, "1g.10gb")  # the operator's class, the one the template names
    namespace(kube, ns)
    before = deploy(kube, ns, "infer", pool, 3, CLASSES["1g.10gb"])
    first = eventually(lambda: len(allocations(kube, ns)) == 3 and allocations(kube, ns), 60)
    for node, device, claim in first:  # exactly the class's profile, on a node of the pool
        assert node in names and profile_of(kube, node, device) == "1g.10gb", (node, device, claim)
    plugins = {name: plugin_uid(kube, name) for name in names}
    restarted = {name: len(eventually(lambda n=name: restarts(kube, n), 30)) for name in names}

    with Ledger(kube, pool, ns) as ledger:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": MIXED})
        wait_ready(kube, pool, 300, "the mixed layout rolled over the DRA pool")
        after = wait_running(kube, ns, "infer", 3, 90)
    assert 0 < ledger.worst <= 1, ledger.worst
    story.assert_replaced(ledger.evicted, before, after)  # claims made them GPU pods: evicted
    assert_released(kube, pool)
    obj = npg(kube, pool)
    assert obj is not None and obj["status"]["nodes"]["updated"] == 2, obj["status"]
    devices = {"mig-1g.10gb.tessera.io": "6", "mig-2g.20gb.tessera.io": "4"}  # by DeviceClass
    assert obj["status"]["capacity"] == devices, obj["status"]
    for name in names:
        assert published(kube, name) == {"1g.10gb": 3, "2g.20gb": 2}, name
        assert plugin_uid(kube, name) != plugins[name], f"{name}'s plugin was not restarted"
        deleted = eventually(
            lambda n=name: len(restarts(kube, n)) > restarted[n] and restarts(kube, n),
            30,
            f"the Event of {name}'s restart",
        )
        assert len(deleted) == restarted[name] + 1, deleted  # once per layout

    # New claims land on the new profile, and nothing is allocated on a device gone.
    tessera_class(kube, "2g.20gb")  # written when the geometry declared the profile
    deploy(kube, ns, "infer-2g", pool, 2, CLASSES["2g.20gb"])

    # The evicted replicas' claims go with their pods (kube-controller-manager deletes them).
    def five() -> list[tuple[str, str, str]] | None:
        found = allocations(kube, ns)
        return found if len(found) == 5 else None

    held = eventually(five, 60, "the claims of the five replicas alone")
    for node, device, claim in held:
        assert node in names and device in device_names(kube, node), (node, device, claim)
    want = {"infer-2g-": "2g.20gb", "infer-": "1g.10gb"}  # each claim: its class's profile
    for node, device, claim in held:
        profile = next(p for prefix, p in want.items() if claim.startswith(prefix))
        assert profile_of(kube, node, device) == profile, (node, device, claim)
    assert len([c for _, _, c in held if c.startswith("infer-2g-")]) == 2, held


def test_a_node_whose_plugin_cannot_restart_fails_and_is_held_naming_what_it_lacks(
    kube: Kube, operator: OperatorProcess, driver: dradriver.DraDriver, dra_objects: DraObjects
) -> None:
    pool = "dra-stuck"
    (name,) = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1, devices=1, dra=True))
    spec = dra_spec(pool, ONE_G, verifyTimeout="30s", onFailure="Hold")
    kube.create(NPG, custom("NodePoolGeometry", dra_objects.track(NPG, pool), spec))
    wait_ready(kube, pool, 180, "1g.10gb layout")
    # The DaemonSet no longer runs on the node (its label gone): no plugin pod comes back. The
    # change comes in at once, while its slice is still there (the kubelet wipes the slices of
    # a plugin gone only after 30 s): the driver was there when the node was admitted.
    kube.patch(path_of("v1", "nodes", name), {"metadata": {"labels": {fleet.DRA_NODE_LABEL: None}}})
    eventually(
        lambda: (
            not [
                p
                for p in kube.list(path_of("v1", "pods", namespace=dradriver.NAMESPACE))
                if p["spec"].get("nodeName") == name and not p["metadata"].get("deletionTimestamp")
            ]
        ),
        60,
        f"no plugin pod on {name}",
    )
    kube.patch(f"{NPG}/{pool}", {"spec": MIXED})

    def failed() -> Obj | None:
        obj = npg(kube, pool)
        problems = ((obj or {}).get("status") or {}).get("problems") or []
        return next((p for p in problems if p.get("phase") == "Failed"), None)

    problem = eventually(failed, 180, f"{name} Failed")
    text = problem["message"]
    assert problem["node"] == name, problem
    assert (
        f"no ready kubelet-plugin pod of DaemonSet {dradriver.NAMESPACE}/{dradriver.DAEMONSET} on node {name}"
        in text
    )
    # what it publishes: the stale slice, or none once the kubelet's wiping delay passed
    assert "want {1g.10gb: 3, 2g.20gb: 2}" in text and "ResourceSlices of driver" in text, text
    node = kube.get(path_of("v1", "nodes", name))
    assert node["spec"].get("unschedulable") is True  # Hold: kept out of scheduling
    assert (node["metadata"].get("annotations") or {}).get(c.NODE_PHASE_ANNOTATION) == "Failed"
    stalled = condition(npg(kube, pool), "Ready")
    assert stalled is not None and stalled["status"] == "False", stalled

    # Deleted, the pool releases its failed node: the finalizer reads the node's DRA record
    # through the driver (it used to fail building a spec for it, and the pool never went).
    kube.delete(f"{NPG}/{pool}")
    eventually(lambda: npg(kube, pool) is None, 60, f"{pool} deleted")
    assert_released(kube, pool)
