"""The simulated kubelet's PodResources endpoint, against the real scheduler and KWOK.

Pods of a Deployment asking ``nvidia.com/gpu`` are placed by kube-scheduler and run by KWOK;
the simulated device manager (``podresources``) gives each bound pod its own device IDs, which
a gRPC ``List`` on the node's socket returns and the node's fake ``nvidia-smi -L`` maps to GPUs.
The simulated MIG manager then refuses to repartition a GPU a pod holds — the independent check
that Tessera evicted the right pods (issue 28) — and leaves the GPUs it does not touch, and the
pods on them, as they were.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import podresources as client
from builders.workloads import DeploymentWrapper
from devcluster import fleet, gpunode
from devcluster.podresources import PodResourcesSim
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

from .helpers import app_pods, eventually, namespace, wait_running

pytestmark = pytest.mark.integration
NAMES = gpunode.Names(mig_name="sim-podresources-test")  # not the ConfigMap Tessera writes
POOL = "podres-h100"
NODES = [f"{POOL}-0", f"{POOL}-1"]
NS = "podres-sim"
WHOLE: dict[str, Any] = {"mig-enabled": False}
SEVEN: dict[str, Any] = {"mig-enabled": True, "mig-devices": {"7g.80gb": 1}}
CONFIGS = {
    "first-two": [{"devices": [0, 1], **SEVEN}, {"devices": [2, 3], **WHOLE}],
    "first-two-again": [{"devices": [0, 1], **SEVEN}, {"devices": [2, 3], **WHOLE}],
    "last-two": [{"devices": [0, 1], **WHOLE}, {"devices": [2, 3], **SEVEN}],
}
SMI_GPU = re.compile(r"^GPU (\d+): .* \(UUID: (GPU-[0-9a-f-]+)\)$")
SMI_MIG = re.compile(r"^  MIG \S+ +Device +\d+: \(UUID: (MIG-[0-9a-f-]+)\)$")


@pytest.fixture(scope="module")
def sim(kube: Kube) -> Iterator[PodResourcesSim]:
    namespace(kube, NAMES.mig_namespace)
    namespace(kube, NS)
    text = yaml.safe_dump({"version": "v1", "mig-configs": CONFIGS})
    cm = {
        "metadata": {"name": NAMES.mig_name, "namespace": NAMES.mig_namespace},
        "data": {c.MIG_PARTED_CONFIGMAP_KEY: text},
    }
    kube.create(path_of("v1", "configmaps", namespace=NAMES.mig_namespace), cm)
    fleet.create_nodes(kube, fleet.pool(POOL, "H100-80GB", 2, devices=4))
    workdir = Path(tempfile.mkdtemp(prefix="podres-"))  # unix socket paths hold 107 bytes
    podresources = PodResourcesSim(kube, workdir).start()
    agents = gpunode.GpuNodeAgents(
        kube, reconfigure_seconds=0.2, names=NAMES, podresources=podresources
    ).start()
    try:
        eventually(lambda: set(NODES) <= set(podresources.served()), what="both endpoints up")
        yield podresources
    finally:
        agents.stop()
        podresources.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        for path in [
            *(path_of("v1", "nodes", n) for n in NODES),
            path_of("v1", "configmaps", NAMES.mig_name, NAMES.mig_namespace),
            path_of("v1", "namespaces", NS),
        ]:
            try:
                kube.delete(path)
            except ApiError as err:
                if not err.not_found:
                    raise


def nvidia_smi(sim: PodResourcesSim, node: str) -> tuple[dict[str, int], list[str]]:
    """``nvidia-smi -L`` of the node: GPU UUID -> index, and the MIG UUIDs."""
    out = subprocess.run(
        [str(sim.nvidia_smi(node)), "-L"], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    gpus = {m.group(2): int(m.group(1)) for line in out if (m := SMI_GPU.match(line))}
    return gpus, [m.group(1) for line in out if (m := SMI_MIG.match(line))]


def held(sim: PodResourcesSim, node: str, app: str) -> dict[str, list[str]]:
    """``List`` on the node's socket: ``namespace/name`` -> device IDs, of ``app``'s pods."""
    return {
        pod: [i for devices in containers.values() for ids in devices.values() for i in ids]
        for pod, containers in client.listed(sim.socket(node)).items()
        if pod.startswith(f"{NS}/{app}-")
    }


def select(kube: Kube, node: str, config: str) -> tuple[str, dict[str, str]]:
    kube.patch(path_of("v1", "nodes", node), {"metadata": {"labels": {c.MIG_CONFIG_LABEL: config}}})

    def verdict() -> tuple[str, dict[str, str]] | None:
        meta = kube.get(path_of("v1", "nodes", node))["metadata"]
        state = meta["labels"].get(c.MIG_CONFIG_STATE_LABEL)
        notes = meta.get("annotations", {})
        done = notes.get(gpunode.APPLIED_MIG) == config and state in ("success", "failed")
        return (state, notes) if done else None

    return eventually(verdict, timeout=20, what=f"the MIG manager's verdict on {node}: {config}")


def test_each_bound_pod_holds_its_own_gpus(kube: Kube, sim: PodResourcesSim) -> None:
    manifest = DeploymentWrapper("whole").replicas(6).limits({"nvidia.com/gpu": 1}).pool(POOL).obj()
    kube.create(path_of("apps/v1", "deployments", namespace=NS), manifest)
    pods = wait_running(kube, NS, "whole", 6)
    placed = {f"{NS}/{p['metadata']['name']}": p["spec"]["nodeName"] for p in pods}
    every: list[str] = []
    for node in NODES:
        gpus, _ = nvidia_smi(sim, node)
        listed = eventually(
            lambda node=node: (
                (found := held(sim, node, "whole"))
                and set(found) == {k for k, v in placed.items() if v == node}
                and found
            ),
            what=f"List on {node} naming the pods placed there",
        )
        assert all(len(ids) == 1 and ids[0] in gpus for ids in listed.values()), listed
        every += [ids[0] for ids in listed.values()]
        by_smi = {pod: {gpus[i] for i in ids} for pod, ids in listed.items()}
        assert by_smi == sim.holders(node)  # what an agent would publish, by the sim's record
        assert 0 in set().union(*by_smi.values())  # lowest GPU first
    assert len(every) == len(set(every)) == 6


def test_the_mig_manager_refuses_a_gpu_in_use_and_spares_the_others(
    kube: Kube, sim: PodResourcesSim
) -> None:
    node, other = NODES
    state, notes = select(kube, node, "first-two")  # GPU 0 holds a pod of the first test
    assert state == "failed"
    assert (
        "GPU 0: unable to destroy GPU instances: In use by another client"
        in notes[gpunode.MIG_ERROR]
    ), notes
    kube.delete(path_of("apps/v1", "deployments", "whole", NS))
    eventually(lambda: not app_pods(kube, NS, "whole", live=False), what="the pods gone")
    assert select(kube, node, "first-two-again")[0] == "success"
    gpus, migs = nvidia_smi(sim, node)
    assert len(gpus) == 4 and len(migs) == 2

    pinned = DeploymentWrapper("pinned").replicas(2).limits({"nvidia.com/gpu": 1}).obj()
    pinned["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": other}
    kube.create(path_of("apps/v1", "deployments", namespace=NS), pinned)
    wait_running(kube, NS, "pinned", 2)
    before = eventually(lambda: len(held(sim, other, "pinned")) == 2 and held(sim, other, "pinned"))
    assert {i for s in sim.holders(other).values() for i in s} == {0, 1}
    smi_before = nvidia_smi(sim, other)
    assert select(kube, other, "last-two")[0] == "success"  # GPUs 2 and 3: nobody there
    gpus, migs = nvidia_smi(sim, other)
    assert gpus == smi_before[0] and len(migs) == 2
    assert held(sim, other, "pinned") == before  # GPUs 0 and 1 kept their IDs and their pods
    allocatable = kube.get(path_of("v1", "nodes", other))["status"]["allocatable"]
    assert (allocatable["nvidia.com/gpu"], allocatable["nvidia.com/mig-7g.80gb"]) == ("2", "2")
