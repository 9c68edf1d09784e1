"""Volcano's scheduler side after the first write: a restart that has not completed, and a
policy that stops naming Volcano — on the real control plane, the operator under its own
ServiceAccount (fixtures and helpers: test_volcano).

- A person restarts Volcano by deleting its pod while its node is cordoned: the new pod is
  newer than the change but never starts, so Volcano has read nothing — RestartPending, not
  Ready, until the rollout completes.
- A policy switches from Volcano to HAMi: Tessera's deviceshare arguments, its marks on the
  conf and its geometries map go, the team's conf comes back byte for byte.
"""

from __future__ import annotations

import yaml

from devcluster import fleet
from devcluster.scheduling import KWOK_ANNOTATION
from tessera.adapters.kube import Kube, path_of
from tessera.domain.schedulers.volcano import plan as vp

from .helpers import app_pods, eventually, namespace, wait_running
from .sharing_support import SP, policy, wait_ready
from .test_volcano import (
    CONF,
    SCHEDULER,
    VOLCANO_CM,
    _conf,
    _configmap,
    _create,
    _deployment,
    _geometries,
    _message,
    _policy,
    _pool,
    _reason,
    _volcano,
    _wait_reason,
    c,
    hami,
    own_policies,
)

__all__ = ["hami", "own_policies"]  # test_volcano's fixtures: HAMi installed, policies go


def _node(kube: Kube, name: str) -> None:
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    labels = {fleet.SIMULATED_LABEL: "true", "kubernetes.io/hostname": name}
    manifest = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
        "status": {"capacity": resources, "allocatable": resources},
    }
    if kube.get_or_none(path_of("v1", "nodes", name)) is None:
        fleet.create_from_manifests(kube, [manifest])


def _marks(kube: Kube, ns: str) -> list[str]:
    meta = kube.get(path_of("v1", "configmaps", VOLCANO_CM, ns))["metadata"]
    keys = [*(meta.get("annotations") or {}), *(meta.get("labels") or {})]
    return sorted(k for k in keys if k.startswith("tessera.io/"))


def _settled(kube: Kube, ns: str, name: str) -> None:
    """Wait until Tessera's change is whole (the pool's chip is in the geometries map: the
    node's chip label may come after the first pass) and the policy waits for that change."""

    def whole() -> bool:
        found = _geometries(kube, ns)
        doc = yaml.safe_load((found or {}).get("data", {}).get("device-config.yaml") or "{}")
        chips = [e.get("chipName") for e in ((doc.get("vnpus") or {}).get("configs") or [])]
        notes = kube.get(path_of("v1", "configmaps", VOLCANO_CM, ns))["metadata"]
        changed = (notes.get("annotations") or {}).get(vp.CHANGED_ANNOTATION, "")
        obj = _reason(kube, name, "RestartPending")
        return (
            "310P3" in chips and bool(changed) and changed in _message(obj or {}, "RestartPending")
        )

    eventually(whole, 90, f"{name}: the whole change written, a restart pending")


def test_a_restart_whose_new_pod_cannot_start_stays_pending(kube: Kube) -> None:
    ns, pool, name, node = "vc-rollout", "vc-rollout", "vc-rollout", "vc-rollout-system"
    _node(kube, node)
    namespace(kube, ns)
    _create(kube, _configmap(ns, VOLCANO_CM, c.VOLCANO_SCHEDULER_CONFIGMAP_KEY, CONF))
    deployment = _deployment(ns, SCHEDULER, "volcanosh/vc-scheduler:v1.16.0")
    # Pinned: this test is about a restart whose node is cordoned, so the pod must run on it.
    deployment["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    _create(kube, deployment)
    wait_running(kube, ns, SCHEDULER, 1)
    _pool(kube, pool)
    _policy(kube, name, pool, ns, weight=10)
    _settled(kube, ns, name)
    # the person restarts Volcano by deleting its pod, but its node is cordoned
    kube.patch(path_of("v1", "nodes", node), {"spec": {"unschedulable": True}})
    notes = kube.get(path_of("v1", "configmaps", VOLCANO_CM, ns))["metadata"]["annotations"]
    changed = notes[vp.CHANGED_ANNOTATION]
    try:

        def replaced() -> bool:
            """A pod created after the change (RFC 3339 seconds: a pod of the change's own
            second is not counted newer, so the person deletes that one too)."""
            live = app_pods(kube, ns, SCHEDULER)
            if any(p["metadata"]["creationTimestamp"] > changed for p in live):
                return True
            for pod in live:
                kube.delete(path_of("v1", "pods", pod["metadata"]["name"], ns))
            return False

        eventually(replaced, 60, "a scheduler pod newer than the change (Pending: node cordoned)")
        # a new pass (a new generation) sees every live pod newer than the change, none running
        kube.patch(f"{SP}/{name}", {"spec": {"rollout": {"maxUnavailable": 2}}})
        obj = _wait_reason(kube, name, "RestartPending", 90)
        assert "rollout not complete" in _message(obj, "RestartPending")
        assert obj["status"]["scheduler"]["restartPending"] is True
    finally:
        kube.patch(path_of("v1", "nodes", node), {"spec": {"unschedulable": False}})
    obj = wait_ready(kube, name, timeout=90)
    assert obj["status"]["scheduler"]["restartPending"] is False


def test_a_policy_switching_to_hami_gives_volcano_its_conf_back(kube: Kube) -> None:
    ns, pool, name = "vc-switch", "vc-switch", "vc-switch"
    _pool(kube, pool)
    _volcano(kube, ns)
    _policy(kube, name, pool, ns, weight=10)
    _wait_reason(kube, name, "RestartPending", 90)
    assert _conf(kube, ns) != CONF and _geometries(kube, ns) is not None
    assert _marks(kube, ns)
    # the platform engineer moves the pool to HAMi's scheduler
    kube.patch(f"{SP}/{name}", {"spec": {"scheduler": {"name": "HAMi", "volcano": None}}})
    eventually(lambda: _conf(kube, ns) == CONF, 90, "the team's conf back byte for byte")
    eventually(lambda: _geometries(kube, ns) is None, 30, "Tessera's geometries map gone")
    assert _marks(kube, ns) == []

    def status_without_volcano() -> bool:
        found = (policy(kube, name) or {}).get("status") or {}
        maps = (found.get("scheduler") or {}).get("configMaps") or []
        return bool(maps) and not any(VOLCANO_CM in m for m in maps)

    eventually(status_without_volcano, 60, "status.scheduler names HAMi's map only")
