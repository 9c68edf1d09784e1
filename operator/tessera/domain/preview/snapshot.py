"""What ``tessera plan snapshot`` keeps of each object: the fields planning reads, nothing else.

A snapshot is made to be stored (a CI artifact, a file attached to a review),
so it must not carry what a cluster holds in plain text: container env
(secrets passed as values), commands and images, volumes, and the copies
kubectl and the API server keep (``last-applied-configuration``,
``managedFields``). Per kind it keeps exactly what ``tessera.domain.cluster.objects``,
``quota.objects`` and ``preview*`` read, so a plan from the snapshot equals the
plan from the live cluster:

* Pod: name, namespace, uid, creation time, labels, owner references, deletionTimestamp, the
  mirror-pod annotation only; node, per container its name and resource
  requests and limits, the emptyDir volumes (drain refuses to lose them),
  nodeSelector and tolerations (where an evicted pod may go), the ResourceClaims it
  uses; phase, condition types and statuses, the claims made for it.
* Node: name, labels, annotations; unschedulable, taints; allocatable,
  capacity, condition types and statuses.
* PodDisruptionBudget: name, namespace, generation; selector, minAvailable,
  maxUnavailable; disruptionsAllowed and the counts behind it.
* Namespace: name, labels, deletionTimestamp, phase.
* ConfigMap (only the agents' maps Tessera writes): name, namespace, labels,
  annotations, data.
* ResourceQuota (only Tessera's): name, namespace, labels, resourceVersion;
  spec and status hard, used.
* DeviceClass: name, labels, annotations, resourceVersion; spec (selectors, config).
* ResourceSlice: name; driver, nodeName, pool, per device its name and attributes.
* ResourceClaim: name, namespace, labels; per allocated device its driver, pool and device;
  the pods it is reserved for.
* ValidatingAdmissionPolicy and its binding: name, labels, annotations,
  resourceVersion; spec (a pod contract compares with it; a name may be taken).
* Deployment (the schedulers' a SharingPolicy names): name; its containers' names and images.
* Tessera's own objects: whole, but for the two copies above.

Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tessera.api import constants as c

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

Tree = Mapping[str, Any]  # key -> True (keep the value whole) or a Tree (keep those keys)
ALL = True

_META: Tree = {"name": ALL, "namespace": ALL, "labels": ALL}
_RESOURCES: Tree = {"name": ALL, "resources": {"requests": ALL, "limits": ALL}}
KEEP: Mapping[str, Tree] = {
    "Pod": {
        "metadata": {
            **_META,
            "uid": ALL,
            "creationTimestamp": ALL,  # per GPU: a pod newer than the GPU holders' read leaves
            "ownerReferences": {"apiVersion": ALL, "kind": ALL, "name": ALL, "controller": ALL},
            "deletionTimestamp": ALL,
            "annotations": {"kubernetes.io/config.mirror": ALL},
        },
        "spec": {
            "nodeName": ALL,
            "containers": _RESOURCES,
            "initContainers": _RESOURCES,
            "volumes": {"name": ALL, "emptyDir": ALL},
            "nodeSelector": ALL,  # where an evicted pod may go (the capacity check)
            "tolerations": ALL,
            "resourceClaims": {"name": ALL, "resourceClaimName": ALL},  # DRA: what it holds
        },
        "status": {
            "phase": ALL,
            "conditions": {"type": ALL, "status": ALL},  # a DRA kubelet plugin's readiness
            "resourceClaimStatuses": ALL,  # the claims made for it from templates
        },
    },
    "Node": {
        "metadata": {**_META, "annotations": ALL},
        "spec": {"unschedulable": ALL, "taints": ALL},
        "status": {
            "allocatable": ALL,
            "capacity": ALL,
            "conditions": {"type": ALL, "status": ALL},
        },
    },
    "PodDisruptionBudget": {
        "metadata": {**_META, "generation": ALL},
        "spec": {
            "selector": ALL,
            "minAvailable": ALL,
            "maxUnavailable": ALL,
            "unhealthyPodEvictionPolicy": ALL,
        },
        "status": {
            "disruptionsAllowed": ALL,
            "observedGeneration": ALL,
            "currentHealthy": ALL,
            "desiredHealthy": ALL,
            "expectedPods": ALL,
        },
    },
    "Namespace": {
        "metadata": {**_META, "deletionTimestamp": ALL},
        "status": {"phase": ALL},
    },
    "ConfigMap": {"metadata": {**_META, "annotations": ALL}, "data": ALL},
    "ResourceQuota": {
        "metadata": {**_META, "resourceVersion": ALL},
        "spec": {"hard": ALL},
        "status": {"hard": ALL, "used": ALL},
    },
    # a scheduler Deployment a SharingPolicy names: its image tag is HAMi's or Volcano's version
    "Deployment": {
        "metadata": _META,
        "spec": {"template": {"spec": {"containers": {"name": ALL, "image": ALL}}}},
    },
    "DeviceClass": {"metadata": {**_META, "annotations": ALL, "resourceVersion": ALL}, "spec": ALL},
    "ValidatingAdmissionPolicy": {
        "metadata": {**_META, "annotations": ALL, "resourceVersion": ALL},
        "spec": ALL,
    },
    "ValidatingAdmissionPolicyBinding": {
        "metadata": {**_META, "annotations": ALL, "resourceVersion": ALL},
        "spec": ALL,
    },
    # who holds which GPU on a DRA pool: the devices allocated, the pods reserved for
    "ResourceClaim": {
        "metadata": _META,
        "status": {
            "allocation": {"devices": {"results": {"driver": ALL, "pool": ALL, "device": ALL}}},
            "reservedFor": ALL,
        },
    },
    "ResourceSlice": {
        "metadata": _META,
        "spec": {
            "driver": ALL,
            "nodeName": ALL,
            "pool": ALL,
            "devices": {"name": ALL, "attributes": ALL},
        },
    },
}


def minimal(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` as a snapshot stores it: apiVersion, kind, and the fields ``KEEP`` names."""
    kind = str(obj.get("kind", ""))
    tessera = str(obj.get("apiVersion", "")).startswith(c.GROUP + "/")
    whole: Tree = {"metadata": ALL, "spec": ALL, "status": ALL}
    tree = whole if tessera else KEEP.get(kind, {"metadata": _META})
    kept: dict[str, Any] = {"apiVersion": obj.get("apiVersion"), "kind": kind}
    kept.update(_pick(obj, tree))
    meta = kept.get("metadata") or {}
    meta.pop("managedFields", None)
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    if notes:
        meta["annotations"] = notes
    else:
        meta.pop("annotations", None)
    return kept


def _pick(value: Any, tree: Any) -> Any:
    if tree is ALL:
        return _copy(value)
    if isinstance(value, list):
        return [_pick(item, tree) for item in value]
    if not isinstance(value, Mapping):
        return value
    return {key: _pick(value[key], sub) for key, sub in tree.items() if key in value}


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
