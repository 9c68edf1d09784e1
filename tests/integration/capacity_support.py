"""Nodes, a serving team's tier and a readiness watcher for the capacity stories.

The nodes are KWOK's (``fleet``): KWOK makes them Ready and runs the pods kube-scheduler binds to
them; the simulated MIG manager (``devcluster.gpunode``) turns Tessera's layout labels into MIG
resources. Each story's team keeps its serving on its own nodes (a ``nodeSelector`` on a tier
label), so "the rest of the cluster" is the team's tier, whatever other tests left behind.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from devcluster import fleet
from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, Obj, path_of

from .helpers import condition, eventually

MIG_1G = "nvidia.com/mig-1g.10gb"
TIER = "serving.example.com/tier"


def tier_pool(kube: Kube, pool: str, count: int) -> list[str]:
    """``count`` one-GPU H100 nodes of pool ``pool``, also labelled tier ``pool``."""
    specs = [replace(s, labels={TIER: pool}) for s in fleet.pool(pool, "H100-80GB", count, 1)]
    return fleet.create_nodes(kube, specs)


def tier_spare(kube: Kube, name: str, tier: str, devices: dict[str, int]) -> str:
    """A node of ``tier`` in no pool, advertising ``devices``; no GPU labels: no agent acts."""
    manifest = fleet.node_manifest(fleet.NodeSpec(name, "H100-80GB"))
    manifest["metadata"]["labels"] = {"kubernetes.io/hostname": name, TIER: tier}
    (made,) = fleet.create_from_manifests(kube, [manifest])
    fleet.publish_devices(kube, kube.get(path_of("v1", "nodes", made)), "nvidia.com/", devices)
    return made


def healthy(pod: Obj) -> bool:
    """What the disruption controller counts: Ready and not terminating."""
    ready = (condition(pod, "Ready") or {}).get("status") == "True"
    return ready and not pod["metadata"].get("deletionTimestamp")


@dataclass
class Availability:
    """Watches a namespace's pods from outside: the fewest healthy replicas of ``app`` seen."""

    kube: Kube
    namespace: str
    app: str
    lowest: int | None = None
    healthy: dict[str, bool] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _informer: Informer | None = None

    def __enter__(self) -> Availability:
        path = path_of("v1", "pods", namespace=self.namespace)
        self._informer = Informer(self.kube, path, self._pod, name="availability")
        self._informer.start()
        eventually(self._informer.synced.is_set, 30, "availability watcher synced")
        with self._lock:
            self.lowest = sum(self.healthy.values())
        return self

    def __exit__(self, *_: object) -> None:
        if self._informer is not None:
            self._informer.stop()

    def _pod(self, kind: str, pod: Obj) -> None:
        if (pod["metadata"].get("labels") or {}).get("app") != self.app:
            return
        uid = pod["metadata"]["uid"]
        with self._lock:
            if kind == "DELETED":
                self.healthy.pop(uid, None)
            else:
                self.healthy[uid] = healthy(pod)
            if self.lowest is not None:
                self.lowest = min(self.lowest, sum(self.healthy.values()))
