"""Probe for issue 14: kube-scheduler places a Deployment's pods on a KWOK node, KWOK runs them.

Its own control plane with ``scheduling`` on (all default controllers, kube-scheduler, KWOK),
so the rest of the suite is untouched. The node is KWOK's (annotation ``kwok.x-k8s.io/node:
fake``); its GPUs are published the way Tessera's device simulators publish them, by a patch of
the node's status, once KWOK has made the node Ready. Every wait also checks that no component
died: a dead scheduler or KWOK fails the test naming it, with its log tail, instead of a hang.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

import pytest
import yaml

from builders import DeploymentWrapper
from devcluster import fleet, gpunode, watchdog, workloads
from devcluster.controlplane import ControlPlane, ControlPlaneError, find_binaries
from devcluster.fleet import publish_devices
from devcluster.scheduling import KWOK_ANNOTATION, Scheduling, find_kwok
from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .helpers import condition, eventually, namespace

T = TypeVar("T")
NODE = "kwok-gpu-1"
GPU = "nvidia.com/gpu"
LEASE_SECONDS = 8  # KWOK renews the node's Lease every 2 s
HEARTBEAT_MS = 2000  # and writes the node's status every 2 to 2.2 s


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    options = Scheduling(find_kwok(), lease_seconds=LEASE_SECONDS, node_heartbeat_ms=HEARTBEAT_MS)
    with ControlPlane(find_binaries(), scheduling=options) as plane:
        yield plane


@pytest.fixture(scope="module")
def kube(plane: ControlPlane) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(str(plane.kubeconfig))
    yield client
    client.close()


def until(plane: ControlPlane, probe: Callable[[], T | None], what: str, timeout: float = 120) -> T:
    """``eventually``, failing at once with the component's log when one of them has died."""

    def alive_and(probe_: Callable[[], T | None]) -> T | None:
        plane.check_alive()
        return probe_()

    return eventually(lambda: alive_and(probe), timeout, what)


def ready(obj: dict[str, Any] | None) -> bool:
    return (condition(obj, "Ready") or {}).get("status") == "True"


def timestamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def gpu_node(plane: ControlPlane, kube: Kube) -> dict[str, Any]:
    """A KWOK node that KWOK made Ready, then 8 GPUs published on it by a status patch."""
    kube.create(
        "/api/v1/nodes",
        {"metadata": {"name": NODE, "annotations": {KWOK_ANNOTATION: "fake"}}},
    )
    node = until(
        plane,
        lambda: [n for n in [kube.get(path_of("v1", "nodes", NODE))] if ready(n)],
        f"KWOK to make {NODE} Ready",
    )[0]
    publish_devices(kube, node, GPU, {GPU: 8})
    return kube.get(path_of("v1", "nodes", NODE))


def pods(kube: Kube, ns: str, app: str) -> list[dict[str, Any]]:
    return kube.list(path_of("v1", "pods", namespace=ns), label_selector=f"app={app}")


def available(kube: Kube, ns: str, name: str, replicas: int) -> bool:
    dep = kube.get(path_of("apps/v1", "deployments", name, ns))
    status = dep.get("status") or {}
    return status.get("availableReplicas") == replicas and ready_pods(kube, ns, name) == replicas


def ready_pods(kube: Kube, ns: str, app: str) -> int:
    return sum(
        1 for p in pods(kube, ns, app) if ready(p) and not p["metadata"].get("deletionTimestamp")
    )


def test_the_scheduler_places_a_deployment_on_the_kwok_node_and_kwok_runs_it(
    plane: ControlPlane, kube: Kube, gpu_node: dict[str, Any]
) -> None:
    namespace(kube, "serving")
    kube.create(
        path_of("apps/v1", "deployments", namespace="serving"),
        DeploymentWrapper("llm").replicas(2).limits({GPU: 1}).grace(5).obj(),
    )
    until(plane, lambda: available(kube, "serving", "llm", 2), "Deployment llm available 2/2")
    for pod in pods(kube, "serving", "llm"):
        assert pod["spec"]["nodeName"] == NODE  # bound by kube-scheduler: the template has none
        assert (condition(pod, "PodScheduled") or {}).get("status") == "True"
        assert pod["status"]["phase"] == "Running" and pod["status"].get("podIP")
    dep = kube.get(path_of("apps/v1", "deployments", "llm", "serving"))
    assert (condition(dep, "Available") or {}).get("status") == "True"

    # 2 of 8 GPUs used: a pod wanting 7 has nowhere to go, and the scheduler says why.
    kube.create(
        path_of("apps/v1", "deployments", namespace="serving"),
        DeploymentWrapper("big").limits({GPU: 7}).grace(5).obj(),
    )

    def unschedulable() -> str | None:
        for pod in pods(kube, "serving", "big"):
            cond = condition(pod, "PodScheduled") or {}
            if cond.get("reason") == "Unschedulable":
                return str(cond.get("message"))
        return None

    message = until(plane, unschedulable, "the 7-GPU pod reported Unschedulable")
    assert f"Insufficient {GPU}" in message, message
    assert all(not p["spec"].get("nodeName") for p in pods(kube, "serving", "big"))


