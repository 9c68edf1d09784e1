"""Shared helpers of the SharingPolicy integration tests (real API server, simulated agents)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from builders import SharingPolicyWrapper
from devcluster import fleet, gpunode, hami_nvidia
from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c

from .helpers import condition, eventually

SP = "/apis/tessera.io/v1alpha1/sharingpolicies"
PLUGIN_CM = path_of("v1", "configmaps", c.DEVICE_PLUGIN_CONFIGMAP_NAME, "gpu-operator")
HAMI_CM = path_of("v1", "configmaps", c.HAMI_NVIDIA_CONFIGMAP_NAME, "kube-system")
GPU = "nvidia.com/gpu"


def nodes(
    kube: Kube, pool: str, count: int, mig_strategy: str = "mixed", *, hami: bool = False
) -> list[str]:
    """``count`` 8-GPU H100 nodes; MPS needs ``mig_strategy="none"`` (the plugin refuses mixed).
    ``hami``: labelled ``gpu=on``, where HAMi's device plugin runs (``hami_nvidia``)."""
    specs = fleet.pool(pool, "H100-80GB", count)
    if hami:
        specs = [replace(s, labels={**s.labels, hami_nvidia.NODE_LABEL: "on"}) for s in specs]
    names = fleet.create_nodes(kube, specs)
    if mig_strategy != "mixed":
        for name in names:
            patch = {"metadata": {"labels": {c.MIG_STRATEGY_LABEL: mig_strategy}}}
            kube.patch(path_of("v1", "nodes", name), patch)
    return names


def create_policy(kube: Kube, name: str, pool: str, backend: str, **spec: Any) -> None:
    kube.create(SP, SharingPolicyWrapper(name).pool(pool).backend(backend).spec(**spec).obj())


def create_ascend_policy(kube: Kube, name: str, pool: str, ascend: Any, **spec: Any) -> None:
    """An Exclusive policy with an ``ascend`` section, rolled out one node at a time."""
    rollout = {"maxUnavailable": 1}
    create_policy(kube, name, pool, "Exclusive", ascend=ascend, **spec, rollout=rollout)


def policy(kube: Kube, name: str) -> Obj | None:
    return kube.get_or_none(f"{SP}/{name}")


def ready(kube: Kube, name: str) -> Obj | None:
    """The policy once Ready=True for its current generation."""
    obj = policy(kube, name)
    cond = condition(obj, "Ready")
    if obj and cond and cond["status"] == "True":
        generation = obj["metadata"]["generation"]
        if obj["status"]["observedGeneration"] == generation == cond["observedGeneration"]:
            return obj
    return None


def wait_ready(kube: Kube, name: str, timeout: float = 60) -> Obj:
    try:
        return eventually(lambda: ready(kube, name), timeout, f"SharingPolicy {name} Ready")
    except AssertionError as err:
        status = (policy(kube, name) or {}).get("status")
        raise AssertionError(f"{err}\nstatus: {json.dumps(status, indent=1)}") from None


def delete_policy(kube: Kube, name: str) -> None:
    kube.delete(f"{SP}/{name}")
    eventually(lambda: policy(kube, name) is None, 60, f"SharingPolicy {name} gone")


def node(kube: Kube, name: str) -> Obj:
    return kube.get(path_of("v1", "nodes", name))


def label(kube: Kube, name: str, key: str = c.DEVICE_PLUGIN_CONFIG_LABEL) -> str | None:
    labels: dict[str, str] = node(kube, name)["metadata"].get("labels") or {}
    return labels.get(key)


def allocatable(kube: Kube, name: str, resource: str = GPU) -> int:
    return int(node(kube, name)["status"]["allocatable"].get(resource, "0"))


def plugin_data(kube: Kube) -> dict[str, str]:
    cm = kube.get_or_none(PLUGIN_CM) or {}
    return dict(cm.get("data") or {})


def hami_entries(kube: Kube) -> dict[str, dict[str, Any]]:
    cm = kube.get_or_none(HAMI_CM) or {}
    doc = json.loads((cm.get("data") or {}).get(c.HAMI_NVIDIA_CONFIGMAP_KEY) or "{}")
    return {e["name"]: e for e in doc.get("nodeconfig") or []}


def set_hami_entries(kube: Kube, entries: Iterable[dict[str, Any]]) -> None:
    text = json.dumps({"nodeconfig": list(entries)})
    kube.patch(HAMI_CM, {"data": {c.HAMI_NVIDIA_CONFIGMAP_KEY: text}})


def events(kube: Kube, name: str, reason: str | None = None) -> list[str]:
    found = kube.list(
        path_of("v1", "events", namespace="default"),
        field_selector=f"involvedObject.name={name}",
    )
    return [e["message"] for e in found if reason is None or e.get("reason") == reason]


def event_with(kube: Kube, name: str, reason: str, *words: str) -> str | None:
    for message in events(kube, name, reason):
        if all(w in message for w in words):
            return message
    return None


def no_plugin_errors(kube: Kube, names: Iterable[str]) -> None:
    """Tessera must never point a node at a key the config-manager cannot find."""
    for name in names:
        notes = node(kube, name)["metadata"].get("annotations") or {}
        assert gpunode.PLUGIN_ERROR not in notes, f"{name}: {notes[gpunode.PLUGIN_ERROR]}"


def settled(kube: Kube, name: str) -> bool:
    """No rollout left on the node: schedulable, untainted, no state record."""
    obj = node(kube, name)
    notes = obj["metadata"].get("annotations") or {}
    taints = (obj.get("spec") or {}).get("taints") or []
    return (
        not (obj.get("spec") or {}).get("unschedulable")
        and c.NODE_STATE_ANNOTATION not in notes
        and not any(t["key"] == c.GEOMETRY_PENDING_TAINT for t in taints)
    )


class NodeRecorder:
    """Every version of the given nodes the API server sent: who was ever cordoned, and when
    a label changed relative to other events."""

    def __init__(self, kube: Kube, names: Iterable[str]) -> None:
        self.names = set(names)
        self.cordoned: set[str] = set()
        self.labels: list[tuple[str, str | None]] = []
        self._lock = threading.Lock()
        self.informer = Informer(kube, "/api/v1/nodes", self._seen, name="sp-recorder")

    def __enter__(self) -> NodeRecorder:
        self.informer.start()
        eventually(self.informer.synced.is_set, what="node recorder synced")
        return self

    def __exit__(self, *_: object) -> None:
        self.informer.stop()

    def _seen(self, kind: str, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        if name not in self.names or kind == "DELETED":
            return
        with self._lock:
            if (obj.get("spec") or {}).get("unschedulable"):
                self.cordoned.add(name)
            value = (obj["metadata"].get("labels") or {}).get(c.DEVICE_PLUGIN_CONFIG_LABEL)
            if not self.labels or self.labels[-1] != (name, value):
                self.labels.append((name, value))
