"""Polling with a deadline, and small builders for objects tests create."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from tessera.adapters.kube import ApiError, Kube, path_of

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], timeout: float = 30.0, what: str = "condition") -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.1)  # polling interval, bounded by the deadline
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


def namespace(kube: Kube, name: str, labels: dict[str, str] | None = None) -> None:
    """Create a namespace and wait until its default ServiceAccount exists (pods need it)."""
    try:
        kube.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels or {}}})
    except ApiError as err:
        if not err.conflict:
            raise
    eventually(
        lambda: kube.get_or_none(path_of("v1", "serviceaccounts", "default", name)),
        what=f"default ServiceAccount in {name}",
    )


def gpu_pod(
    name: str, resource: str = "nvidia.com/gpu", count: int = 1, node: str = "", **meta: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": "cuda", "resources": {"limits": {resource: str(count)}}}
        ],
        "terminationGracePeriodSeconds": 1,
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta}, "spec": spec}


def owned_pod(
    kube: Kube, namespace: str, name: str, node: str, resource: str = "nvidia.com/gpu"
) -> None:
    """A pod using ``resource`` on ``node``, owned by a ReplicaSet labelled ``app=<name>``.

    No controller runs the ReplicaSet here (the GC keeps the pod); the owner makes the pod
    evictable the way a drain expects, and the label is what a PDB selects it by.
    """
    rs = kube.create(
        f"/apis/apps/v1/namespaces/{namespace}/replicasets",
        {
            "metadata": {"name": name},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "main", "image": "workload"}]},
                },
            },
        },
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": name,
        "controller": True,
        "uid": rs["metadata"]["uid"],
    }
    pod = gpu_pod(name, resource, node=node, labels={"app": name}, ownerReferences=[owner])
    kube.create(path_of("v1", "pods", namespace=namespace), pod)


def custom(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "tessera.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


@contextlib.contextmanager
def gpu_agents(kube: Kube) -> Iterator[None]:
    """The simulated GPU node agents, for the duration of a fixture (KWOK plays the kubelet)."""
    from devcluster import gpunode

    namespace(kube, "gpu-operator")
    sim = gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.3).start()
    try:
        yield
    finally:
        sim.stop()