def test_a_deleted_pod_terminates_for_its_grace_period_then_kwok_removes_it(
    plane: ControlPlane, kube: Kube, gpu_node: dict[str, Any]
) -> None:
    namespace(kube, "graceful")
    kube.create(
        path_of("apps/v1", "deployments", namespace="graceful"),
        DeploymentWrapper("web").limits({GPU: 1}).grace(5).obj(),
    )
    until(plane, lambda: available(kube, "graceful", "web", 1), "Deployment web available 1/1")
    victim = pods(kube, "graceful", "web")[0]["metadata"]["name"]
    terminating = kube.delete(path_of("v1", "pods", victim, "graceful"))  # the pod, Terminating
    assert terminating and terminating["metadata"]["deletionGracePeriodSeconds"] == 5
    deadline = timestamp(terminating["metadata"]["deletionTimestamp"])  # delete + grace period

    def gone() -> float | None:
        pod = kube.get_or_none(path_of("v1", "pods", victim, "graceful"))
        return time.time() if pod is None else None

    gone_at = until(plane, gone, f"KWOK to finish deleting {victim}")
    assert gone_at >= deadline, f"{victim} removed {deadline - gone_at:.1f}s before its grace ended"
    # The ReplicaSet's replacement is scheduled and Ready again.
    until(plane, lambda: available(kube, "graceful", "web", 1), "web's replacement available")


def test_kwok_renews_the_lease_and_keeps_the_allocatable_published_by_someone_else(
    plane: ControlPlane, kube: Kube, gpu_node: dict[str, Any]
) -> None:
    assert gpu_node["status"]["allocatable"][GPU] == "8"
    lease_path = path_of("coordination.k8s.io/v1", "leases", NODE, "kube-node-lease")
    renewals: set[str] = set()
    heartbeats: set[str] = set()

    def several_heartbeats() -> bool:
        renewals.add(kube.get(lease_path)["spec"]["renewTime"])
        node = kube.get(path_of("v1", "nodes", NODE))
        heartbeats.add(str((condition(node, "Ready") or {}).get("lastHeartbeatTime")))
        assert node["status"]["allocatable"].get(GPU) == "8", node["status"]["allocatable"]
        assert node["status"]["capacity"].get(GPU) == "8", node["status"]["capacity"]
        return len(renewals) >= 4 and len(heartbeats) >= 3

    until(plane, several_heartbeats, "4 Lease renewals and 3 node status heartbeats by KWOK")
    node = kube.get(path_of("v1", "nodes", NODE))
    assert ready(node)
    assert node["status"]["allocatable"][GPU] == "8"
    lease = kube.get(lease_path)
    assert lease["spec"]["holderIdentity"]  # KWOK's identity, not the node's name
    assert [o["name"] for o in lease["metadata"]["ownerReferences"]] == [NODE]
    assert lease["spec"]["leaseDurationSeconds"] == LEASE_SECONDS


