"""What a MIG rollout costs the serving Deployments on the pool, under their PDBs: whole nodes
against per GPU (issue 28), side by side in one run.

100 KWOK nodes of 8 H100s run 10 serving Deployments of 20 one-GPU replicas, each under a
PodDisruptionBudget of ``minAvailable: 18``; kube-scheduler placed the pods and the simulated
kubelet (``devcluster.podresources``) gave each its GPU, in no particular order. The pool's
first layout (whole GPUs) was applied while it was empty. A NodePoolGeometry change then
partitions GPUs 0-3 of every node (``maxUnavailable: 10%``), leaving 4 whole GPUs per node:

- **whole node**: no GPU node agent runs, so every node is drained whole (today's mode);
- **per GPU**: Tessera's GPU node agent on every node (in this process, each under its own
  Pod-bound token) publishes who holds which GPU, and only the pods on GPUs 0-3 move.

A third case changes every GPU (MIG 3g.40gb x2 to 3g+2g+1g+1g, replicas on 3g.40gb slices,
with the agents): its floor is every pod. The floor of a case is the pods holding a changed
GPU when the rollout starts, by the simulated kubelet's own record. An outside observer
watches every pod: evictions, replicas evicted a second time (a replacement that landed on a
node drained later), and per Deployment the fewest replicas Ready and not terminating at any
instant (the PDB allows 18 of 20, never fewer). At the end every replica must be Ready again
on a node that is no longer cordoned.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import _workloads
from bench._gpu_agents import InProcessGpuAgents
from bench._harness import Operator, Row, WriteMeter, control_plane, create_nodes, table, wait_until
from bench.rollout import NPG, ready
from devcluster import fleet, gpunode
from devcluster.podresources import PodResourcesSim
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

NODES = 100  # not scaled: the replicas need the room of 100 nodes (4 whole GPUs each after)
DEPLOYMENTS = 10
REPLICAS = 20
MIN_AVAILABLE = 18
NAMESPACE = "serving"
RECONFIGURE_S = 5.0
GRACE_S = 2  # each replica takes 2 s to shut down (terminationGracePeriodSeconds)
WHOLE: list[dict[str, Any]] = [{"devices": "all", "profiles": {}}]
HALF = [{"devices": "0-3", "profiles": {"3g.40gb": 2}}]
SPLIT = [{"devices": "all", "profiles": {"3g.40gb": 2}}]
MIXED = [{"devices": "all", "profiles": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}]


@dataclass(frozen=True)
class Case:
    name: str
    agents: bool
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    resource: str
    changed: frozenset[int]


CASES = (
    Case("whole node, GPUs 0-3", False, WHOLE, HALF, "nvidia.com/gpu", frozenset(range(4))),
    Case("per GPU, GPUs 0-3", True, WHOLE, HALF, "nvidia.com/gpu", frozenset(range(4))),
    Case("per GPU, every GPU", True, SPLIT, MIXED, "nvidia.com/mig-3g.40gb", frozenset(range(8))),
)


@dataclass(frozen=True)
class Outcome:
    evictions: int
    floor: int
    twice: int
    lowest: int
    seconds: float
    back: int
    wanted: int
    cordoned: int
    problems: int


def geometry(layouts: list[dict[str, Any]], max_unavailable: str) -> dict[str, Any]:
    return {
        "apiVersion": "tessera.io/v1alpha1",
        "kind": "NodePoolGeometry",
        "metadata": {"name": "serve"},
        "spec": {
            "nodeSelector": {"matchLabels": {c.POOL_LABEL: "serve"}},
            "mig": {"layouts": layouts},
            "rollout": {"maxUnavailable": max_unavailable},
        },
    }


class Observer:
    """Every serving pod as the watch streams it; the fewest Ready replicas per Deployment."""

    def __init__(self) -> None:
        self.pods: dict[str, tuple[str, bool]] = {}  # name -> (app, Ready and not terminating)
        self.lowest: dict[str, int] = {}
        self.evicted: set[str] = set()
        self.first: set[str] = set()  # the pods running when the rollout started
        self._lock = threading.Lock()

    def seed(self, pods: list[dict[str, Any]]) -> None:
        """The pods before the rollout (all Ready, nothing moving: the watch starts from now)."""
        for pod in pods:
            self._record("ADDED", pod)
            self.first.add(pod["metadata"]["name"])
        self._lowest()

    def saw(self, path: str, kind: str, pod: dict[str, Any]) -> None:
        if path == "/api/v1/pods" and pod["metadata"].get("namespace") == NAMESPACE:
            self._record(kind, pod)
            self._lowest()

    def _record(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        conditions = (pod.get("status") or {}).get("conditions") or []
        serving = not meta.get("deletionTimestamp") and any(
            x["type"] == "Ready" and x["status"] == "True" for x in conditions
        )
        with self._lock:
            if meta.get("deletionTimestamp"):
                self.evicted.add(meta["name"])
            if kind == "DELETED":
                self.pods.pop(meta["name"], None)
            else:
                self.pods[meta["name"]] = ((meta.get("labels") or {}).get("app", ""), serving)

    def _lowest(self) -> None:
        with self._lock:
            counts = Counter(app for app, up in self.pods.values() if up)
            for app in {app for app, _ in self.pods.values()}:
                self.lowest[app] = min(self.lowest.get(app, REPLICAS), counts[app])


def run(case: Case) -> Outcome:
    """One case on a fresh control plane."""
    with control_plane() as (plane, kube):
        workdir = Path(tempfile.mkdtemp(prefix="av-"))  # unix socket paths hold 107 bytes
        sim = PodResourcesSim(kube, workdir, spread=True).start()
        nodes = gpunode.GpuNodeAgents(kube, reconfigure_seconds=RECONFIGURE_S, podresources=sim)
        agents = InProcessGpuAgents(kube, sim)
        operator = Operator(plane)
        try:
            create_nodes(kube, fleet.pool("serve", "H100-80GB", NODES))
            nodes.start()
            operator.start()
            kube.create(NPG, geometry(case.before, "100%"))  # the first layout, on empty nodes
            wait_until(lambda: ready(kube.get(f"{NPG}/serve")), 600, "first layout Ready")
            return _change(case, kube, sim, agents, operator)
        finally:
            operator.stop()
            agents.stop()
            nodes.stop()
            sim.stop()
            shutil.rmtree(workdir, ignore_errors=True)


def _change(
    case: Case, kube: Kube, sim: PodResourcesSim, agents: InProcessGpuAgents, operator: Operator
) -> Outcome:
    _workloads.namespaces(kube, [NAMESPACE])
    apps = [f"llm-{i}" for i in range(DEPLOYMENTS)]
    want = {case.resource: "1"}
    _workloads.create(
        kube,
        [(NAMESPACE, _workloads.deployment(a, REPLICAS, want, grace=GRACE_S)) for a in apps]
        + [(NAMESPACE, _workloads.budget(a, MIN_AVAILABLE)) for a in apps],
    )
    _workloads.all_ready(kube, 600)
    names = [n["metadata"]["name"] for n in kube.list("/api/v1/nodes")]
    if case.agents:
        agents.start(names)
        wait_until(lambda: _published(kube, sim, names), 300, "every node's GPU holders")
    floor = sum(
        1
        for n in names
        for pod, gpus in sim.holders(n).items()
        if pod.startswith(f"{NAMESPACE}/") and gpus & case.changed
    )
    observer = Observer()
    observer.seed(kube.list(path_of("v1", "pods", namespace=NAMESPACE)))
    with WriteMeter(kube, ("/api/v1/pods",)) as meter:
        meter.on_event = observer.saw
        start = time.monotonic()
        kube.patch(f"{NPG}/serve", {"spec": geometry(case.after, "10%")["spec"]})
        wait_until(lambda: ready(kube.get(f"{NPG}/serve")), 1800, "rollout Ready")
        took = time.monotonic() - start
        wait_until(
            lambda: _workloads.ready_replicas(kube)[0] == DEPLOYMENTS * REPLICAS,
            300,
            "every replica Ready again",
        )
        back, wanted = _workloads.ready_replicas(kube)
    cordoned = [n for n in kube.list("/api/v1/nodes") if n["spec"].get("unschedulable")]
    return Outcome(
        evictions=len(observer.evicted),
        floor=floor,
        twice=len(observer.evicted - observer.first),
        lowest=min(observer.lowest.values()),
        seconds=took,
        back=back,
        wanted=wanted,
        cordoned=len(cordoned),
        problems=operator.problems(),
    )


def _published(kube: Kube, sim: PodResourcesSim, names: list[str]) -> bool:
    """Every node's agent record places the pods the simulated kubelet says it holds."""
    for node in kube.list("/api/v1/nodes"):
        name = node["metadata"]["name"]
        raw = (node["metadata"].get("annotations") or {}).get(c.GPU_HOLDERS_ANNOTATION)
        if name in names and raw is None and sim.holders(name):
            return False
    return True


