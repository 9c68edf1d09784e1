"""What a preview reads: the cluster's objects (``Cluster``) and where the agents' ConfigMaps
live (``Locations``), and how a manifest compares with its live object (``object_action``).

The bottom of the ``tessera.domain.preview`` chain: it imports no other module of the package.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import ValidationError

from tessera.api import constants as c
from tessera.api.v1alpha1 import KINDS

Raw = Mapping[str, Any]
KIND_ORDER = ("NodePoolGeometry", "SharingPolicy", "TenantQuota")
ObjectAction = Literal["create", "update", "unchanged", "delete"]


@dataclass(frozen=True)
class Locations:
    """Where the agents' ConfigMaps live (the operator's settings; defaults = GPU Operator's)."""

    mig: tuple[str, str] = (c.MIG_PARTED_CONFIGMAP_NAMESPACE, c.MIG_PARTED_CONFIGMAP_NAME)
    vnpu: tuple[str, str] = (c.VNPU_CONFIGMAP_NAMESPACE, c.VNPU_CONFIGMAP_NAME)
    device_plugin: tuple[str, str] = (
        c.DEVICE_PLUGIN_CONFIGMAP_NAMESPACE,
        c.DEVICE_PLUGIN_CONFIGMAP_NAME,
    )
    hami_namespace: str = c.HAMI_NAMESPACE
    vgpu: tuple[str, str] = (c.VGPU_CONFIGMAP_NAMESPACE, c.VGPU_CONFIGMAP_NAME)


@dataclass(frozen=True)
class Cluster:
    """The objects a preview reads, as the API server returns them."""

    nodes: tuple[Raw, ...] = ()
    pods: tuple[Raw, ...] = ()
    pdbs: tuple[Raw, ...] = ()
    namespaces: tuple[Raw, ...] = ()
    configmaps: tuple[Raw, ...] = ()
    quotas: tuple[Raw, ...] = ()  # ResourceQuotas
    objects: tuple[Raw, ...] = ()  # Tessera's own kinds
    device_classes: tuple[Raw, ...] = ()  # every DeviceClass (a name Tessera wants may be taken)
    slices: tuple[Raw, ...] = ()  # ResourceSlices
    admission: tuple[Raw, ...] = ()  # ValidatingAdmissionPolicies and their bindings
    deployments: tuple[Raw, ...] = ()  # the scheduler Deployments SharingPolicies name
    claims: tuple[Raw, ...] = ()  # ResourceClaims: who holds which GPU on a DRA pool

    @classmethod
    def of(cls, items: Iterable[Raw]) -> Cluster:
        """Sort a flat list (a snapshot file) by kind; other kinds are ignored."""
        slots: dict[str, list[Raw]] = {
            "Node": [],
            "Pod": [],
            "PodDisruptionBudget": [],
            "Namespace": [],
            "ConfigMap": [],
            "ResourceQuota": [],
            "tessera": [],
            "DeviceClass": [],
            "ResourceSlice": [],
            "ValidatingAdmissionPolicy": [],
            "ValidatingAdmissionPolicyBinding": [],
            "Deployment": [],
            "ResourceClaim": [],
        }
        for item in items:
            kind = item.get("kind", "")
            if str(item.get("apiVersion", "")).startswith(c.GROUP + "/"):
                slots["tessera"].append(item)
            elif kind in slots:
                slots[kind].append(item)
        return cls(
            tuple(slots["Node"]),
            tuple(slots["Pod"]),
            tuple(slots["PodDisruptionBudget"]),
            tuple(slots["Namespace"]),
            tuple(slots["ConfigMap"]),
            tuple(slots["ResourceQuota"]),
            tuple(slots["tessera"]),
            tuple(slots["DeviceClass"]),
            tuple(slots["ResourceSlice"]),
            (*slots["ValidatingAdmissionPolicy"], *slots["ValidatingAdmissionPolicyBinding"]),
            tuple(slots["Deployment"]),
            tuple(slots["ResourceClaim"]),
        )

    def items(self) -> list[Raw]:
        return [
            *self.namespaces,
            *self.nodes,
            *self.pods,
            *self.pdbs,
            *self.configmaps,
            *self.quotas,
            *self.objects,
            *self.device_classes,
            *self.slices,
            *self.admission,
            *self.deployments,
            *self.claims,
        ]

    def configmap(self, where: tuple[str, str]) -> Raw | None:
        namespace, name = where
        for cm in self.configmaps:
            meta = cm["metadata"]
            if meta.get("namespace") == namespace and meta["name"] == name:
                return cm
        return None

    def of_kind(self, kind: str) -> dict[str, Raw]:
        return {o["metadata"]["name"]: o for o in self.objects if o.get("kind") == kind}

    def with_objects(self, manifests: Iterable[Raw]) -> Cluster:
        """The cluster as it would be once ``manifests`` are applied (by kind and name)."""
        incoming = {(m["kind"], m["metadata"]["name"]): m for m in manifests}
        merged: list[Raw] = []
        for obj in self.objects:
            key = (obj.get("kind", ""), obj["metadata"]["name"])
            live_meta = obj["metadata"]
            new = incoming.pop(key, None)
            if new is None:
                merged.append(obj)
                continue
            # the annotations a person put on the live object (an approval) survive an apply
            notes = {**(live_meta.get("annotations") or {}), **_annotations(new)}
            merged.append({**new, "metadata": {**new["metadata"], "annotations": notes}})
        return replace(self, objects=(*merged, *incoming.values()))


def _annotations(obj: Raw) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def object_action(kind: str, live: Raw | None, new: Raw) -> ObjectAction:
    """Compared as parsed specs, so defaults the API server filled in are no difference."""
    if live is None:
        return "create"
    spec = {k.kind: k.spec for k in KINDS}[kind]
    try:
        same = spec.model_validate(live.get("spec") or {}) == spec.model_validate(
            new.get("spec") or {}
        )
    except ValidationError:
        same = False
    return "unchanged" if same else "update"
