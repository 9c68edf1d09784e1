"""Stand-in HAMi and Volcano installs: their scheduler config maps and Deployments, no binary.

Why: a SharingPolicy's ``spec.scheduler`` makes Tessera read the scheduler's version from its
Deployment's image tag, edit its config map, and (Volcano, which reads its map once) restart
it. Tests and the demo need those objects as a Helm install leaves them — real Deployments
whose ReplicaSets make pods that kube-scheduler binds and KWOK runs, so a restart
(``kubectl rollout restart``: a new pod-template annotation) is observable as new pods. No
scheduler binary runs: nothing here places a pod.

* HAMi (chart v2.10, release ``hami`` in ``kube-system``): ConfigMap ``hami-scheduler-device``
  with the chart's ``device-config.yaml`` shape (hami_ascend.md §1.6: ``nvidia`` defaults, the
  ``vnpus`` wrapper with ``hamiVnpuCore: false`` and the 310P3 entry), and Deployment
  ``hami-scheduler`` with the chart's two containers: ``kube-scheduler`` (upstream
  kube-scheduler, HAMi's extender configured into it) and ``vgpu-scheduler-extender`` (image
  ``projecthami/hami:<version>``) — the HAMi version is the extender's tag, not the first
  container's.
* Volcano (``volcano-system``): ConfigMap ``volcano-scheduler-configmap`` with a
  ``volcano-scheduler.conf`` in the chart's style (two tiers, no ``deviceshare``), and
  Deployment ``volcano-scheduler`` (image ``volcanosh/vc-scheduler:<version>``).

The pods run on one plain KWOK node, ``sim-system`` (no accelerators, label
``sim.tessera.io/role=system``), as schedulers run on CPU nodes: never on a node Tessera drains.
Every helper creates what is missing and leaves what exists as it is.
"""

from __future__ import annotations

import time
from typing import Any

from devcluster import fleet, watchdog
from devcluster.scheduler_texts import HAMI_DEVICE_CONFIG, VOLCANO_CONF
from devcluster.scheduling import KWOK_ANNOTATION
from tessera.adapters.kube import ApiError, Kube, Obj, path_of
from tessera.api import constants as c

SYSTEM_NODE = "sim-system"
ROLE_LABEL = "sim.tessera.io/role"
HAMI_NAMESPACE, HAMI_CONFIGMAP, HAMI_DEPLOYMENT = (
    "kube-system",
    "hami-scheduler-device",
    "hami-scheduler",
)
HAMI_VERSION, HAMI_IMAGE = "v2.10.0", "projecthami/hami"
KUBE_SCHEDULER_IMAGE = "registry.k8s.io/kube-scheduler:v1.34.4"
VOLCANO_NAMESPACE = "volcano-system"
VOLCANO_CONFIGMAP, VOLCANO_DEPLOYMENT = "volcano-scheduler-configmap", "volcano-scheduler"
VOLCANO_VERSION, VOLCANO_IMAGE = "v1.16.0", "volcanosh/vc-scheduler"


def system_node(kube: Kube) -> str:
    """The plain KWOK node the schedulers' pods run on (created if missing, then Ready)."""
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    manifest = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": SYSTEM_NODE,
            "labels": {
                fleet.SIMULATED_LABEL: "true",
                "kubernetes.io/hostname": SYSTEM_NODE,
                ROLE_LABEL: "system",
            },
            "annotations": {KWOK_ANNOTATION: "fake"},
        },
        "status": {"capacity": resources, "allocatable": resources},
    }
    if kube.get_or_none(path_of("v1", "nodes", SYSTEM_NODE)) is None:
        fleet.create_from_manifests(kube, [manifest])
    return SYSTEM_NODE


def install_hami(
    kube: Kube, *, version: str = HAMI_VERSION, device_config: str = HAMI_DEVICE_CONFIG
) -> Obj:
    """HAMi's scheduler as its chart leaves it; returns the Deployment."""
    system_node(kube)
    _create(
        kube,
        path_of("v1", "configmaps", namespace=HAMI_NAMESPACE),
        _configmap(HAMI_NAMESPACE, HAMI_CONFIGMAP, {c.HAMI_SCHEDULER_CONFIGMAP_KEY: device_config}),
    )
    containers: list[dict[str, Any]] = [
        {
            "name": "kube-scheduler",
            "image": KUBE_SCHEDULER_IMAGE,
            "command": ["kube-scheduler", "--config=/config/config.yaml", "-v=4"],
        },
        {
            "name": "vgpu-scheduler-extender",
            "image": f"{HAMI_IMAGE}:{version}",
            "command": [
                "scheduler",
                "--http_bind=0.0.0.0:443",
                "--device-config-file=/device-config.yaml",
                "--enable-ascend=true",  # the chart's devices.ascend.enabled: true
            ],
            "volumeMounts": [
                {
                    "name": "device-config",
                    "mountPath": "/device-config.yaml",
                    "subPath": c.HAMI_SCHEDULER_CONFIGMAP_KEY,
                },
            ],
        },
    ]
    volumes = [{"name": "device-config", "configMap": {"name": HAMI_CONFIGMAP}}]
    labels = {"app.kubernetes.io/name": "hami", "app.kubernetes.io/component": HAMI_DEPLOYMENT}
    return _create(
        kube,
        path_of("apps/v1", "deployments", namespace=HAMI_NAMESPACE),
        _deployment(HAMI_NAMESPACE, HAMI_DEPLOYMENT, labels, containers, volumes),
    )


