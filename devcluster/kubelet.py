"""A kubelet stand-in: pods bound to a node run, and deleted pods go away.

There is no scheduler and no container runtime in the dev cluster. This
agent gives pods bound to a node (``spec.nodeName``) the status a kubelet
would — Running, Ready — which is what makes PodDisruptionBudgets count them
as healthy and the Eviction API consult the budget. When a pod is deleted
gracefully it removes it after its grace period, capped by ``max_grace``.
A pod annotated ``sim.tessera.io/stuck-terminating=true`` never goes away
(fault injection). ``publish_devices`` is the kubelet's other job here: it
writes what a device plugin registered into the node's allocatable.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from tessera.adapters.informer import Informer
from tessera.adapters.kube import ApiError, Kube, path_of

STUCK_ANNOTATION = "sim.tessera.io/stuck-terminating"


def publish_devices(
    kube: Kube, node: Mapping[str, Any], prefix: str, devices: Mapping[str, int]
) -> None:
    """Make ``devices`` the node's allocatable and capacity under ``prefix`` (a plugin's domain).

    Resources outside ``prefix`` are kept; nothing is written when the node already
    shows them; a node deleted meanwhile is not an error.
    """
    current = (node.get("status") or {}).get("allocatable") or {}
    keep = {k: v for k, v in current.items() if not k.startswith(prefix)}
    wanted = {**keep, **{k: str(v) for k, v in devices.items()}}
    if wanted == current:
        return
    patch = [
        {"op": "replace", "path": "/status/allocatable", "value": wanted},
        {"op": "replace", "path": "/status/capacity", "value": wanted},
    ]
    try:
        kube.patch(path_of("v1", "nodes", node["metadata"]["name"]) + "/status", patch, kind="json")
    except ApiError as err:
        if not err.not_found:
            raise


class Kubelet:
    def __init__(self, kube: Kube, *, max_grace: float = 1.0) -> None:
        self.kube = kube
        self.max_grace = max_grace
        self.informer = Informer(kube, "/api/v1/pods", self._on_pod, name="sim-kubelet")
        self._deleting: set[str] = set()
        self._lock = threading.Lock()

    def start(self) -> Kubelet:
        self.informer.start()
        return self

    def stop(self) -> None:
        self.informer.stop()

    def _on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        if kind == "DELETED":
            return
        meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
        if not spec.get("nodeName"):
            return
        if meta.get("deletionTimestamp"):
            self._finish_deletion(pod)
        elif status.get("phase") in (None, "Pending"):
            self._run(meta["namespace"], meta["name"])

    def _run(self, namespace: str, name: str) -> None:
        ready = [
            {"type": t, "status": "True"}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        try:
            self.kube.patch(
                path_of("v1", "pods", name, namespace) + "/status",
                {"status": {"phase": "Running", "conditions": ready}},
                kind="strategic",
            )
        except ApiError as err:
            if not err.not_found:
                raise

    def _finish_deletion(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if meta.get("annotations", {}).get(STUCK_ANNOTATION) == "true":
            return
        key = f"{meta['namespace']}/{meta['name']}/{meta['uid']}"
        with self._lock:
            if key in self._deleting:
                return
            self._deleting.add(key)
        grace = min(float(meta.get("deletionGracePeriodSeconds") or 0), self.max_grace)
        timer = threading.Timer(
            grace, self._delete_now, args=(meta["namespace"], meta["name"], meta["uid"])
        )
        timer.daemon = True
        timer.start()

    def _delete_now(self, namespace: str, name: str, uid: str) -> None:
        try:
            self.kube.delete(
                path_of("v1", "pods", name, namespace),
                {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}},
            )
        except ApiError as err:
            if not err.conflict:  # a new pod of the same name: not ours to delete
                raise
