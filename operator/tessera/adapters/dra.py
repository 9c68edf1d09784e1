"""DRA objects (``resource.k8s.io/v1``) through the one client: DeviceClasses, ResourceSlices,
ResourceClaims, the pods of the namespace a driver's kubelet plugin runs in, and Tessera's
DeviceTaintRules (``resource.k8s.io/v1alpha3`` on 1.34: served only with the
``DRADeviceTaints`` gate and the alpha version switched on).

Thin verbs over ``Kube``: every write carries the resourceVersion it was planned from (an
update is a PUT of the object read, a delete has a precondition), so a write that meets
another writer is a 409 the caller re-plans from, never a lost change. A server without the
``resource.k8s.io/v1`` API (older than 1.34, or DRA switched off) lists nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tessera.adapters.api_errors import ApiError, Obj
from tessera.adapters.kube import Kube

DEVICECLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
RESOURCESLICES = "/apis/resource.k8s.io/v1/resourceslices"
RESOURCECLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
DEVICETAINTRULES = "/apis/resource.k8s.io/v1alpha3/devicetaintrules"


def _listed(kube: Kube, path: str, field_selector: str | None = None) -> list[Obj]:
    try:
        return kube.list(path, field_selector=field_selector)
    except ApiError as err:
        if err.not_found:  # no resource.k8s.io/v1 on this server: nothing of it exists
            return []
        raise


def list_classes(kube: Kube) -> list[Obj]:
    return _listed(kube, DEVICECLASSES)


def list_slices(kube: Kube, driver: str) -> list[Obj]:
    """The ResourceSlices of ``driver`` (a field the API server selects on)."""
    return _listed(kube, RESOURCESLICES, f"spec.driver={driver}")


def list_claims(kube: Kube) -> list[Obj]:
    """Every ResourceClaim (a rollout reads them only while a pass reads pods)."""
    return _listed(kube, RESOURCECLAIMS)


def list_pods_in(kube: Kube, namespace: str) -> list[Obj]:
    """The pods of ``namespace``: where a driver's kubelet-plugin DaemonSet runs."""
    return kube.list(f"/api/v1/namespaces/{namespace}/pods")


def create_class(kube: Kube, manifest: Mapping[str, Any]) -> Obj:
    return kube.create(DEVICECLASSES, manifest)


def replace_class(kube: Kube, current: Obj, metadata: Mapping[str, Any], spec: Obj) -> Obj:
    """``current`` with Tessera's labels and annotations merged in and ``spec`` replaced,
    as of its resourceVersion (others' labels and annotations are kept)."""
    body = {**copy.deepcopy(current), "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass"}
    meta = body["metadata"]
    meta.setdefault("labels", {}).update(metadata.get("labels") or {})
    meta.setdefault("annotations", {}).update(metadata.get("annotations") or {})
    body["spec"] = spec
    return kube.replace(f"{DEVICECLASSES}/{meta['name']}", body)


def delete_class(kube: Kube, name: str, resource_version: str) -> None:
    """Delete the class as read; one already gone (deleted meanwhile) is done, not an error."""
    body = {"preconditions": {"resourceVersion": resource_version}} if resource_version else None
    try:
        kube.delete(f"{DEVICECLASSES}/{name}", body)
    except ApiError as err:
        if not err.not_found:
            raise


def list_taint_rules(kube: Kube, label_selector: str) -> list[Obj] | None:
    """The DeviceTaintRules ``label_selector`` selects; ``None`` when the server does not
    serve them (no ``DRADeviceTaints``, or ``resource.k8s.io/v1alpha3`` off)."""
    try:
        return kube.list(DEVICETAINTRULES, label_selector=label_selector)
    except ApiError as err:
        if err.not_found:
            return None
        raise


def create_taint_rule(kube: Kube, manifest: Mapping[str, Any]) -> None:
    """Create the rule; one of that name already there (a pass that stopped after it) is
    left for the next pass's comparison, not an error."""
    try:
        kube.create(DEVICETAINTRULES, manifest)
    except ApiError as err:
        if not err.conflict:
            raise


def delete_taint_rule(kube: Kube, name: str, resource_version: str) -> None:
    """Delete the rule as read; one already gone is done."""
    body = {"preconditions": {"resourceVersion": resource_version}} if resource_version else None
    try:
        kube.delete(f"{DEVICETAINTRULES}/{name}", body)
    except ApiError as err:
        if not err.not_found:
            raise