# -- KWOK never overwrites what the device simulators publish ----------------------------------
H100 = "kwok-h100-0"
MIG_1G = "nvidia.com/mig-1g.10gb"
MIG_CONFIG = {  # GPUs 0-3 as 7x1g.10gb, GPUs 4-7 whole
    "version": "v1",
    "mig-configs": {
        "probe-half": [
            {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
            {"devices": [4, 5, 6, 7], "mig-enabled": False},
        ]
    },
}
PLUGIN_CONFIG = {
    "version": "v1",
    "sharing": {"timeSlicing": {"resources": [{"name": MIG_1G, "replicas": 2}]}},
}
PUBLISHED = {"nvidia.com/gpu": "4", MIG_1G: str(4 * 7 * 2)}  # 1g.10gb time-sliced twice
SIM_LABELS = {
    c.MIG_CONFIG_STATE_LABEL: "success",  # the MIG manager's
    c.GPU_REPLICAS_LABEL: "2",  # GFD's, after the config manager applied probe-ts
    c.GPU_SHARING_STRATEGY_LABEL: "time-slicing",
}


def _config_map(kube: Kube, name: str, data: dict[str, str]) -> None:
    body = {"metadata": {"name": name}, "data": data}
    kube.create(path_of("v1", "configmaps", namespace="gpu-operator"), body)


def _published(node: dict[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    status = node.get("status") or {}
    nvidia = {k: v for k, v in (status.get("allocatable") or {}).items() if k.startswith("nvidia")}
    return nvidia == PUBLISHED and all(labels.get(k) == v for k, v in SIM_LABELS.items())


def test_kwok_keeps_the_mig_resources_and_labels_the_gpu_simulators_published(
    plane: ControlPlane, kube: Kube
) -> None:
    """The simulated MIG manager, device-plugin config manager and GFD publish MIG resources
    and labels on a KWOK node; then they stop, and over several KWOK heartbeats and Lease
    renewals every version of the node the API server sends keeps them, unchanged."""
    namespace(kube, "gpu-operator")
    _config_map(
        kube, c.MIG_PARTED_CONFIGMAP_NAME, {c.MIG_PARTED_CONFIGMAP_KEY: yaml.safe_dump(MIG_CONFIG)}
    )
    _config_map(kube, c.DEVICE_PLUGIN_CONFIGMAP_NAME, {"probe-ts": yaml.safe_dump(PLUGIN_CONFIG)})
    fleet.create_nodes(kube, [fleet.NodeSpec(H100, "H100-80GB", 8, pool="kwok-probe")])
    agents = gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.1).start()
    try:
        wanted = {c.MIG_CONFIG_LABEL: "probe-half", c.DEVICE_PLUGIN_CONFIG_LABEL: "probe-ts"}
        kube.patch(path_of("v1", "nodes", H100), {"metadata": {"labels": wanted}})
        until(
            plane,
            lambda: _published(kube.get(path_of("v1", "nodes", H100))),
            "the simulators publishing 56 time-sliced 1g.10gb instances and their labels",
        )
    finally:
        agents.stop()  # from here on nothing would repair what KWOK overwrote
    published = kube.get(path_of("v1", "nodes", H100))
    versions: list[dict[str, Any]] = []
    informer = Informer(
        kube,
        "/api/v1/nodes",
        lambda kind, obj: versions.append(obj),
        name="kwok-probe-node",
        field_selector=f"metadata.name={H100}",
    )
    lease_path = path_of("coordination.k8s.io/v1", "leases", H100, "kube-node-lease")
    renewals: set[str] = set()

    def heartbeats() -> set[str]:
        return {str((condition(v, "Ready") or {}).get("lastHeartbeatTime")) for v in versions}

    def several() -> bool:
        renewals.add(kube.get(lease_path)["spec"]["renewTime"])
        return len(renewals) >= 4 and len(heartbeats()) >= 3

    informer.start()
    try:
        until(plane, several, "4 Lease renewals and 3 node status heartbeats by KWOK", 60)
    finally:
        informer.stop()
    assert len(heartbeats()) >= 3  # KWOK wrote the node's status while we watched
    for version in versions:
        rv = version["metadata"]["resourceVersion"]
        status = version["status"]
        assert status["allocatable"] == published["status"]["allocatable"], rv
        assert status["capacity"] == published["status"]["capacity"], rv
        assert version["metadata"]["labels"] == published["metadata"]["labels"], rv
        assert _published(version), rv


@pytest.mark.parametrize("component", ["kube-scheduler", "kwok"])
def test_a_component_that_dies_fails_the_wait_naming_it_with_its_log(component: str) -> None:
    """The suite's own mechanism: a plane's check registered in ``devcluster.watchdog`` (as the
    session's ``control_plane`` fixture registers its own) makes any ``eventually``, and the
    dev cluster's own waits (nodes Ready, a Deployment running), fail at once, naming the dead
    component with its log tail, long before their deadlines."""
    with ControlPlane(find_binaries(), scheduling=Scheduling(find_kwok())) as plane:
        alive = partial(plane.check_alive, "kube-scheduler", "kwok", "kube-controller-manager")
        with watchdog.watching(alive):
            os.killpg(plane.processes[component].pid, signal.SIGKILL)
            started = time.monotonic()
            with pytest.raises(
                ControlPlaneError, match=f"^{component} exited with -9; see "
            ) as err:
                eventually(lambda: None, 300, "something that never comes")
            kube = Kube.from_kubeconfig(str(plane.kubeconfig))
            node = fleet.pool("watched", "H100-80GB", 1)
            with pytest.raises(ControlPlaneError, match=f"^{component} exited with -9; see "):
                fleet.create_nodes(kube, node)  # KWOK would make it Ready
            with pytest.raises(ControlPlaneError, match=f"^{component} exited with -9; see "):
                workloads.wait_running(kube, 300)
            assert time.monotonic() - started < 60, "a wait ran towards its deadline"
        last_line = plane.log(component).read_text().splitlines()[-1]
        assert last_line in str(err.value)  # the tail of the component's own log
