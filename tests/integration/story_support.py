"""What the rollout stories share: their nodes, a serving Deployment held by its PDB, node reads."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from devcluster import fleet, gpunode
from devcluster.gpuagents import GpuAgents
from devcluster.podresources import PodResourcesSim
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c
from tessera.domain.rollout import holders

from .faults import node_of, npg
from .helpers import app_pods, condition, eventually, namespace, serve, spare_node

# MIG on GPUs 0-3 only: GPUs 4-7 stay whole, so a replica asking nvidia.com/gpu still fits.
HALF_MIG = {"mig": {"layouts": [{"devices": "0-3", "profiles": {"1g.10gb": 7}}]}}
GPU, MIG_1G = "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
SERVES = "story.tessera.io/serves"  # the nodes a story's serving Deployment may run on


def nodes(pool: str, count: int = 1, model: str = "H100-80GB") -> list[fleet.NodeSpec]:
    """The pool's nodes, labelled as nodes the story's serving Deployment may use."""
    return [
        fleet.NodeSpec(f"{pool}-{i}", model, pool=pool, labels={SERVES: pool}) for i in range(count)
    ]


def serving(kube: Kube, ns: str, pool: str, resource: str = GPU) -> Obj:
    """Deployment ``serve``: one replica on the pool's node, under a PDB that lets none of it
    go (minAvailable 1); then a spare node outside the pool where it could run instead.

    The :func:`spare` comes once the replica is placed, so the scheduler puts it on the
    pool's node; it is room elsewhere, so a drain is held up by the PDB alone.
    """
    namespace(kube, ns)
    (pod,) = serve(kube, ns, "serve", resource=resource, node_selector={SERVES: pool}, budget=1)
    spare(kube, pool, resource)
    counted(kube, ns, "serve", 1)
    return pod


def spare(kube: Kube, pool: str, resource: str = GPU) -> str:
    """Node ``<pool>-spare``, outside the pool, labelled for the pool's workloads
    (``SERVES``): room where a drained node's replicas can go. No GPU labels, so no agent
    acts on it; it advertises 8 of ``resource``."""
    return spare_node(kube, f"{pool}-spare", {SERVES: pool}, {resource: 8})


def counted(kube: Kube, ns: str, app: str, healthy: int) -> None:
    """Wait until the PDB ``app`` counts ``healthy`` Ready replicas (the disruption controller)."""
    pdb = path_of("policy/v1", "poddisruptionbudgets", app, ns)
    eventually(
        lambda: (kube.get(pdb).get("status") or {}).get("currentHealthy") == healthy,
        60,
        f"the PDB {ns}/{app} counting {healthy} Ready replica(s)",
    )


def relax(kube: Kube, ns: str) -> None:
    """Let ``serve`` go (its PDB to minAvailable 0) and wait until the PDB allows it."""
    pdb = path_of("policy/v1", "poddisruptionbudgets", "serve", ns)
    kube.patch(pdb, {"spec": {"minAvailable": 0}})
    eventually(
        lambda: (kube.get(pdb).get("status") or {}).get("disruptionsAllowed") == 1,
        60,
        "the PDB allowing a disruption",
    )


def slices(node: Obj) -> tuple[str | None, str | None]:
    """The whole GPUs and 1g.10gb MIG devices ``node`` advertises."""
    allocatable = node["status"]["allocatable"]
    return allocatable.get(GPU), allocatable.get(MIG_1G)


def same_replica(kube: Kube, ns: str, pod: Obj) -> None:
    """``pod`` is still the one replica of ``serve``: never evicted, not terminating."""
    (live,) = app_pods(kube, ns, "serve", live=False)
    assert live["metadata"]["uid"] == pod["metadata"]["uid"], live["metadata"]
    assert not live["metadata"].get("deletionTimestamp")


def phase(kube: Kube, node: str) -> str | None:
    return (node_of(kube, node)["metadata"].get("annotations") or {}).get(c.NODE_PHASE_ANNOTATION)


def observed(kube: Kube, pool: str) -> Obj | None:
    """The pool once a pass has reconciled its current generation."""
    obj = npg(kube, pool)
    status = (obj or {}).get("status") or {}
    return (
        obj if obj and status.get("observedGeneration") == obj["metadata"]["generation"] else None
    )


def clean(kube: Kube, name: str, admin: bool = False) -> bool:
    node = node_of(kube, name)
    taints = [t["key"] for t in node["spec"].get("taints") or []]
    annotations = node["metadata"].get("annotations") or {}
    return (
        bool(node["spec"].get("unschedulable")) == admin
        and c.GEOMETRY_PENDING_TAINT not in taints
        and c.NODE_STATE_ANNOTATION not in annotations
    )


def assert_replaced(evicted: dict[str, str], before: list[Obj], after: list[Obj]) -> None:
    """Every replica running ``before`` was evicted (every node drained), and the replicas
    running ``after`` are all new ones: each evicted replica is Running again."""
    assert {p["metadata"]["uid"] for p in before} <= set(evicted), "a node not drained"
    assert not {p["metadata"]["uid"] for p in after} & set(evicted), "an evicted replica counted"


@contextmanager
def gpu_world(kube: Kube, prefix: str) -> Iterator[tuple[PodResourcesSim, GpuAgents]]:
    """The simulated kubelet's PodResources, the GPU nodes' MIG managers, and Tessera's real
    GPU node agents (started per node by the story); the agents must end with no problem."""
    namespace(kube, "gpu-operator")
    workdir = Path(tempfile.mkdtemp(prefix=prefix))  # unix socket paths hold 107 bytes
    sim = PodResourcesSim(kube, workdir).start()
    nodes = gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.3, podresources=sim).start()
    agents = GpuAgents(kube, sim)
    try:
        yield sim, agents
        assert agents.problems() == []  # no refused call, no crash: its own token sufficed
    finally:
        agents.stop()
        nodes.stop()
        sim.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def record(kube: Kube, sim: PodResourcesSim, node: str) -> holders.Holders | None:
    """The agent's record once it places exactly the pods the simulated kubelet says hold
    GPUs, read after the newest pod on the node came."""
    raw = (node_of(kube, node)["metadata"].get("annotations") or {}).get(c.GPU_HOLDERS_ANNOTATION)
    found = holders.decode(raw)
    truth = {pod: tuple(sorted(gpus)) for pod, gpus in sim.holders(node).items()}
    if found is None or dict(found.pods) != truth:
        return None
    pods = kube.list("/api/v1/pods", field_selector=f"spec.nodeName={node}")
    newest = max(p["metadata"]["creationTimestamp"] for p in pods)
    return found if found.read.strftime("%Y-%m-%dT%H:%M:%SZ") > newest else None


def unschedulable(kube: Kube, ns: str, app: str, n: int) -> bool:
    """All ``n`` pods of ``app`` exist and kube-scheduler marked each Unschedulable."""
    pods = app_pods(kube, ns, app)
    marked = [
        p
        for p in pods
        if (cond := condition(p, "PodScheduled"))
        and cond["status"] == "False"
        and cond.get("reason") == "Unschedulable"
    ]
    return len(pods) == n and len(marked) == n
