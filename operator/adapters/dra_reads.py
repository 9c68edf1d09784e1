"""Reads for rollouts on DRA pools: NVIDIA's ResourceSlices, ResourceClaims, plugin pods.

Three lists, each one request per pass: the slices of driver ``gpu.nvidia.com`` (a
field selector the API server supports for ResourceSlices), every ResourceClaim (read
only while a pass reads pods: a drain, or the room check), and the pods of the namespace
the driver's kubelet plugin runs in (read only while a node of the pool is in flight).
"""

from __future__ import annotations

from tessera.domain.rollout.dra_views import DRIVER

from .kube import Kube, Obj, path_of

RESOURCE_API = "resource.k8s.io/v1"
SLICES = path_of(RESOURCE_API, "resourceslices")
CLAIMS = path_of(RESOURCE_API, "resourceclaims")


def slices(kube: Kube) -> list[Obj]:
    return kube.list(SLICES, field_selector=f"spec.driver={DRIVER}")


def claims(kube: Kube) -> list[Obj]:
    return kube.list(CLAIMS)


def pods_in(kube: Kube, namespace: str) -> list[Obj]:
    return kube.list(path_of("v1", "pods", namespace=namespace))