def install_volcano(kube: Kube, *, version: str = VOLCANO_VERSION, conf: str = VOLCANO_CONF) -> Obj:
    """Volcano's scheduler as its chart leaves it; returns the Deployment."""
    system_node(kube)
    try:
        kube.create("/api/v1/namespaces", {"metadata": {"name": VOLCANO_NAMESPACE}})
    except ApiError as err:
        if not err.conflict:
            raise
    _wait(
        lambda: kube.get_or_none(path_of("v1", "serviceaccounts", "default", VOLCANO_NAMESPACE)),
        f"the default ServiceAccount of {VOLCANO_NAMESPACE} (pods need it)",
    )
    _create(
        kube,
        path_of("v1", "configmaps", namespace=VOLCANO_NAMESPACE),
        _configmap(VOLCANO_NAMESPACE, VOLCANO_CONFIGMAP, {c.VOLCANO_SCHEDULER_CONFIGMAP_KEY: conf}),
    )
    containers = [
        {
            "name": VOLCANO_DEPLOYMENT,
            "image": f"{VOLCANO_IMAGE}:{version}",
            "args": [
                "--scheduler-conf=/volcano.scheduler/volcano-scheduler.conf",
                "--enable-healthz=true",
                "--enable-metrics=true",
                "-v=3",
            ],
            "volumeMounts": [{"name": "scheduler-config", "mountPath": "/volcano.scheduler"}],
        }
    ]
    volumes = [{"name": "scheduler-config", "configMap": {"name": VOLCANO_CONFIGMAP}}]
    labels = {"app": VOLCANO_DEPLOYMENT}
    return _create(
        kube,
        path_of("apps/v1", "deployments", namespace=VOLCANO_NAMESPACE),
        _deployment(VOLCANO_NAMESPACE, VOLCANO_DEPLOYMENT, labels, containers, volumes),
    )


def uninstall(kube: Kube) -> None:
    """Remove both installs (their config maps and Deployments; the namespaces stay)."""
    for api, plural, name, namespace in (
        ("apps/v1", "deployments", HAMI_DEPLOYMENT, HAMI_NAMESPACE),
        ("v1", "configmaps", HAMI_CONFIGMAP, HAMI_NAMESPACE),
        ("apps/v1", "deployments", VOLCANO_DEPLOYMENT, VOLCANO_NAMESPACE),
        ("v1", "configmaps", VOLCANO_CONFIGMAP, VOLCANO_NAMESPACE),
    ):
        kube.delete(path_of(api, plural, name, namespace))  # absent: nothing to do


def pods(kube: Kube, namespace: str, deployment: str) -> list[Obj]:
    """The Deployment's live pods (not deleting), found by its selector."""
    obj = kube.get(path_of("apps/v1", "deployments", deployment, namespace))
    selector = ",".join(f"{k}={v}" for k, v in obj["spec"]["selector"]["matchLabels"].items())
    found = kube.list(path_of("v1", "pods", namespace=namespace), label_selector=selector)
    return [p for p in found if not p["metadata"].get("deletionTimestamp")]


def wait_running(kube: Kube, namespace: str, deployment: str, timeout: float = 60.0) -> list[Obj]:
    """Wait until the Deployment's one pod of its current template runs (KWOK); return it.

    After a restart the old pod may linger Terminating for its grace period; it is not counted.
    """
    deadline = time.monotonic() + timeout
    while True:
        watchdog.check()
        obj = kube.get(path_of("apps/v1", "deployments", deployment, namespace))
        status = obj.get("status") or {}
        running = [p for p in pods(kube, namespace, deployment) if _running(p)]
        if (
            status.get("observedGeneration") == obj["metadata"]["generation"]
            and status.get("updatedReplicas") == status.get("replicas") == 1
            and len(running) == 1
        ):
            return running
        if time.monotonic() > deadline:
            raise TimeoutError(f"{namespace}/{deployment}: no running pod after {timeout:.0f}s")
        time.sleep(0.1)  # polling the API with a deadline


def _wait(probe: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        watchdog.check()
        if probe():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {timeout:.0f}s")
        time.sleep(0.1)  # polling the API with a deadline


def _running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def _create(kube: Kube, collection: str, body: Obj) -> Obj:
    try:
        return kube.create(collection, body)
    except ApiError as err:
        if not err.conflict:
            raise
    return kube.get(f"{collection}/{body['metadata']['name']}")


def _configmap(namespace: str, name: str, data: dict[str, str]) -> Obj:
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def _deployment(
    namespace: str,
    name: str,
    labels: dict[str, str],
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {ROLE_LABEL: "system"},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": containers,
                    "volumes": volumes,
                },
            },
        },
    }
