"""What a MIG rollout costs the serving Deployments on the pool, under their PDBs.

100 KWOK nodes of 8 H100s run 10 serving Deployments of 20 one-GPU replicas, each under a
PodDisruptionBudget of ``minAvailable: 18``; the pods were placed by kube-scheduler. A
NodePoolGeometry then partitions GPUs 0-3 of every node (``maxUnavailable: 10%``), leaving
4 whole GPUs per node: room for every replica elsewhere while a node is drained. An outside
observer watches every pod and records, per Deployment, the fewest replicas Ready and not
terminating at any instant; the PDB allows 18 of 20 (90 %), never fewer. At the end every
replica must be Ready again on a node that is no longer cordoned.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from bench import _workloads
from bench._harness import Operator, Row, WriteMeter, control_plane, create_nodes, table, wait_until
from bench.rollout import NPG, ready
from devcluster import fleet, gpunode
from tessera.adapters.kube import path_of
from tessera.api import constants as c

NODES = 100  # not scaled: the replicas need the room of 100 nodes (4 whole GPUs each after)
DEPLOYMENTS = 10
REPLICAS = 20
MIN_AVAILABLE = 18
NAMESPACE = "serving"
RECONFIGURE_S = 5.0
GRACE_S = 2  # each replica takes 2 s to shut down (terminationGracePeriodSeconds)


def geometry() -> dict[str, Any]:
    return {
        "apiVersion": "tessera.io/v1alpha1",
        "kind": "NodePoolGeometry",
        "metadata": {"name": "serve"},
        "spec": {
            "nodeSelector": {"matchLabels": {c.POOL_LABEL: "serve"}},
            "mig": {"layouts": [{"devices": "0-3", "profiles": {"3g.40gb": 2}}]},
            "rollout": {"maxUnavailable": "10%"},
        },
    }


class Observer:
    """Every serving pod as the watch streams it; the fewest Ready replicas per Deployment."""

    def __init__(self) -> None:
        self.pods: dict[str, tuple[str, bool]] = {}  # name -> (app, Ready and not terminating)
        self.lowest: dict[str, int] = {}
        self.evicted: set[str] = set()
        self._lock = threading.Lock()

    def seed(self, pods: list[dict[str, Any]]) -> None:
        """The pods before the rollout (all Ready, nothing moving: the watch starts from now)."""
        for pod in pods:
            self._record("ADDED", pod)
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


def main() -> None:
    with control_plane() as (plane, kube):
        create_nodes(kube, fleet.pool("serve", "H100-80GB", NODES))
        _workloads.namespaces(kube, [NAMESPACE])
        apps = [f"llm-{i}" for i in range(DEPLOYMENTS)]
        gpu = {"nvidia.com/gpu": "1"}
        _workloads.create(
            kube,
            [(NAMESPACE, _workloads.deployment(a, REPLICAS, gpu, grace=GRACE_S)) for a in apps]
            + [(NAMESPACE, _workloads.budget(a, MIN_AVAILABLE)) for a in apps],
        )
        _workloads.all_ready(kube, 600)
        agents = gpunode.GpuNodeAgents(kube, reconfigure_seconds=RECONFIGURE_S).start()
        operator = Operator(plane).start()
        observer = Observer()
        observer.seed(kube.list(path_of("v1", "pods", namespace=NAMESPACE)))
        try:
            with WriteMeter(kube, ("/api/v1/pods",)) as meter:
                meter.on_event = observer.saw
                start = time.monotonic()
                kube.create(NPG, geometry())
                wait_until(lambda: ready(kube.get(f"{NPG}/serve")), 1800, "rollout Ready")
                took = time.monotonic() - start
                wait_until(
                    lambda: _workloads.ready_replicas(kube)[0] == DEPLOYMENTS * REPLICAS,
                    300,
                    "every replica Ready again",
                )
                back, wanted = _workloads.ready_replicas(kube)
            cordoned = [n["metadata"]["name"] for n in kube.list("/api/v1/nodes")
                        if n["spec"].get("unschedulable")]  # fmt: skip
            problems = operator.problems()
        finally:
            operator.stop()
            agents.stop()

    lowest = min(observer.lowest.values())
    floor = MIN_AVAILABLE / REPLICAS
    print(
        f"{NODES} KWOK H100 nodes, GPUs 0-3 partitioned, maxUnavailable 10%; {DEPLOYMENTS} "
        f"Deployments x {REPLICAS} one-GPU replicas under PDB minAvailable {MIN_AVAILABLE}; "
        f"simulated reconfiguration {RECONFIGURE_S:.0f} s; tracebacks or refused calls: {problems}"
    )
    rows = [
        Row("lowest fraction of a Deployment's replicas Ready", f"{lowest}/{REPLICAS}",
            f"{MIN_AVAILABLE}/{REPLICAS} (PDB)", f"{lowest / REPLICAS:.2f}",
            f">= {floor:.2f}", lowest >= MIN_AVAILABLE),
        Row("replicas evicted and replaced", str(len(observer.evicted)), "", "", "", None),
        Row("replicas Ready at the end", f"{back}/{wanted}", f"{wanted}", "", "all",
            back == wanted),
        Row("rollout, seconds", f"{took:.1f}", "", "", "", None),
        Row("nodes left cordoned", str(len(cordoned)), "0", "", "= 0", not cordoned),
    ]  # fmt: skip
    print(table(rows))


if __name__ == "__main__":
    main()
