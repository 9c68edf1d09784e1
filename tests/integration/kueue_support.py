"""Kueue for the TenantQuota stories (issue 30): the real controller manager, Jobs, and a watcher.

``kueue`` starts Kueue v0.17.0 (``devcluster.kueue``) on the session's control plane for one
module. ``Admissions`` watches, from outside, every Workload and the pool's Nodes, and checks at
every event that what Kueue holds admitted (``status.admission``, not finished) of each
resource never exceeds what the pool's nodes advertise at that instant. The two watches are
separate streams, so an apparent excess is confirmed against a fresh read of the Nodes before
it counts: a node's allocatable can be newer than the Node event the watcher has seen.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from devcluster.controlplane import ControlPlane
from devcluster.kueue import Kueue
from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, Obj
from tessera.api import constants as c
from tessera.api.v1alpha1 import quantity

from .helpers import condition, eventually

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
HOLD = "kueue-story.example.com/hold"  # no node has it: an admitted Job's pod stays Pending


@pytest.fixture(scope="module")
def kueue(control_plane: ControlPlane, kube: Kube) -> Iterator[Kueue]:
    with Kueue(kube, control_plane.kubeconfig, control_plane.workdir / "kueue") as running:
        yield running


def job(ns: str, name: str, resource: str, queue: str = "tessera") -> dict[str, Any]:
    """A Job of one pod asking for one ``resource``, sent to LocalQueue ``queue``. Its pod
    keeps the quota while it waits for a node no node is (``HOLD``): KWOK finishes the
    pods of Jobs at once, and a finished Job gives its quota back."""
    container = {
        "name": "work",
        "image": "registry.example.com/train:1",
        "resources": {"requests": {resource: "1"}, "limits": {resource: "1"}},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {HOLD: "true"},
                    "containers": [container],
                }
            },
        },
    }


def admitted(workload: Obj) -> bool:
    reserved = (condition(workload, "QuotaReserved") or {}).get("status") == "True"
    finished = (condition(workload, "Finished") or {}).get("status") == "True"
    return reserved and not finished and not workload["metadata"].get("deletionTimestamp")


def usage(workload: Obj) -> dict[str, int]:
    """What an admitted Workload holds, per resource (``status.admission``)."""
    out: dict[str, int] = {}
    admission = (workload.get("status") or {}).get("admission") or {}
    for podset in admission.get("podSetAssignments") or []:
        for resource, amount in (podset.get("resourceUsage") or {}).items():
            out[resource] = out.get(resource, 0) + quantity.whole(str(amount))
    return out


def workloads(kube: Kube, ns: str) -> list[Obj]:
    return kube.list(f"{KUEUE}/namespaces/{ns}/workloads")


@dataclass
class Admissions:
    """Every Workload and the ``pool``'s Nodes, watched; ``excess`` lists each instant Kueue
    held admitted more of a resource than the pool's nodes advertised."""

    kube: Kube
    pool: str
    resources: tuple[str, ...]
    most: dict[str, int] = field(default_factory=dict)  # the most ever admitted, per resource
    excess: list[str] = field(default_factory=list)
    events: int = 0
    _held: dict[str, dict[str, int]] = field(default_factory=dict)  # workload uid → usage
    _nodes: dict[str, dict[str, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _informers: list[Informer] = field(default_factory=list)

    def __enter__(self) -> Admissions:
        for path, handler, name in (
            ("/api/v1/nodes", self._node, "admissions-nodes"),
            (f"{KUEUE}/workloads", self._workload, "admissions-workloads"),
        ):
            informer = Informer(self.kube, path, handler, name=name)
            informer.start()
            self._informers.append(informer)
        for informer in self._informers:
            eventually(informer.synced.is_set, 30, f"{informer.name} synced")
        return self

    def __exit__(self, *_: object) -> None:
        for informer in self._informers:
            informer.stop()

    def _node(self, kind: str, node: Obj) -> None:
        if (node["metadata"].get("labels") or {}).get(c.POOL_LABEL) != self.pool:
            return
        with self._lock:
            if kind == "DELETED":
                self._nodes.pop(node["metadata"]["name"], None)
            else:
                self._nodes[node["metadata"]["name"]] = _advertised(node, self.resources)
            self._check()

    def _workload(self, kind: str, workload: Obj) -> None:
        uid = workload["metadata"]["uid"]
        with self._lock:
            self.events += 1
            if kind != "DELETED" and admitted(workload):
                self._held[uid] = usage(workload)
            else:
                self._held.pop(uid, None)
            self._check()

    def _check(self) -> None:
        for resource in self.resources:
            held = sum(u.get(resource, 0) for u in self._held.values())
            self.most[resource] = max(self.most.get(resource, 0), held)
            there = sum(n.get(resource, 0) for n in self._nodes.values())
            if held <= there:
                continue
            fresh = self.kube.list("/api/v1/nodes", label_selector=f"{c.POOL_LABEL}={self.pool}")
            there = sum(_advertised(n, self.resources).get(resource, 0) for n in fresh)
            if held > there:
                self.excess.append(f"{held} {resource} admitted, the pool advertises {there}")


def _advertised(node: Obj, resources: tuple[str, ...]) -> dict[str, int]:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {r: quantity.whole(str(allocatable[r])) for r in resources if r in allocatable}


def cluster_queue(kube: Kube, name: str) -> Obj | None:
    return kube.get_or_none(f"{KUEUE}/clusterqueues/{name}")


def nominal(queue: Obj | None, flavor: str, resource: str) -> int | None:
    for group in ((queue or {}).get("spec") or {}).get("resourceGroups") or []:
        for entry in group.get("flavors") or []:
            if entry["name"] == flavor:
                for quota in entry["resources"]:
                    if quota["name"] == resource:
                        return quantity.whole(str(quota["nominalQuota"]))
    return None