def main() -> None:
    outcomes = {case.name: run(case) for case in CASES}
    whole, per_gpu, every = (outcomes[case.name] for case in CASES)
    print(
        f"{NODES} KWOK H100 nodes, maxUnavailable 10%; {DEPLOYMENTS} Deployments x {REPLICAS} "
        f"one-GPU replicas under PDB minAvailable {MIN_AVAILABLE}; simulated reconfiguration "
        f"{RECONFIGURE_S:.0f} s; operator tracebacks or refused calls: "
        f"{[o.problems for o in outcomes.values()]}"
    )
    rows: list[Row] = []
    for case in CASES:
        o = outcomes[case.name]
        ratio = o.evictions / o.floor if o.floor else float("inf")
        target = 1.05 if case.agents else None
        rows += [
            Row(f"{case.name}: evictions / floor (pods on changed GPUs at the start)",
                f"{o.evictions}", f"{o.floor}", f"{ratio:.2f}",
                f"<= {target}" if target else "", ratio <= target if target else None),
            Row(f"{case.name}: replicas evicted twice", str(o.twice), "0", "",
                "= 0" if case.agents else "", o.twice == 0 if case.agents else None),
            Row(f"{case.name}: lowest replicas Ready of a Deployment", f"{o.lowest}/{REPLICAS}",
                f"{MIN_AVAILABLE}/{REPLICAS} (PDB)", f"{o.lowest / REPLICAS:.2f}",
                f">= {MIN_AVAILABLE / REPLICAS:.2f}", o.lowest >= MIN_AVAILABLE),
            Row(f"{case.name}: replicas Ready at the end; nodes left cordoned",
                f"{o.back}/{o.wanted}; {o.cordoned}", "all; 0", "", "",
                o.back == o.wanted and o.cordoned == 0),
        ]  # fmt: skip
    speed = per_gpu.seconds / whole.seconds
    rows += [
        Row("rollout seconds, per GPU / whole node (GPUs 0-3)",
            f"{per_gpu.seconds:.1f}", f"{whole.seconds:.1f}", f"{speed:.2f}", "<= 1.0",
            speed <= 1.0),
        Row("every GPU: evictions / replicas", str(every.evictions),
            str(DEPLOYMENTS * REPLICAS), f"{every.evictions / (DEPLOYMENTS * REPLICAS):.2f}",
            "<= 1.0", every.evictions <= DEPLOYMENTS * REPLICAS),
    ]  # fmt: skip
    print(table(rows))


if __name__ == "__main__":
    main()
