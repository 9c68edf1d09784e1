"""KWOK GPU nodes, serving Deployments and a readiness watcher for the capacity stories.

The nodes are KWOK's (annotation ``kwok.x-k8s.io/node: fake``): KWOK makes them Ready and runs
the pods kube-scheduler binds to them; their GPUs are published the way the simulated device
plugin publishes them (a status patch), and the simulated MIG manager (``devcluster.gpunode``)
turns Tessera's layout labels into MIG resources. No pod is pinned to a node: every replica
comes from a Deployment and is placed by the scheduler.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from devcluster import fleet
from devcluster.controlplane import ControlPlane
from devcluster.kubelet import publish_devices  # the one import of it here: it is moving
from devcluster.scheduling import KWOK_ANNOTATION
from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, Obj, path_of

from .helpers import condition, eventually

MIG_1G = "nvidia.com/mig-1g.10gb"
TIER = "serving.example.com/tier"


def until(plane: ControlPlane, probe: Any, what: str, timeout: float = 180) -> Any:
    """``eventually``, failing at once naming the component (scheduler, KWOK) that died."""

    def alive_and() -> Any:
        plane.check_alive()
        return probe()

    return eventually(alive_and, timeout, what)


def kwok_node(
    plane: ControlPlane,
    kube: Kube,
    spec: fleet.NodeSpec,
    devices: dict[str, int],
    *,
    gfd: bool = True,
) -> str:
    """A KWOK node with the labels of ``spec`` (GFD's, the pool's) and ``devices`` published.

    ``gfd=False``: no GPU labels, so no simulated agent touches what is published.
    """
    manifest = fleet.node_manifest(spec)
    manifest.pop("status")
    if not gfd:
        plain = {"kubernetes.io/hostname": spec.name, **spec.labels}
        manifest["metadata"]["labels"] = plain  # type: ignore[index]
    manifest["metadata"]["annotations"] = {KWOK_ANNOTATION: "fake"}  # type: ignore[index]
    kube.create("/api/v1/nodes", manifest)
    path = path_of("v1", "nodes", spec.name)
    node = until(plane, lambda: ready_node(kube.get(path)), f"KWOK to make {spec.name} Ready")
    publish_devices(kube, node, "nvidia.com/", devices)
    return spec.name


def ready_node(node: Obj) -> Obj | None:
    return node if (condition(node, "Ready") or {}).get("status") == "True" else None


def serving(name: str, replicas: int, tier: str) -> dict[str, Any]:
    """A Deployment of ``replicas`` pods each asking one 1g.10gb, on nodes labelled ``tier``
    (a nodeSelector, as a team keeps its serving on its own nodes); no nodeName."""
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {TIER: tier},
                    "containers": [
                        {"name": "main", "image": "serve", "resources": {"limits": {MIG_1G: "1"}}}
                    ],
                    "terminationGracePeriodSeconds": 1,
                },
            },
        },
    }


def pdb(name: str, min_available: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": name}}},
    }


def pods_of(kube: Kube, ns: str, app: str) -> list[Obj]:
    return kube.list(path_of("v1", "pods", namespace=ns), label_selector=f"app={app}")


def healthy(pod: Obj) -> bool:
    """What the disruption controller counts: Ready and not terminating."""
    ready = (condition(pod, "Ready") or {}).get("status") == "True"
    return ready and not pod["metadata"].get("deletionTimestamp")


def all_running(kube: Kube, ns: str, app: str, replicas: int) -> list[Obj] | None:
    """Every replica bound by the scheduler, Running and Ready; None until then."""
    pods = [p for p in pods_of(kube, ns, app) if not p["metadata"].get("deletionTimestamp")]
    ok = len(pods) == replicas and all(
        p["spec"].get("nodeName") and p["status"].get("phase") == "Running" and healthy(p)
        for p in pods
    )
    return pods if ok else None


@dataclass
class Availability:
    """Watches a namespace's pods from outside; the fewest healthy replicas of ``app`` seen."""

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
