"""Which ResourceQuota key enforces a TenantQuota resource, and what kind of resource it is.

A TenantQuota names three kinds of resources, and the API server's quota
system counts each under a different key (kube-apiserver 1.34,
``pkg/quota/v1/evaluator/core/resource_claims.go``):

- an extended resource (``nvidia.com/mig-1g.10gb``) is counted from pod
  requests, and quota accepts it only as ``requests.<resource>``;
- DRA devices of one DeviceClass, ``<class>.deviceclass.resource.k8s.io/devices``,
  are charged by the ResourceClaim evaluator when a claim is created (also a
  claim kube-controller-manager makes from a template), under exactly that
  name: ``requests.<class>.deviceclass...`` is accepted by validation but no
  evaluator counts it, so it would limit nothing;
- object counts, ``count/<resource>.<group>`` (``count/resourceclaims.resource.k8s.io``,
  ``count/resourceclaimtemplates.resource.k8s.io``), are counted per object,
  also under exactly that name.

So a TenantQuota resource is written under ``quota_key(resource)`` and a key
read back maps to ``resource_of(key)``; any other key is not Tessera's.
"""

from __future__ import annotations

REQUESTS = "requests."
DEVICES = ".deviceclass.resource.k8s.io/devices"
COUNT = "count/"


def device_class(resource: str) -> str | None:
    """The DeviceClass a ``<class>.deviceclass.resource.k8s.io/devices`` resource counts."""
    if resource.endswith(DEVICES) and len(resource) > len(DEVICES):
        return resource.removesuffix(DEVICES)
    return None


def devices_of(device_class_name: str) -> str:
    """The quota resource counting devices of ``device_class_name``."""
    return device_class_name + DEVICES


def is_object_count(resource: str) -> bool:
    return resource.startswith(COUNT) and len(resource) > len(COUNT)


def is_extended(resource: str) -> bool:
    """An extended resource, counted from pod requests (what nodes advertise)."""
    return device_class(resource) is None and not is_object_count(resource)


def quota_key(resource: str) -> str:
    """The ResourceQuota ``spec.hard`` key that enforces ``resource``."""
    return REQUESTS + resource if is_extended(resource) else resource


def resource_of(key: str) -> str | None:
    """The TenantQuota resource a ResourceQuota key enforces; None for a key Tessera never writes."""
    if key.startswith(REQUESTS):
        resource = key.removeprefix(REQUESTS)
        return resource if is_extended(resource) else None
    return key if not is_extended(key) else None
