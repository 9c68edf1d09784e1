"""The demo's serving workloads (``serving.yaml``, namespace ``ml``): what a platform's users
run on the pools — a StatefulSet and Deployments under PodDisruptionBudgets, placed by
kube-scheduler by the MIG, vNPU and vGPU resources they request, and run by KWOK.

``make demo`` creates them once ``config/samples`` is Ready and waits until every replica runs,
so ``tessera plan`` in the README's walkthrough has pods to evict and a PDB that blocks.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from devcluster import watchdog
from tessera.adapters.kube import ApiError, Kube, Obj, path_of

MANIFEST = Path(__file__).with_name("serving.yaml")
NAMESPACE = "ml"
# kind -> (API group/version, plural)
KINDS = {
    "Namespace": ("v1", "namespaces"),
    "StatefulSet": ("apps/v1", "statefulsets"),
    "Deployment": ("apps/v1", "deployments"),
    "PodDisruptionBudget": ("policy/v1", "poddisruptionbudgets"),
    "ResourceClaimTemplate": ("resource.k8s.io/v1", "resourceclaimtemplates"),
}


def manifests() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]


def replicas() -> dict[str, int]:
    """Replicas by app label (the workloads' pod label ``app``)."""
    return {
        doc["spec"]["template"]["metadata"]["labels"]["app"]: int(doc["spec"]["replicas"])
        for doc in manifests()
        if doc["kind"] in ("StatefulSet", "Deployment")
    }


def apply(kube: Kube) -> list[str]:
    """Create what is missing (an existing object is left as it is); returns what was created."""
    created = []
    for doc in manifests():
        api, plural = KINDS[doc["kind"]]
        ns = doc["metadata"].get("namespace")
        try:
            kube.create(path_of(api, plural, namespace=ns), doc)
        except ApiError as err:
            if not err.conflict:
                raise
            continue
        created.append(f"{doc['kind']}/{doc['metadata']['name']}")
    return created


def _running(pod: Obj) -> bool:
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    live = not pod["metadata"].get("deletionTimestamp")
    return status.get("phase") == "Running" and ready and live


def pods(kube: Kube) -> list[Obj]:
    """The workloads' live pods, by name."""
    found = kube.list(path_of("v1", "pods", namespace=NAMESPACE))
    live = [p for p in found if not p["metadata"].get("deletionTimestamp")]
    return sorted(live, key=lambda p: str(p["metadata"]["name"]))


def all_running(kube: Kube) -> list[Obj] | None:
    """Every replica of every workload Running and Ready (then the pods), else None."""
    found = pods(kube)
    by_app: dict[str, int] = {}
    for pod in found:
        if _running(pod):
            app = (pod["metadata"].get("labels") or {}).get("app", "")
            by_app[app] = by_app.get(app, 0) + 1
    return found if by_app == replicas() and len(found) == sum(by_app.values()) else None


def wait_running(kube: Kube, timeout: float) -> list[Obj] | None:
    """Poll until :func:`all_running` or the deadline; None when it passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        watchdog.check()
        found = all_running(kube)
        if found:
            return found
        time.sleep(0.5)  # polling the API with a deadline
    return None


def placement(found: list[Obj], kube: Kube | None = None) -> str:
    """``ml/serving-0 -> h100-inference-1 (nvidia.com/mig-1g.10gb: 1)``, one line a pod; a pod
    claiming DRA devices shows each claim's class and, with ``kube``, the device allocated."""
    lines = []
    for pod in found:
        limits = pod["spec"]["containers"][0].get("resources", {}).get("limits", {})
        asks = [f"{k}: {v}" for k, v in sorted(limits.items())]
        asks += _claimed(kube, pod) if kube is not None else []
        node = pod["spec"].get("nodeName") or "(not scheduled)"
        lines.append(f"{NAMESPACE}/{pod['metadata']['name']} -> {node} ({', '.join(asks)})")
    return "\n".join(lines)


def _claimed(kube: Kube, pod: Obj) -> list[str]:
    """``mig-1g.10gb.tessera.io: gpu-0-mig-1g10gb-19-0`` for each claim the pod's status names."""
    out = []
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        name = status.get("resourceClaimName")
        claim = name and kube.get_or_none(
            path_of("resource.k8s.io/v1", "resourceclaims", name, NAMESPACE)
        )
        if not claim:
            continue
        requests = claim["spec"]["devices"]["requests"]
        classes = ",".join((r.get("exactly") or {}).get("deviceClassName", "") for r in requests)
        results = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
        devices = ",".join(r["device"] for r in results.get("results") or []) or "unallocated"
        out.append(f"{classes}: {devices}")
    return out
