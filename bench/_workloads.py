"""Workloads as a platform team's users run them: Deployments (and their PodDisruptionBudgets)
in their own namespaces, never a pod pinned to a node. kube-controller-manager's ReplicaSet
controller creates the pods, kube-scheduler places them by the extended resources they request,
KWOK runs them (Running, Ready) on the node it was bound to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench._harness import parallel, wait_until
from tessera.adapters.kube import ApiError, Kube, path_of

DEPLOYMENTS = "/apis/apps/v1/deployments"


def deployment(
    name: str, replicas: int, limits: Mapping[str, str], *, grace: int = 0, app: str = ""
) -> dict[str, Any]:
    labels = {"app": app or name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": grace,
                    "containers": [
                        {"name": "main", "image": "serve", "resources": {"limits": dict(limits)}}
                    ],
                },
            },
        },
    }


def budget(name: str, min_available: int) -> dict[str, Any]:
    """A PodDisruptionBudget over the Deployment ``name``'s pods."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": name}}},
    }


def namespaces(kube: Kube, names: list[str]) -> None:
    """Create ``names`` and wait for their default ServiceAccount (pods need it to be admitted)."""
    for ns in names:
        try:
            kube.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        except ApiError as err:
            if not err.conflict:
                raise
    for ns in names:
        wait_until(
            lambda ns=ns: (
                kube.get_or_none(path_of("v1", "serviceaccounts", "default", ns)) is not None
            ),
            60,
            f"default ServiceAccount in {ns}",
        )


def create(kube: Kube, items: list[tuple[str, dict[str, Any]]]) -> None:
    """Create ``(namespace, Deployment or PodDisruptionBudget)`` pairs, 16 at a time."""

    def one(client: Kube, item: tuple[str, dict[str, Any]]) -> None:
        ns, body = item
        plural = "deployments" if body["kind"] == "Deployment" else "poddisruptionbudgets"
        client.create(path_of(body["apiVersion"], plural, namespace=ns), body)

    parallel(kube, one, items)


def ready_replicas(kube: Kube) -> tuple[int, int]:
    """(ready, wanted) replicas over every Deployment of the cluster, from their status."""
    ready = wanted = 0
    for page in kube.pages(DEPLOYMENTS):
        for dep in page.get("items", []):
            wanted += dep["spec"]["replicas"]
            status = dep.get("status") or {}
            if status.get("observedGeneration") == dep["metadata"]["generation"]:
                ready += status.get("readyReplicas", 0)
    return ready, wanted


def all_ready(kube: Kube, timeout: float) -> float:
    """Wait until every replica of every Deployment is Ready; the seconds it took."""

    def done() -> bool:
        ready, wanted = ready_replicas(kube)
        return wanted > 0 and ready == wanted

    return wait_until(done, timeout, "every Deployment's replicas Ready", interval=2.0)
